"""Synthetic manifolds: noisy samplers, closest-point projection, distances, normals, coordinates.

Six shapes, all of codimension one (curves in the plane, surfaces in space), so each has a unit
normal and a signed distance:

=============  =====  ===================================================================  =======
name           space  embedding of the intrinsic coordinates ``u``                          noise
=============  =====  ===================================================================  =======
``circle``     R^2    ``r (cos t, sin t)``, r = 1, t ~ U[0, 2 pi)                           0.01
``sphere``     R^3    ``r (sin th cos ph, sin th sin ph, cos th)``, r = 1, area-uniform     0.01
``torus``      R^3    ``((R + r cos th) cos ph, (R + r cos th) sin ph, r sin th)``,         0.005
                      R = 1.2, r = 0.4, th, ph ~ U[0, 2 pi) (the official code's sampler)
``twin_peaks`` R^3    ``(u, v, 0.5 exp(-(u^2 + v^2) / (2 * 0.5^2)))``, u, v ~ U[-1, 1]       0.01
``swiss_roll`` R^3    ``(a t cos t, h, a t sin t)``, a = 0.1, t ~ U[1.5 pi, 4.5 pi],         0.01
                      h ~ U[-1, 1] (scikit-learn's roll scaled by 0.1, height 2)
``two_moons``  R^2    outer arc ``(cos s, sin s)``, s in [0, pi], inner arc                  0.01
                      ``(1 - cos s', 0.5 - sin s')``, s' in [0, pi] (scikit-learn's moons)
=============  =====  ===================================================================  =======

Torus and twin peaks follow the GFM paper's official code (its "twin peaks" is a single
Gaussian bump). ``sample`` draws the intrinsic coordinates as stated (uniform in the
parameters, except the sphere which is area-uniform) and adds isotropic Gaussian noise of
standard deviation ``noise`` in the ambient space.

Closest points (``project``) are exact in closed form for the circle, sphere, torus and two
moons (a circular arc's closest point is radial, or an end point). For twin peaks and the swiss
roll there is no closed form; they are computed numerically and documented on each class:
projected Newton on the parameterisation from a good initial guess (several guesses for the
roll, one per turn), run for a fixed number of steps, which converges to machine precision for
the points the tests check (within ~0.3 of the surface), validated against brute-force dense
sampling in ``tests/test_manifolds.py``.

Every method acts on ONE point ``x`` of shape ``(ambient_dim,)`` (vmap for batches); all are
jittable. ``distance`` is unsigned; ``signed_distance`` is positive on the side the normal
points to (outside for the closed circle, sphere and torus; up for twin peaks; away from the
roll's axis for the swiss roll; away from each arc's centre for two moons). Near a boundary
(twin peaks' square edge, the roll's ends, the moons' tips) the closest point may be on the
boundary; then ``|signed_distance| = distance`` still holds and the sign is that of
``<x - project(x), normal(x)>``.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

__all__ = [
    "Manifold",
    "Circle",
    "Sphere",
    "Torus",
    "TwinPeaks",
    "SwissRoll",
    "TwoMoons",
    "MANIFOLDS",
    "get_manifold",
    "mean_distance",
]

_TWO_PI = 2.0 * math.pi


def _safe_norm(v: Array) -> Array:
    """Euclidean norm with a finite gradient at zero."""
    sq = jnp.sum(v * v)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, jnp.sqrt(safe), 0.0)


def _check_noise(noise) -> None:
    if isinstance(noise, (int, float)) and not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise {noise!r}: expected a finite standard deviation >= 0")


class Manifold(eqx.Module):
    """A codimension-one manifold in ``R^ambient_dim`` with intrinsic coordinates ``u``.

    Subclasses implement :meth:`embed`, :meth:`coords` (coordinates of the closest point),
    :meth:`normal_at` (unit normal at coordinates) and :meth:`sample_coords`; the rest is shared.
    """

    name: str = eqx.field(static=True)
    ambient_dim: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    default_noise: float = eqx.field(static=True)

    # -- to implement -------------------------------------------------------------------
    def embed(self, u: Float[Array, " dim"]) -> Float[Array, " ambient"]:
        """The point with intrinsic coordinates ``u``."""
        raise NotImplementedError

    def coords(self, x: Float[Array, " ambient"]) -> Float[Array, " dim"]:
        """Intrinsic coordinates of the closest point of the manifold to ``x``."""
        raise NotImplementedError

    def normal_at(self, u: Float[Array, " dim"]) -> Float[Array, " ambient"]:
        """Unit normal at the point with coordinates ``u``."""
        raise NotImplementedError

    def sample_coords(self, key: PRNGKeyArray, n: int) -> Float[Array, "n dim"]:
        """``n`` intrinsic coordinates drawn from the sampling distribution."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    def _check_point(self, x) -> Array:
        x = jnp.asarray(x)
        if x.shape != (self.ambient_dim,):
            raise ValueError(
                f"{self.name}: point of shape {x.shape}, expected ({self.ambient_dim},); "
                "vmap over batches"
            )
        return x

    def _check_coords(self, u) -> Array:
        u = jnp.asarray(u)
        if u.shape != (self.dim,):
            raise ValueError(f"{self.name}: coordinates of shape {u.shape}, expected ({self.dim},)")
        return u

    def sample(
        self, key: PRNGKeyArray, n: int, noise: float | Array | None = None
    ) -> Float[Array, "n ambient"]:
        """``n`` points: clean samples plus isotropic Gaussian noise of std ``noise``.

        ``noise=None`` uses :attr:`default_noise` (the paper's value where it gives one).
        """
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n {n!r}: expected a positive integer number of samples")
        noise = self.default_noise if noise is None else noise
        _check_noise(noise)
        return _sample(self, key, n, jnp.asarray(noise, jnp.float32))

    def project(self, x: Float[Array, " ambient"]) -> Float[Array, " ambient"]:
        """The closest point of the manifold to ``x``."""
        return self.embed(self.coords(self._check_point(x)))

    def distance(self, x: Float[Array, " ambient"]) -> Float[Array, ""]:
        """Unsigned Euclidean distance from ``x`` to the manifold."""
        x = self._check_point(x)
        return _safe_norm(x - self.project(x))

    def signed_distance(self, x: Float[Array, " ambient"]) -> Float[Array, ""]:
        """Distance with the sign of ``<x - project(x), normal(x)>`` (see the module doc)."""
        x = self._check_point(x)
        u = self.coords(x)
        diff = x - self.embed(u)
        side = jnp.dot(diff, self.normal_at(u))
        return jnp.where(side < 0, -1.0, 1.0) * _safe_norm(diff)

    def normal(self, x: Float[Array, " ambient"]) -> Float[Array, " ambient"]:
        """Unit normal of the manifold at the closest point to ``x``."""
        return self.normal_at(self.coords(self._check_point(x)))


