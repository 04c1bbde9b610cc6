"""GFM force-balance residuals (the discretised Euler-Lagrange equations of the paper).

Waypoints ``x_0 .. x_{K-1}`` with fixed endpoints and ``dt = 1/(K-1)``. At each interior
waypoint ``i`` (central differences, the official code's stencils)::

    a_i = (x_{i+1} - 2 x_i + x_{i-1}) / dt^2        v_i = (x_{i+1} - x_{i-1}) / (2 dt)

- Euclidean prior:        r_i = a_i + lam s(x_i)
- hypersphere-projected:  r_i = P_{x_i}(a_i) + lam P_{x_i}(s(x_i)),  P_x(u) = u - <u, x>/|x|^2 x
- metric prior G(x):      r_i = a_i + Gamma(v_i, v_i) + lam G(x_i)^{-1} s(x_i),
  Gamma(v, v) = G^{-1} [ (d/dx (G(x) v)) v - grad_x (1/2 v^T G(x) v) ]

with ``s = grad log p = -grad U`` the potential's score. These are the Euler-Lagrange equations
of the action ``int 1/2 xdot^T G(x) xdot + lam U(x) dt``. The loss is
``mean_i r_i^T G(x_i) r_i``; here each residual is returned already weighted,
``w_i = L_i^T r_i`` with ``G(x_i) = L_i L_i^T`` (Cholesky), so ``|w_i|^2 = r_i^T G r_i`` and the
stacked ``w`` is a plain least-squares residual. The Christoffel term is computed by autodiff:
one ``jvp`` of ``x -> G(x) v`` along ``v`` and one ``grad`` of the quadratic form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .solvers._banded import small_cholesky, small_tri_solve

__all__ = ["local_residual", "path_residuals", "residual_norm", "christoffel_term", "ResidualKind"]

ResidualKind = Literal["euclidean", "hypersphere", "metric"]


def christoffel_term(metric: Callable, x: Array, v: Array) -> Array:
    """``G(x) Gamma(v, v) = (d/dx (G(x) v)) v - grad_x (1/2 v^T G(x) v)`` (not yet times G^{-1})."""
    dgv_v = jax.jvp(lambda y: metric(y) @ v, (x,), (v,))[1]
    grad_q = jax.grad(lambda y: 0.5 * v @ (metric(y) @ v))(x)
    return dgv_v - grad_q


def _project(x: Array, u: Array) -> Array:
    return u - (u @ x) / (x @ x) * x


def local_residual(
    x_prev: Float[Array, " d"],
    x: Float[Array, " d"],
    x_next: Float[Array, " d"],
    *,
    dt,
    lam,
    score: Callable | None,
    metric: Callable | None,
    kind: ResidualKind,
    score_grad: bool = True,
) -> Float[Array, " d"]:
    """The weighted residual ``w_i = L_i^T r_i`` at one interior waypoint (see module docstring).

    ``score_grad=False`` stops gradients through the score, as the official code treats the
    force as a constant; the residual value is the same either way.
    """
    acc = (x_next - 2.0 * x + x_prev) / dt**2
    if score is None:
        force = jnp.zeros_like(x)
    else:
        force = score(x)
        if force.shape != x.shape:
            raise ValueError(f"score returned shape {force.shape}, expected {x.shape}")
        force = force.astype(x.dtype)
        if not score_grad:
            force = jax.lax.stop_gradient(force)
    if kind == "euclidean":
        return acc + lam * force
    if kind == "hypersphere":
        return _project(x, acc) + lam * _project(x, force)
    if kind != "metric":
        raise ValueError(f"residual kind {kind!r}: expected 'euclidean', 'hypersphere' or 'metric'")
    vel = (x_next - x_prev) / (2.0 * dt)
    g = metric(x)
    if g.shape != (x.shape[0], x.shape[0]):
        raise ValueError(f"metric returned shape {g.shape}, expected {(x.shape[0],) * 2}")
    # Unrolled for small d (a LAPACK call and its derivative's are separate, unfusable ops:
    # 10-20 % of a short LM solve on the torus); NaN where the metric is not SPD.
    chol = small_cholesky(0.5 * (g + g.T))
    # L^T r = L^T a + L^{-1} (G Gamma(v, v) + lam s): one triangular solve instead of two.
    rhs = christoffel_term(metric, x, vel) + lam * force
    return chol.T @ acc + small_tri_solve(chol, rhs)


def path_residuals(path: Float[Array, "k d"], **kw) -> Float[Array, "k-2 d"]:
    """Weighted residuals at all interior waypoints of ``path`` (``kw`` as in local_residual)."""
    dt = 1.0 / (path.shape[0] - 1)
    f = lambda a, b, c: local_residual(a, b, c, dt=dt, **kw)  # noqa: E731
    return jax.vmap(f)(path[:-2], path[1:-1], path[2:])


def residual_norm(weighted: Float[Array, "k-2 d"]) -> Array:
    """``sqrt(mean_i r_i^T G(x_i) r_i)``: the root of the paper's loss, GFM's EL residual."""
    return jnp.sqrt(jnp.mean(jnp.sum(weighted**2, axis=-1)))
