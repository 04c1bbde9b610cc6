"""The baselines' path energies (interpolations, the density-aware metrics and their energies,
their banded least-squares minimisation); public through :mod:`geomopt.gfm.baselines`, whose
docstring defines them."""


from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_endpoints, positive
from .._init import check_great_circle, straight_line
from .._status import SolveReport
from .._support import DEFAULT_SUPPORT_THRESHOLD, check_paths, resolve_support_sigma
from ..solvers._minimise import METHODS, minimise_path

METRIC_EPS = 1e-3
STEIN_LAMBDA = 1000.0


def linear(x0, x1, n_points: int):
    """Linear interpolation, ``n_points`` waypoints including the endpoints."""
    x0, x1 = check_endpoints(x0, x1, n_points)
    return straight_line(x0, x1, n_points)


def spherical(x0, x1, n_points: int):
    """Spherical linear interpolation (slerp) about the origin: the angle is interpolated
    linearly and the norm linearly between ``|x0|`` and ``|x1|`` (the latent-space baseline;
    the official score-Jacobian initialisation). Endpoints ``(d,)`` or a batch ``(B, d)``;
    parallel directions fall back to the normalised chord; antipodal or zero endpoints (no
    unique great circle) raise ``ValueError`` (:func:`geomopt.gfm._init.check_great_circle`).
    Unlike :func:`geomopt.gfm.slerp` (the official latent initialisation, whose norm follows
    the sine weights) the norm is interpolated linearly."""
    x0, x1 = check_endpoints(x0, x1, n_points)
    check_great_circle(x0, x1, "spherical")
    n0 = jnp.linalg.norm(x0, axis=-1, keepdims=True)
    n1 = jnp.linalg.norm(x1, axis=-1, keepdims=True)
    t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)
    t = t.reshape((1,) * (x0.ndim - 1) + (n_points, 1))
    u0, u1 = (x0 / n0)[..., None, :], (x1 / n1)[..., None, :]
    omega = jnp.arccos(jnp.clip(jnp.sum(u0 * u1, -1, keepdims=True), -1.0, 1.0))
    sin = jnp.sin(omega)
    small = sin < 1e-8
    safe = jnp.where(small, 1.0, sin)
    arc = (jnp.sin((1 - t) * omega) * u0 + jnp.sin(t * omega) * u1) / safe
    chord = (1 - t) * u0 + t * u1
    chord = chord / jnp.maximum(jnp.linalg.norm(chord, axis=-1, keepdims=True), 1e-12)
    direction = jnp.where(small, chord, arc)
    return direction * ((1 - t) * n0[..., None, :] + t * n1[..., None, :])


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


class LANDEnergy(PathEnergy):
    """LAND diagonal metric ``g_d(x) = 1 / (sum_n w_n(x) (x_{n,d} - x_d)^2 + 1e-3)``."""

    data: jax.Array
    gamma: jax.Array
    weight: jax.Array = eqx.field(default_factory=lambda: jnp.asarray(1.0), converter=jnp.asarray)

    def local_variance(self, x):
        """``M_dd(x) = sum_n w_n(x) (x_{n,d} - x_d)^2`` (before the weight ``W``)."""
        diff = self.data - x[None, :]
        w = jnp.exp(-jnp.sum(diff**2, axis=-1) / (2 * self.gamma**2))
        return w @ diff**2

    def diagonal(self, x):
        return 1.0 / (self.weight * self.local_variance(x) + METRIC_EPS)

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
    score: Callable | None = None,
    support_sigma=None,
    support_threshold=None,
):
    """Minimise ``energy`` over paths from ``x0`` to ``x1`` (``(d,)`` or a batch ``(B, d)``).

    Starts from ``init`` (default: the straight line) and stops when the largest gradient
    entry falls below ``gtol`` (default ``1e-7`` in float64, ``1e-3`` in float32), the steps
    stall, or after ``max_iters`` (default 200 for lm, 1501 for adam). Returns
    ``(path, report)`` like :func:`geomopt.gfm.solve`; ``report.residual`` is
    ``sqrt(mean_i |e_i|^2)`` and "stalled" (code 3) counts as converged for an energy.
    With a ``score`` (the energy itself is opaque) the report carries the support check of
    :func:`geomopt.gfm.solve` (``support_sigma`` / ``support_threshold`` as there); without
    one, ``report.support`` is ``"unknown"``.
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
    gtol = positive("gtol", gtol)
    if max_iters is None:
        max_iters = 1501 if method == "adam" else 200
    t0 = time.perf_counter()
    path, res, its, code = _energy_core(
        path0,
        jnp.asarray(gtol),
        jnp.asarray(max_iters),
        jnp.asarray(positive("lr", lr)),
        jnp.asarray(positive("clip", clip, allow_inf=True)),
        energy,
        method,
    )
    path = jax.block_until_ready(path)
    code = np.asarray(code)
    sigma, note = resolve_support_sigma(score, support_sigma)
    threshold = float(positive("support_threshold", DEFAULT_SUPPORT_THRESHOLD
                               if support_threshold is None else support_threshold))  # fmt: skip
    report = SolveReport(
        iterations=np.asarray(its),
        residual=np.asarray(res),
        converged=np.isin(code, (0, 3, 5)),
        code=code,
        wall_time=time.perf_counter() - t0,
        method=method,
        **check_paths(path, score, sigma, threshold, note),
    )
    if not batched:
        return path[0], report[0]
    return path, report