class Circle(Manifold):
    """Circle of radius ``radius`` about the origin; ``u = (t,)`` the angle in ``(-pi, pi]``."""

    radius: float = eqx.field(static=True)

    def __init__(self, radius: float = 1.0, default_noise: float = 0.01):
        if not radius > 0:
            raise ValueError(f"radius {radius!r}: expected > 0")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "circle", 2, 1
        self.radius, self.default_noise = float(radius), float(default_noise)

    def embed(self, u):
        t = self._check_coords(u)[0]
        return self.radius * jnp.stack([jnp.cos(t), jnp.sin(t)])

    def coords(self, x):
        x = self._check_point(x)
        return jnp.arctan2(x[1], x[0])[None]

    def normal_at(self, u):
        t = self._check_coords(u)[0]
        return jnp.stack([jnp.cos(t), jnp.sin(t)])

    def sample_coords(self, key, n):
        return jax.random.uniform(key, (n, 1), minval=0.0, maxval=_TWO_PI)

    def signed_distance(self, x):
        """``|x| - radius`` (positive outside)."""
        return _safe_norm(self._check_point(x)) - self.radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


class Sphere(Manifold):
    """Sphere of radius ``radius``; ``u = (theta, phi)`` polar angle in [0, pi], azimuth.

    Samples are area-uniform (``cos theta ~ U[-1, 1]``).
    """

    radius: float = eqx.field(static=True)

    def __init__(self, radius: float = 1.0, default_noise: float = 0.01):
        if not radius > 0:
            raise ValueError(f"radius {radius!r}: expected > 0")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "sphere", 3, 2
        self.radius, self.default_noise = float(radius), float(default_noise)

    def embed(self, u):
        return self.radius * self.normal_at(u)

    def coords(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return jnp.stack([jnp.arctan2(rho, x[2]), jnp.arctan2(x[1], x[0])])

    def normal_at(self, u):
        th, ph = self._check_coords(u)
        s = jnp.sin(th)
        return jnp.stack([s * jnp.cos(ph), s * jnp.sin(ph), jnp.cos(th)])

    def sample_coords(self, key, n):
        kz, kp = jax.random.split(key)
        cos_th = jax.random.uniform(kz, (n,), minval=-1.0, maxval=1.0)
        ph = jax.random.uniform(kp, (n,), minval=0.0, maxval=_TWO_PI)
        return jnp.stack([jnp.arccos(cos_th), ph], axis=-1)

    def signed_distance(self, x):
        """``|x| - radius`` (positive outside)."""
        return _safe_norm(self._check_point(x)) - self.radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


class Torus(Manifold):
    """Torus ``((R + r cos th) cos ph, (R + r cos th) sin ph, r sin th)``, ``u = (th, ph)``.

    ``th`` is the poloidal (tube) angle, ``ph`` the toroidal angle, both sampled uniformly as in
    the official code (so the sampling density is not area-uniform). Signed distance
    ``sqrt((rho - R)^2 + z^2) - r`` with ``rho = sqrt(x^2 + y^2)`` (positive outside the tube).
    """

    major_radius: float = eqx.field(static=True)
    minor_radius: float = eqx.field(static=True)

    def __init__(
        self, major_radius: float = 1.2, minor_radius: float = 0.4, default_noise: float = 0.005
    ):
        if not 0 < minor_radius < major_radius:
            raise ValueError(f"radii R={major_radius!r}, r={minor_radius!r}: expected 0 < r < R")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "torus", 3, 2
        self.major_radius, self.minor_radius = float(major_radius), float(minor_radius)
        self.default_noise = float(default_noise)

    def embed(self, u):
        th, ph = self._check_coords(u)
        ring = self.major_radius + self.minor_radius * jnp.cos(th)
        return jnp.stack([ring * jnp.cos(ph), ring * jnp.sin(ph), self.minor_radius * jnp.sin(th)])

    def coords(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return jnp.stack([jnp.arctan2(x[2], rho - self.major_radius), jnp.arctan2(x[1], x[0])])

    def normal_at(self, u):
        th, ph = self._check_coords(u)
        c = jnp.cos(th)
        return jnp.stack([c * jnp.cos(ph), c * jnp.sin(ph), jnp.sin(th)])

    def sample_coords(self, key, n):
        return jax.random.uniform(key, (n, 2), minval=0.0, maxval=_TWO_PI)

    def signed_distance(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return _safe_norm(jnp.stack([rho - self.major_radius, x[2]])) - self.minor_radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


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


class TwoMoons(Manifold):
    """scikit-learn's two moons as two unit half-circles; ``u = (s,)``.

    ``s in [0, pi]``: outer arc ``(cos s, sin s)`` (centre ``(0, 0)``). ``s in [2 pi, 3 pi]``:
    inner arc ``(1, 0.5) + (cos a, sin a)`` with ``a = s - pi in [pi, 2 pi]``, i.e.
    ``(1 - cos s', 0.5 - sin s')`` with ``s' = s - 2 pi in [0, pi]`` (the gap between the two
    ranges keeps the arcs' end points distinct). Samples pick a moon with probability 1/2 and a
    uniform angle on it. Closest points are exact: on a circular arc it is the radial point when
    the direction from the centre lies within the arc, otherwise the nearer end point. The
    normal points away from each arc's centre.
    """

    def __init__(self, default_noise: float = 0.01):
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "two_moons", 2, 1
        self.default_noise = float(default_noise)

    @staticmethod
    def _centre_angle(s):
        """Centre of the arc holding ``s`` and the angle of the point about that centre."""
        inner = s > 1.5 * math.pi
        dtype = jnp.result_type(s)
        centre = jnp.where(inner, jnp.array([1.0, 0.5], dtype), jnp.zeros(2, dtype))
        return centre, jnp.where(inner, s - math.pi, s)

    def embed(self, u):
        s = self._check_coords(u)[0]
        centre, angle = self._centre_angle(s)
        return centre + jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    def normal_at(self, u):
        _, angle = self._centre_angle(self._check_coords(u)[0])
        return jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    def sample_coords(self, key, n):
        s = jax.random.uniform(key, (n, 1), minval=0.0, maxval=_TWO_PI)
        return jnp.where(s >= math.pi, s + math.pi, s)

    def coords(self, x):
        x = self._check_point(x)
        # Outer arc: angles [0, pi] about (0, 0). Inner arc: angles [pi, 2 pi] about (1, 0.5).
        beta_o = jnp.arctan2(x[1], x[0])  # in (-pi, pi]
        a_o = jnp.where(beta_o >= 0, beta_o, jnp.where(beta_o < -math.pi / 2, math.pi, 0.0))
        centre_i = jnp.array([1.0, 0.5], x.dtype)
        beta_i = jnp.mod(jnp.arctan2(x[1] - 0.5, x[0] - 1.0), _TWO_PI)  # in [0, 2 pi)
        a_i = jnp.where(
            beta_i >= math.pi, beta_i, jnp.where(beta_i < math.pi / 2, _TWO_PI, math.pi)
        )
        p_o = jnp.stack([jnp.cos(a_o), jnp.sin(a_o)])
        p_i = centre_i + jnp.stack([jnp.cos(a_i), jnp.sin(a_i)])
        d_o = jnp.sum((x - p_o) ** 2)
        d_i = jnp.sum((x - p_i) ** 2)
        return jnp.where(d_o <= d_i, a_o, a_i + math.pi)[None]


MANIFOLDS: dict[str, type[Manifold]] = {
    "circle": Circle,
    "sphere": Sphere,
    "torus": Torus,
    "twin_peaks": TwinPeaks,
    "swiss_roll": SwissRoll,
    "two_moons": TwoMoons,
}


def get_manifold(name: str, **kwargs) -> Manifold:
    """The manifold called ``name`` (one of :data:`MANIFOLDS`), with optional parameters."""
    if name not in MANIFOLDS:
        raise ValueError(f"unknown manifold {name!r}; expected one of {sorted(MANIFOLDS)}")
    return MANIFOLDS[name](**kwargs)


@eqx.filter_jit
def _sample(manifold: Manifold, key, n: int, noise: Array) -> Array:
    ku, kn = jax.random.split(key)
    clean = jax.vmap(manifold.embed)(manifold.sample_coords(ku, n))
    return clean + noise.astype(clean.dtype) * jax.random.normal(kn, clean.shape, clean.dtype)


@eqx.filter_jit
def _mean_distance(manifold: Manifold, points: Array) -> Array:
    return jnp.mean(jax.vmap(manifold.distance)(points))


def mean_distance(manifold: Manifold, points: Float[Array, "n ambient"]) -> Float[Array, ""]:
    """Mean unsigned distance of a batch of points to ``manifold`` (the manifold error)."""
    points = jnp.asarray(points)
    if points.ndim != 2 or points.shape[1] != manifold.ambient_dim:
        raise ValueError(
            f"points of shape {points.shape}: expected (n, {manifold.ambient_dim}) "
            f"for {manifold.name}"
        )
    return _mean_distance(manifold, points)
