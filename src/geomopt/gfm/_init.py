"""Initial paths and continuation for GFM solves.

Collocation solves converge to the Euler-Lagrange solution in whose basin they start, and the
discretised force balance has several (e.g. on a torus, paths on the surface and paths through
the tube's interior, where a learned score is unreliable). The initial path decides which:

- :func:`chord` / :func:`straight_line` (traceable, unchecked): the straight line
  (``gfm.solve``'s default); cuts through holes.
- :func:`slerp`: spherical linear interpolation of the endpoint vectors, the official code's
  initialisation of latent-space paths; refused (:func:`check_great_circle`) between antipodal
  or zero endpoints, where no unique great circle exists and the formula falls through the
  origin.
- :func:`coordinate_linear`: linear in a manifold's intrinsic coordinates, mapped back onto
  the surface (the official torus runs' "angle-linear" initialisation); periodic coordinates
  take the shorter way round (a difference of exactly pi goes the positive way).
- :func:`project_with_denoiser`: any path (default the chord) pulled onto the data support by
  applying the denoiser at decreasing noise levels, ``x <- D(x, sigma_j)``; needs only the
  trained model, no manifold.
- :func:`sequential_init`: the official code's sequential warm start (``SeqELInterpolator``):
  waypoint ``i`` starts at ``x_{i-1} + (x_end - x_{i-1}) / (K - i)`` and is optimised alone by
  AdamW (the solve's ``lr`` halved, PyTorch's default weight decay 0.01) on
  ``mean(s(z)^2) + lam mean(acc^2)`` with ``acc = (z - 2 x_{i-1} + x_{i-2}) / dt^2`` (for
  ``i = 1`` the deviation of ``z - x_0`` from the uniform step ``(x_end - x_0) / (K - 1)``),
  for ``iters`` steps (officially a tenth of the solve's iterations); the gradient flows through
  the score, as there.

Nothing here runs a solver (continuation, which does: :mod:`._continuation`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "chord",
    "coordinate_linear",
    "project_with_denoiser",
    "sequential_init",
    "slerp",
    "straight_line",
    "check_great_circle",
    "PERIODIC_COORDS",
]

PERIODIC_COORDS: dict[str, tuple[bool, ...]] = {"torus": (True, True), "circle": (True,)}
"""Which intrinsic coordinates of the :mod:`geomopt.manifolds` shapes are angles."""


def _ends(x0, x1):
    x0, x1 = jnp.asarray(x0), jnp.asarray(x1)
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        x0 = x0.astype(float)
    x1 = x1.astype(x0.dtype)
    if x0.shape != x1.shape or x0.ndim not in (1, 2):
        raise ValueError(
            f"endpoints of shapes {x0.shape}, {x1.shape}: expected equal (d,) or (B, d)"
        )
    return x0, x1


def _check_n(n_points):
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 3:
        raise ValueError(f"n_points={n_points!r}: expected an int >= 3")


def _t(n_points, x0):
    t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)
    return t.reshape((1,) * (x0.ndim - 1) + (n_points, 1))


def straight_line(x0, x1, n_points: int):
    """``n_points`` equally spaced waypoints from ``x0`` to ``x1`` (batched over leading axes);
    traceable, no checks."""
    t = _t(n_points, x0)
    return x0[..., None, :] * (1.0 - t) + x1[..., None, :] * t


def chord(x0, x1, n_points: int):
    """The straight line: ``n_points`` equally spaced waypoints (batched over a leading axis)."""
    _check_n(n_points)
    x0, x1 = _ends(x0, x1)
    return straight_line(x0, x1, n_points)


ANTIPODAL_COS = -1.0 + 1e-6
"""Endpoints whose cosine is below this are antipodal for :func:`slerp`."""


def check_great_circle(x0, x1, what: str = "slerp"):
    """Raise ``ValueError`` unless every endpoint pair (``(..., d)``) spans one great circle:
    both endpoints away from the origin and the cosine of their angle ``>= -1 + 1e-6``. Between
    antipodal points every half great circle is one, and the interpolation formula divides by
    ``sin w ~ 0`` (clipped, it returns a path through the origin)."""
    a0, a1 = (np.asarray(x, np.float64) for x in (x0, x1))
    batched = a0.ndim > 1
    b0, b1 = a0.reshape(-1, a0.shape[-1]), a1.reshape(-1, a1.shape[-1])
    n0, n1 = np.linalg.norm(b0, axis=-1), np.linalg.norm(b1, axis=-1)
    of = lambda i: f" of pair {i}" if batched else ""  # noqa: E731
    for name, n in (("x0", n0), ("x1", n1)):
        if not (n > 0).all():
            i = int(np.argmin(n > 0))
            raise ValueError(
                f"{what}: endpoint {name}{of(i)} has norm {n[i]}; the great circle through it "
                "is undefined (pass another init, e.g. the chord)"
            )
    cos = np.sum(b0 * b1, axis=-1) / (n0 * n1)
    if (cos < ANTIPODAL_COS).any():
        i = int(np.argmax(cos < ANTIPODAL_COS))
        raise ValueError(
            f"{what}: x0 and x1{of(i)} are antipodal (cosine {cos[i]:.9g} < -1 + 1e-6): no "
            "unique great circle joins them (pass another init, e.g. the chord)"
        )


def slerp(x0, x1, n_points: int):
    """Spherical linear interpolation, the official GFM initialisation (``ELInterpolator``).

    ``x(t) = sin((1-t) w)/sin(w) x0 + sin(t w)/sin(w) x1`` with ``cos w = <x0, x1>/(|x0||x1|)``
    clipped to ``[-1 + 1e-7, 1 - 1e-7]``; linear interpolation where ``|sin w| < 1e-6``. The
    endpoints keep their norms (norms are not interpolated). ``x0``, ``x1``: ``(..., d)``;
    returns ``(..., n_points, d)`` with the exact endpoints. Raises ``ValueError`` for antipodal
    or zero endpoints (:func:`check_great_circle`); under ``jit`` the values are unknown and
    the caller checks them.
    """
    x0, x1 = jnp.asarray(x0), jnp.asarray(x1)
    if not isinstance(x0, jax.core.Tracer) and not isinstance(x1, jax.core.Tracer):
        check_great_circle(x0, x1)
    n0 = jnp.linalg.norm(x0, axis=-1, keepdims=True)
    n1 = jnp.linalg.norm(x1, axis=-1, keepdims=True)
    cos = jnp.sum(x0 * x1, axis=-1, keepdims=True) / jnp.maximum(n0 * n1, 1e-30)
    omega = jnp.arccos(jnp.clip(cos, -1 + 1e-7, 1 - 1e-7))[..., None, :]
    sin = jnp.sin(omega)
    t = _t(n_points, x0)
    small = jnp.abs(sin) < 1e-6
    safe = jnp.where(small, 1.0, sin)
    w0 = jnp.where(small, 1.0 - t, jnp.sin((1.0 - t) * omega) / safe)
    w1 = jnp.where(small, t, jnp.sin(t * omega) / safe)
    path = w0 * x0[..., None, :] + w1 * x1[..., None, :]
    return path.at[..., 0, :].set(x0).at[..., -1, :].set(x1)


def coordinate_linear(manifold, x0, x1, n_points: int, periodic: Sequence[bool] | None = None):
    """Linear interpolation in ``manifold``'s intrinsic coordinates (``manifold.coords``),
    mapped back with ``manifold.embed``: on the torus, the official "angle-linear" start.

    ``periodic`` marks angle coordinates (default :data:`PERIODIC_COORDS` by manifold name,
    else none); an angle moves by its difference wrapped into ``(-pi, pi]``. The endpoints are
    replaced by their embedded coordinates, i.e. projected onto the manifold; pass on-manifold
    endpoints (as the official protocol does) to keep them.
    """
    _check_n(n_points)
    x0, x1 = _ends(x0, x1)
    if not (hasattr(manifold, "coords") and hasattr(manifold, "embed")):
        raise TypeError(f"{type(manifold).__name__} has no coords/embed: no intrinsic coordinates")
    batched = x0.ndim == 2
    xb0, xb1 = (x0, x1) if batched else (x0[None], x1[None])
    u0 = jax.vmap(manifold.coords)(xb0)
    u1 = jax.vmap(manifold.coords)(xb1)
    if periodic is None:
        periodic = PERIODIC_COORDS.get(getattr(manifold, "name", ""), (False,) * u0.shape[-1])
    periodic = jnp.asarray(tuple(bool(p) for p in periodic))
    if periodic.shape != (u0.shape[-1],):
        raise ValueError(f"periodic has {periodic.shape[0]} entries, coordinates {u0.shape[-1]}")
    du = u1 - u0
    wrapped = jnp.pi - jnp.mod(jnp.pi - du, 2 * jnp.pi)  # into (-pi, pi]
    du = jnp.where(periodic[None], wrapped, du)
    t = jnp.linspace(0.0, 1.0, n_points, dtype=u0.dtype)[None, :, None]
    u = u0[:, None] + t * du[:, None]
    path = jax.vmap(jax.vmap(manifold.embed))(u).astype(x0.dtype)
    return path if batched else path[0]


def project_with_denoiser(
    path, denoiser, sigmas: Sequence[float] = (0.5, 0.2, 0.1, 0.05, 0.02), *, keep_ends=True
):
    """Pull a path onto the data support: ``x <- D(x, sigma_j)`` for each ``sigma_j`` in turn
    (large to small), at every interior waypoint (the endpoints too with ``keep_ends=False``).

    ``D`` is the posterior-mean denoiser (Tweedie): at a large ``sigma`` it moves points far
    off the support towards it (and towards the data mean), smaller ones then sharpen onto the
    support, much like a deterministic, noise-free sampler. Approximation: nothing keeps
    neighbouring waypoints apart, so where the chord crosses a region that denoises to one
    point, waypoints bunch up there; the solve redistributes them. ``denoiser``: an object with
    ``denoise(x, sigma)`` or a callable ``(x, sigma) -> D``.
    """
    path = jnp.asarray(path)
    if path.ndim not in (2, 3):
        raise ValueError(f"path of shape {path.shape}: expected (K, d) or (B, K, d)")
    sig = jnp.asarray(sigmas, path.dtype)
    if sig.ndim != 1 or sig.shape[0] < 1 or not bool(jnp.all(sig > 0)):
        raise ValueError(f"sigmas={sigmas}: expected a non-empty sequence of positive numbers")
    return _project(path, denoiser, sig, keep_ends)


@eqx.filter_jit
def _project(path, denoiser, sig, keep_ends):
    from ._evaluate import _denoise_fn

    d = _denoise_fn(denoiser)
    flat = path.reshape(-1, path.shape[-1])

    def step(x, s):
        return jax.vmap(lambda y: d(y, s).astype(y.dtype))(x), None

    out, _ = jax.lax.scan(step, flat, sig)
    out = out.reshape(path.shape)
    if keep_ends:
        out = out.at[..., 0, :].set(path[..., 0, :]).at[..., -1, :].set(path[..., -1, :])
    return out


def sequential_init(
    x0,
    x1,
    n_points: int,
    score: Callable,
    *,
    lam=1.0,
    lr=0.05,
    iters: int = 20,
    weight_decay=0.01,
):
    """The official sequential warm start (see the module docstring); batched over a leading
    axis of ``x0`` / ``x1``. ``lr`` is the solve's learning rate (AdamW uses ``lr / 2``),
    ``iters`` the AdamW steps per waypoint (officially a tenth of the solve's iterations: 20
    for the default 200). Returns the path with the given endpoints."""
    _check_n(n_points)
    x0, x1 = _ends(x0, x1)
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
        raise ValueError(f"iters={iters!r}: expected an int >= 1")
    hyper = jnp.asarray([lam, lr, weight_decay], x0.dtype)
    batched = x0.ndim == 2
    xb0, xb1 = (x0, x1) if batched else (x0[None], x1[None])
    out = _sequential(xb0, xb1, hyper, score, n_points, int(iters))
    return out if batched else out[0]


@eqx.filter_jit
def _sequential(x0, x1, hyper, score, n_points, iters):
    lam, lr, wd = hyper[0], hyper[1], hyper[2]
    k = n_points
    dt = 1.0 / (k - 1)
    opt = optax.adamw(0.5 * lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=wd)

    def one(a, b):
        uniform = (b - a) / (k - 1)

        def waypoint(carry, i):
            prev, prev2 = carry

            def loss(z):
                force = jnp.mean(score(z) ** 2)
                acc_first = jnp.mean((z - a - uniform) ** 2)
                acc = jnp.mean(((z - 2.0 * prev + prev2) / dt**2) ** 2)
                return force + lam * jnp.where(i == 1, acc_first, acc)

            def inner(_, st):
                z, s = st
                g = jax.grad(loss)(z)
                upd, s = opt.update(g, s, z)
                return optax.apply_updates(z, upd), s

            z0 = prev + (b - prev) / (k - i)
            z, _ = jax.lax.fori_loop(0, iters, inner, (z0, opt.init(z0)))
            return (z, prev), z

        _, inner_pts = jax.lax.scan(waypoint, (a, a), jnp.arange(1, k - 1))
        return jnp.concatenate([a[None], inner_pts, b[None]], axis=0)

    return jax.vmap(one)(x0, x1)
