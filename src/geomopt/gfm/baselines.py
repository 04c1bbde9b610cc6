"""Baselines of the GFM paper: interpolation and density-aware metrics.

Every metric baseline minimises its discretised path energy over the interior waypoints of a
path with the same number of waypoints as GFM, with the same banded least-squares machinery
(:func:`geomopt.gfm.minimise_path`, window 2: each energy term couples two neighbouring
waypoints) or with Adam. With ``dx_i = x_{i+1} - x_i``, midpoints ``m_i``, ``dt = 1/(K-1)``:

- :class:`RBFEnergy`: ``sum_i g(m_i) |dx_i|^2 / dt`` with the conformal RBF metric
  ``g = 1 / (h(x) + 1e-3)``, ``h`` a non-negative sum of RBF bumps on k-means centres fitted so
  ``h ~ 1`` on the data (:func:`fit_rbf`).
- :class:`LANDEnergy`: ``sum_i dx_i^T diag(g(m_i)) dx_i / dt`` with the LAND diagonal metric
  ``g_d = 1 / (sum_n w_n (x_{n,d} - x_d)^2 + 1e-3)``, ``w_n = exp(-|x - x_n|^2 / (2 gamma^2))``,
  ``gamma`` = median pairwise distance / 3 (:func:`fit_land`).
- :class:`ScoreEnergy` (the score-Jacobian / pullback metric):
  ``1/2 sum_i |s(x_{i+1}) - s(x_i)|^2 / dt`` with gradients through the score.
- :class:`SteinEnergy`: metric ``G = I + lambda s s^T`` at the midpoints, ``lambda = 1000``.
- :class:`DensityConformalEnergy`: conformal ``1/p`` metric ``sum_i |dx_i|^2 / (p(m_i) dt)``
  (needs ``log p``).

Every energy is a sum of squares ``sum_i |e_i|^2``; ``e_i`` is what :meth:`segment` returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from ._gfm import _positive, check_endpoints, straight_line
from ._solve import METHODS, SolveReport, minimise_path

__all__ = [
    "linear",
    "spherical",
    "PathEnergy",
    "RBFEnergy",
    "LANDEnergy",
    "ScoreEnergy",
    "SteinEnergy",
    "DensityConformalEnergy",
    "fit_rbf",
    "fit_land",
    "minimise_energy",
    "path_energy",
]

METRIC_EPS = 1e-3
STEIN_LAMBDA = 1000.0


def linear(x0, x1, n_points: int):
    """Linear interpolation, ``n_points`` waypoints including the endpoints."""
    x0, x1 = check_endpoints(x0, x1, n_points)
    return straight_line(x0, x1, n_points)


def spherical(x0, x1, n_points: int):
    """Spherical linear interpolation (slerp) about the origin: the angle is interpolated
    linearly and the norm linearly between ``|x0|`` and ``|x1|`` (the latent-space baseline)."""
    x0, x1 = check_endpoints(x0, x1, n_points)
    t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)[:, None]
    if x0.ndim == 2:
        return jax.vmap(lambda a, b: spherical(a, b, n_points))(x0, x1)
    n0, n1 = jnp.linalg.norm(x0), jnp.linalg.norm(x1)
    if float(n0) == 0.0 or float(n1) == 0.0:
        raise ValueError("spherical interpolation needs endpoints away from the origin")
    u0, u1 = x0 / n0, x1 / n1
    omega = jnp.arccos(jnp.clip(u0 @ u1, -1.0, 1.0))
    if float(jnp.sin(omega)) < 1e-8:
        direction = straight_line(u0, u1, n_points)
        direction = direction / jnp.linalg.norm(direction, axis=-1, keepdims=True)
    else:
        direction = (jnp.sin((1 - t) * omega) * u0[None] + jnp.sin(t * omega) * u1[None]) / jnp.sin(
            omega
        )
    return direction * ((1 - t) * n0 + t * n1)


class PathEnergy(eqx.Module):
    """A discretised path energy ``sum_i |segment(x_i, x_{i+1}, dt)|^2``."""

    def segment(self, xa, xb, dt):
        raise NotImplementedError


def _midpoint_conformal(factor, xa, xb, dt):
    return jnp.sqrt(factor((xa + xb) / 2)) * (xb - xa) / jnp.sqrt(dt)


class RBFEnergy(PathEnergy):
    """Conformal RBF metric ``g = 1 / (h + 1e-3)``, ``h(x) = sum_k w_k exp(-l_k |x - c_k|^2)``."""

    centers: jax.Array
    bandwidths: jax.Array
    weights: jax.Array

    def h(self, x):
        sq = jnp.sum((x[None, :] - self.centers) ** 2, axis=-1)
        return jnp.sum(self.weights * jnp.exp(-self.bandwidths * sq))

    def metric(self, x):
        return jnp.eye(x.shape[0], dtype=x.dtype) / (self.h(x) + METRIC_EPS)

    def segment(self, xa, xb, dt):
        return _midpoint_conformal(lambda m: 1.0 / (self.h(m) + METRIC_EPS), xa, xb, dt)


def _kmeans(data: np.ndarray, k: int, iters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = data[rng.choice(len(data), size=k, replace=False)]
    for _ in range(iters):
        d2 = ((data[:, None, :] - centers[None]) ** 2).sum(-1)
        labels = d2.argmin(1)
        for j in range(k):
            members = data[labels == j]
            if len(members):
                centers[j] = members.mean(0)
    d2 = ((data[:, None, :] - centers[None]) ** 2).sum(-1)
    return centers, d2.argmin(1)


def fit_rbf(data, *, n_centers: int = 64, kappa: float = 1.0, seed: int = 0) -> RBFEnergy:
    """Fit the RBF metric (Arvanitidis et al.): k-means centres (Lloyd, 50 iterations),
    bandwidths ``l_k = 1 / (2 (kappa * spread_k)^2)`` with ``spread_k`` the mean distance of a
    cluster's points to its centre, and non-negative weights from NNLS so ``h(x_n) ~ 1`` on the
    data. ``n_centers`` and ``kappa`` are our defaults (the summary gives no values)."""
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or len(data) < n_centers:
        raise ValueError(f"data of shape {data.shape}: expected (n >= {n_centers}, d)")
    centers, labels = _kmeans(data, n_centers, 50, seed)
    spread = np.array(
        [
            np.linalg.norm(data[labels == j] - centers[j], axis=1).mean()
            if (labels == j).sum() > 1
            else np.nan
            for j in range(n_centers)
        ]
    )
    spread = np.where(np.isfinite(spread) & (spread > 0), spread, np.nanmedian(spread))
    bandwidths = 0.5 / (kappa * spread) ** 2
    phi = np.exp(-bandwidths[None] * ((data[:, None] - centers[None]) ** 2).sum(-1))
    weights, _ = scipy.optimize.nnls(phi, np.ones(len(data)))
    return RBFEnergy(jnp.asarray(centers), jnp.asarray(bandwidths), jnp.asarray(weights))


class LANDEnergy(PathEnergy):
    """LAND diagonal metric ``g_d(x) = 1 / (sum_n w_n(x) (x_{n,d} - x_d)^2 + 1e-3)``."""

    data: jax.Array
    gamma: jax.Array

    def diagonal(self, x):
        diff = self.data - x[None, :]
        w = jnp.exp(-jnp.sum(diff**2, axis=-1) / (2 * self.gamma**2))
        return 1.0 / (w @ diff**2 + METRIC_EPS)

    def metric(self, x):
        return jnp.diag(self.diagonal(x))

    def segment(self, xa, xb, dt):
        return jnp.sqrt(self.diagonal((xa + xb) / 2)) * (xb - xa) / jnp.sqrt(dt)


def fit_land(data, *, max_points: int = 1000, seed: int = 0) -> LANDEnergy:
    """LAND metric on (a random subset of at most ``max_points`` of) ``data``; ``gamma`` is the
    median pairwise distance / 3 (the official choice)."""
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or len(data) < 2:
        raise ValueError(f"data of shape {data.shape}: expected (n >= 2, d)")
    if len(data) > max_points:
        data = data[np.random.default_rng(seed).choice(len(data), max_points, replace=False)]
    d = np.sqrt(((data[:, None] - data[None]) ** 2).sum(-1))
    gamma = np.median(d[np.triu_indices(len(data), 1)]) / 3.0
    return LANDEnergy(jnp.asarray(data), jnp.asarray(gamma))


class ScoreEnergy(PathEnergy):
    """Score-Jacobian ("pullback") energy ``1/2 sum_i |s(x_{i+1}) - s(x_i)|^2 / dt``."""

    score: Callable

    def segment(self, xa, xb, dt):
        return (self.score(xb) - self.score(xa)) / jnp.sqrt(2.0 * dt)


class SteinEnergy(PathEnergy):
    """Stein metric ``G(x) = I + lambda s(x) s(x)^T`` at segment midpoints (lambda = 1000):
    ``|dx|^2 + lambda <s(m), dx>^2`` per segment, divided by ``dt``."""

    score: Callable
    lam: jax.Array = eqx.field(
        default_factory=lambda: jnp.asarray(STEIN_LAMBDA), converter=jnp.asarray
    )

    def metric(self, x):
        s = self.score(x)
        return jnp.eye(x.shape[0], dtype=x.dtype) + self.lam * jnp.outer(s, s)

    def segment(self, xa, xb, dt):
        dx = xb - xa
        s = self.score((xa + xb) / 2)
        along = jnp.sqrt(self.lam.astype(dx.dtype)) * (s @ dx)
        return jnp.concatenate([dx, along[None]]) / jnp.sqrt(dt)


class DensityConformalEnergy(PathEnergy):
    """Conformal ``1/p`` metric ("probability density geodesics"): ``sum_i |dx_i|^2/(p(m_i) dt)``.
    Overflows where ``p`` underflows, which is the instability the sigma sweep exposes."""

    log_density: Callable

    def metric(self, x):
        return jnp.eye(x.shape[0], dtype=x.dtype) * jnp.exp(-self.log_density(x))

    def segment(self, xa, xb, dt):
        scale = jnp.exp(-0.5 * self.log_density((xa + xb) / 2))
        return scale * (xb - xa) / jnp.sqrt(dt)


def path_energy(energy: PathEnergy, path) -> jax.Array:
    """``sum_i |segment_i|^2`` of one path ``(K, d)``."""
    dt = 1.0 / (path.shape[0] - 1)
    e = jax.vmap(lambda a, b: energy.segment(a, b, dt))(path[:-1], path[1:])
    return jnp.sum(e**2)


@eqx.filter_jit
def _energy_core(path0, gtol, max_iters, lr, clip, energy, method):
    dt = 1.0 / (path0.shape[1] - 1)
    local = lambda a, b: energy.segment(a, b, dt)  # noqa: E731

    def one(p):
        return minimise_path(
            p,
            local,
            window=2,
            method=method,
            tol=jnp.zeros((), p.dtype),
            gtol=gtol.astype(p.dtype),
            max_iters=max_iters,
            lr=lr.astype(p.dtype),
            clip=clip.astype(p.dtype),
            reduce="sum",
        )

    return jax.vmap(one)(path0)


def minimise_energy(
    energy: PathEnergy,
    x0,
    x1,
    *,
    n_points: int = 32,
    method: str = "lm",
    gtol=None,
    max_iters: int | None = None,
    init=None,
    lr=0.05,
    clip=10.0,
):
    """Minimise ``energy`` over paths from ``x0`` to ``x1`` (``(d,)`` or a batch ``(B, d)``).

    Starts from ``init`` (default: the straight line) and stops when the largest gradient
    entry falls below ``gtol`` (default ``1e-7`` in float64, ``1e-3`` in float32), the steps
    stall, or after ``max_iters`` (default 200 for lm/gauss_newton, 1501 for adam). Returns
    ``(path, report)`` like :func:`geomopt.gfm.solve`; ``report.residual`` is
    ``sqrt(mean_i |e_i|^2)`` and "stalled" (code 3) counts as converged for an energy.
    """
    x0, x1 = check_endpoints(x0, x1, n_points)
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    batched = x0.ndim == 2
    xb0, xb1 = (x0, x1) if batched else (x0[None], x1[None])
    path0 = straight_line(xb0, xb1, n_points) if init is None else jnp.asarray(init, x0.dtype)
    if not batched and init is not None:
        path0 = path0[None]
    if path0.shape != xb0.shape[:1] + (n_points, x0.shape[-1]):
        raise ValueError(f"init has shape {path0.shape[int(not batched) :]}, expected a path")
    if gtol is None:
        gtol = 1e-7 if x0.dtype == jnp.float64 else 1e-3
    gtol = _positive("gtol", gtol)
    if max_iters is None:
        max_iters = 1501 if method == "adam" else 200
    t0 = time.perf_counter()
    path, res, its, code = _energy_core(
        path0,
        jnp.asarray(gtol),
        jnp.asarray(max_iters),
        jnp.asarray(_positive("lr", lr)),
        jnp.asarray(_positive("clip", clip, allow_inf=True)),
        energy,
        method,
    )
    path = jax.block_until_ready(path)
    code = np.asarray(code)
    report = SolveReport(
        iterations=np.asarray(its),
        residual=np.asarray(res),
        converged=np.isin(code, (0, 3, 5)),
        code=code,
        wall_time=time.perf_counter() - t0,
        method=method,
    )
    if not batched:
        return path[0], report[0]
    return path, report
