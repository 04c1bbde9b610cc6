"""The shapes whose closest points are found numerically, by projected Newton on the
parameterisation: twin peaks (a Gaussian bump over a square) and the swiss roll."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from geomopt.manifolds._base import _TWO_PI, Manifold, _check_noise, _safe_norm


def _box_newton_step(u, grad, hess, lo, hi):
    """One projected-Newton step for ``min g(u)`` on the square ``[lo, hi]^2`` (2-D ``u``).

    Coordinates at a bound whose gradient pushes outward are frozen (active set); the Newton
    system is solved on the free ones, and the result is clipped to the box.
    """
    active = ((u <= lo) & (grad > 0)) | ((u >= hi) & (grad < 0))
    free = ~active
    mask = free[:, None] & free[None, :]
    eye = jnp.eye(2, dtype=u.dtype)
    h = jnp.where(mask, hess, 0.0) + jnp.where(active[:, None], eye, 0.0)
    g = jnp.where(free, grad, 0.0)
    det = h[0, 0] * h[1, 1] - h[0, 1] * h[1, 0]
    step = jnp.stack([h[1, 1] * g[0] - h[0, 1] * g[1], h[0, 0] * g[1] - h[1, 0] * g[0]]) / det
    return jnp.clip(u - step, lo, hi)


class TwinPeaks(Manifold):
    """Graph ``z = f(u, v) = height exp(-(u^2 + v^2) / (2 width^2))`` over ``[-1, 1]^2``.

    The paper's "twin peaks" (one Gaussian bump, height 0.5, width 0.5, noise 0.01).
    ``u = (u, v)``, the horizontal position; normal ``(-f_u, -f_v, 1) / |.|`` (points up).

    Closest point: no closed form. ``coords`` minimises ``|(u, v, f(u, v)) - x|^2 / 2`` over
    the square by ``newton_steps`` projected Newton steps from ``(x, y)`` clipped to the square
    (exact Hessian, replaced by the Gauss-Newton matrix ``I + grad f grad f^T`` where the exact
    one is not positive definite; active-set handling of the square's edges). The bump's
    curvature radius is >= 0.5, so for points within ~0.3 of the surface the minimiser is unique
    and this converges quadratically to machine precision (checked against brute force).
    """

    height: float = eqx.field(static=True)
    width: float = eqx.field(static=True)
    half_size: float = eqx.field(static=True)
    newton_steps: int = eqx.field(static=True)

    def __init__(
        self,
        height: float = 0.5,
        width: float = 0.5,
        half_size: float = 1.0,
        default_noise: float = 0.01,
        newton_steps: int = 12,
    ):
        if not (width > 0 and half_size > 0):
            raise ValueError(f"width {width!r}, half_size {half_size!r}: expected > 0")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "twin_peaks", 3, 2
        self.height, self.width, self.half_size = float(height), float(width), float(half_size)
        self.default_noise, self.newton_steps = float(default_noise), int(newton_steps)

    def height_at(self, uv: Float[Array, " 2"]) -> Float[Array, ""]:
        """``f(u, v)``."""
        return self.height * jnp.exp(-jnp.sum(uv * uv) / (2 * self.width**2))

    def embed(self, u):
        u = self._check_coords(u)
        return jnp.concatenate([u, self.height_at(u)[None]])

    def normal_at(self, u):
        u = self._check_coords(u)
        gf = jax.grad(self.height_at)(u)
        n = jnp.concatenate([-gf, jnp.ones((1,), u.dtype)])
        return n / _safe_norm(n)

    def sample_coords(self, key, n):
        return jax.random.uniform(key, (n, 2), minval=-self.half_size, maxval=self.half_size)

    def coords(self, x):
        x = self._check_point(x)
        lo, hi = -self.half_size, self.half_size

        eye = jnp.eye(2, dtype=x.dtype)

        def step(_, uv):
            f = self.height_at(uv)
            gf = -f * uv / self.width**2  # grad f
            hf = f * (jnp.outer(uv, uv) / self.width**4 - eye / self.width**2)  # Hessian of f
            g = uv - x[:2] + (f - x[2]) * gf
            gauss_newton = eye + jnp.outer(gf, gf)
            h = gauss_newton + (f - x[2]) * hf
            pd = (h[0, 0] > 0) & (h[0, 0] * h[1, 1] - h[0, 1] * h[1, 0] > 0)
            return _box_newton_step(uv, g, jnp.where(pd, h, gauss_newton), lo, hi)

        return jax.lax.fori_loop(0, self.newton_steps, step, jnp.clip(x[:2], lo, hi))


class SwissRoll(Manifold):
    """Swiss roll ``(a t cos t, h, a t sin t)``, ``t in [t_min, t_max]``, ``h in [-H, H]``.

    Defaults ``a = 0.1``, ``t in [1.5 pi, 4.5 pi]``, ``H = 1`` (scikit-learn's roll scaled by
    0.1; neighbouring turns are ``2 pi a ~ 0.63`` apart). ``u = (t, h)``, sampled uniformly.
    The normal ``(c'_z, 0, -c'_x) / |c'|`` of the planar spiral ``c(t) = a t (cos t, sin t)``
    points away from the roll's axis.

    Closest point: the surface is the product of the spiral and a segment, so
    ``h = clip(y, -H, H)`` exactly, and ``t`` minimises the planar distance to the spiral. That
    has no closed form: ``coords`` starts one Newton iteration per turn (``t_k = atan2(z, x) +
    2 pi k``, clipped to the range, plus both ends), runs ``newton_steps`` clipped Newton
    steps on each (Gauss-Newton where the second derivative is not positive) and keeps the
    closest, which finds the global minimiser for points near the roll (checked against brute
    force).
    """

    scale: float = eqx.field(static=True)
    t_min: float = eqx.field(static=True)
    t_max: float = eqx.field(static=True)
    half_height: float = eqx.field(static=True)
    newton_steps: int = eqx.field(static=True)

    def __init__(
        self,
        scale: float = 0.1,
        t_min: float = 1.5 * math.pi,
        t_max: float = 4.5 * math.pi,
        half_height: float = 1.0,
        default_noise: float = 0.01,
        newton_steps: int = 10,
    ):
        if not (scale > 0 and 0 < t_min < t_max and half_height > 0):
            raise ValueError(
                f"swiss roll scale={scale!r}, t in [{t_min!r}, {t_max!r}], "
                f"half_height={half_height!r}: expected positive values and t_min < t_max"
            )
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "swiss_roll", 3, 2
        self.scale, self.t_min, self.t_max = float(scale), float(t_min), float(t_max)
        self.half_height, self.default_noise = float(half_height), float(default_noise)
        self.newton_steps = int(newton_steps)

    def _spiral(self, t):
        return self.scale * t * jnp.stack([jnp.cos(t), jnp.sin(t)])

    def embed(self, u):
        t, h = self._check_coords(u)
        c = self._spiral(t)
        return jnp.stack([c[0], h, c[1]])

    def normal_at(self, u):
        t, _ = self._check_coords(u)
        dc = jax.jacfwd(self._spiral)(t)
        n = jnp.stack([dc[1], jnp.zeros_like(t), -dc[0]])
        return n / _safe_norm(n)

    def sample_coords(self, key, n):
        kt, kh = jax.random.split(key)
        t = jax.random.uniform(kt, (n,), minval=self.t_min, maxval=self.t_max)
        h = jax.random.uniform(kh, (n,), minval=-self.half_height, maxval=self.half_height)
        return jnp.stack([t, h], axis=-1)

    def coords(self, x):
        x = self._check_point(x)
        p = jnp.stack([x[0], x[2]])

        a = self.scale

        def objective(t):
            return 0.5 * jnp.sum((self._spiral(t) - p) ** 2)

        def newton(t0):
            def step(_, t):
                c, s = jnp.cos(t), jnp.sin(t)
                r = self._spiral(t) - p
                d1 = a * jnp.stack([c - t * s, s + t * c])  # c'(t)
                d2 = a * jnp.stack([-2 * s - t * c, 2 * c - t * s])  # c''(t)
                gn = jnp.sum(d1 * d1)
                curv = gn + jnp.sum(d2 * r)
                h = jnp.where(curv > 0, curv, gn)
                return jnp.clip(t - jnp.sum(d1 * r) / h, self.t_min, self.t_max)

            return jax.lax.fori_loop(0, self.newton_steps, step, t0)

        n_turns = math.ceil((self.t_max - self.t_min) / _TWO_PI) + 2
        k0 = math.floor(self.t_min / _TWO_PI)
        phi = jnp.arctan2(p[1], p[0])
        starts = phi + _TWO_PI * jnp.arange(k0, k0 + n_turns + 1, dtype=p.dtype)
        starts = jnp.concatenate(
            [jnp.clip(starts, self.t_min, self.t_max), jnp.array([self.t_min, self.t_max], p.dtype)]
        )
        ts = jax.vmap(newton)(starts)
        best = ts[jnp.argmin(jax.vmap(objective)(ts))]
        h = jnp.clip(x[1], -self.half_height, self.half_height)
        return jnp.stack([best, h])
