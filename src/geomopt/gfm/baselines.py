"""Baselines of the GFM paper: interpolation and density-aware metrics.

Every metric baseline minimises its discretised path energy over the interior waypoints of a
path with the same number of waypoints as GFM, with the same banded least-squares machinery
(:func:`geomopt.gfm.minimise_path`, window 2: each energy term couples two neighbouring
waypoints) or with Adam. With ``dx_i = x_{i+1} - x_i``, midpoints ``m_i``, ``dt = 1/(K-1)``:

- :class:`RBFEnergy`: ``sum_i g(m_i) |dx_i|^2 / dt`` with the conformal RBF metric
  ``g = 1 / (h(x) + 1e-3)``, ``h`` a weighted sum of RBF bumps on k-means centres fitted so
  ``h ~ 1`` on the data (:func:`fit_rbf_official`).
- :class:`LANDEnergy`: ``sum_i dx_i^T diag(g(m_i)) dx_i / dt`` with the LAND diagonal metric
  ``g_d = 1 / (sum_n w_n (x_{n,d} - x_d)^2 + 1e-3)``, ``w_n = exp(-|x - x_n|^2 / (2 gamma^2))``,
  ``gamma`` = median pairwise distance / 3 (:func:`fit_land`).
- :class:`ScoreEnergy` (the score-Jacobian / pullback metric):
  ``1/2 sum_i |s(x_{i+1}) - s(x_i)|^2 / dt`` with gradients through the score.
- :class:`SteinEnergy`: metric ``G = I + lambda s s^T`` at the midpoints, ``lambda = 1000``.
- :class:`DensityConformalEnergy`: conformal ``1/p`` metric ``sum_i |dx_i|^2 / (p(m_i) dt)``
  (needs ``log p``).

Every energy is a sum of squares ``sum_i |e_i|^2``; ``e_i`` is what :meth:`segment` returns.

The official protocol (what the experiments run; the official code taka2223/GFM-release,
``gfm/path/metrics.py`` and ``geodesic_interpolation.py``):
:func:`fit_rbf_official` / :func:`fit_land_official` fit the metrics as there (k-means centres,
weights by Adam), :func:`official_energy` writes each baseline's path energy in the official form
and :func:`adam_path` minimises it with the official optimiser (:data:`OFFICIAL`: Adam, its
learning rate, iteration budget, cosine decay and initialisation per method). Each pair is
optimised with its own Adam state (the official code sums the batch into one loss; Adam is
invariant to that scale up to its eps).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import check_endpoints, positive
from ._init import check_great_circle, straight_line
from ._minimise import METHODS, minimise_path
from ._status import SolveReport
from ._support import DEFAULT_SUPPORT_THRESHOLD, check_paths, resolve_support_sigma

__all__ = [
    "linear",
    "spherical",
    "PathEnergy",
    "RBFEnergy",
    "LANDEnergy",
    "ScoreEnergy",
    "SteinEnergy",
    "DensityConformalEnergy",
    "fit_land",
    "minimise_energy",
    "path_energy",
    "OFFICIAL",
    "fit_rbf_official",
    "fit_land_official",
    "official_energy",
    "OfficialEnergy",
    "adam_path",
]

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


# ---------------------------------------------------------------------------------------------
# The official protocol: metric fits, energies and optimiser settings of taka2223/GFM-release.

OFFICIAL: dict[str, dict] = {
    "rbf": dict(init="linear", lr=0.01, iters=2000, cosine=None),
    "land": dict(init="linear", lr=0.01, iters=400, cosine=None),
    "jacobian": dict(init="slerp", lr=0.01, iters=400, cosine=0.1),
    "stein": dict(init="slerp", lr=0.01, iters=400, cosine=0.1),
    # Not in the official code (the paper's "related" 1/p metric): our choice, the RBF settings.
    "inverse_density": dict(init="linear", lr=0.01, iters=2000, cosine=None),
}
"""Adam settings per baseline: initial path, learning rate, iterations, and the cosine decay's
final fraction of the rate (``None``: constant rate). RBF / LAND: ``RBFKernelInterpolator`` /
``LandInterpolator`` defaults (2000 / 400 iterations at lr 0.01, linear start); score-Jacobian and
Stein: ``optim_path.py`` (lr 0.01, 400 iterations) with the interpolators' cosine annealing to
0.1 lr and SLERP start."""


def _adam_fit(loss, params, data, *, lr, iters, batch, seed):
    """Adam (optax defaults = PyTorch's) on ``loss(params, batch_rows)`` with minibatches drawn
    with replacement; one ``lax.scan``."""
    import optax

    opt = optax.adam(lr)
    data = jnp.asarray(data)

    def step(carry, key):
        p, s = carry
        idx = jax.random.randint(key, (batch,), 0, data.shape[0])
        g = jax.grad(loss)(p, data[idx])
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), None

    keys = jax.random.split(jax.random.key(seed), iters)
    (params, _), _ = jax.jit(lambda c: jax.lax.scan(step, c, keys))((params, opt.init(params)))
    return params


def fit_rbf_official(
    data,
    *,
    n_centers: int = 1000,
    kappa: float = 3.0,
    fit_iters: int = 30_000,
    batch: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
) -> RBFEnergy:
    """The official RBF metric (``h_diag_RBF``): scikit-learn k-means centres ``c_k`` (the
    members' mean), ``sigma_k = sqrt(sum_d var_kd) + 1e-5`` over cluster ``k``,
    ``lam_k = 0.5 / (kappa sigma_k)^2``, ``h(x) = sum_k W_k exp(-0.5 lam_k |x - c_k|^2)`` with
    ``W ~ U(0, 1)`` fitted by Adam (lr 1e-3, 30,000 iterations of batch 128) on
    ``mean (1 - h(z))^2``. Defaults: the class defaults (1000 centres, kappa 3); the training
    script uses 2000 and 2. ``W`` is unconstrained, as there."""
    from sklearn.cluster import KMeans

    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or len(data) < n_centers:
        raise ValueError(f"data of shape {data.shape}: expected (n >= n_centers={n_centers}, d)")
    labels = KMeans(n_clusters=n_centers, random_state=seed, n_init="auto").fit(data).labels_
    centers = np.zeros((n_centers, data.shape[1]))
    spread = np.full(n_centers, 1e-5)
    for k in range(n_centers):
        pts = data[labels == k]
        if len(pts):
            centers[k] = pts.mean(0)
            spread[k] = np.sqrt(((pts - centers[k]) ** 2).mean(0).sum()) + 1e-5
    lam = 0.5 / (kappa * spread) ** 2
    bandwidths = jnp.asarray(0.5 * lam)
    c = jnp.asarray(centers)
    w0 = jnp.asarray(np.random.default_rng(seed).uniform(size=n_centers))

    def loss(w, z):
        phi = jnp.exp(-bandwidths[None] * jnp.sum((z[:, None] - c[None]) ** 2, -1))
        return jnp.mean((1.0 - phi @ w) ** 2)

    w = _adam_fit(loss, w0, data, lr=lr, iters=fit_iters, batch=batch, seed=seed)
    return RBFEnergy(c, bandwidths, w)


def fit_land_official(
    data,
    *,
    n_reference: int = 1000,
    fit_iters: int = 3000,
    batch: int = 128,
    lr: float = 0.1,
    seed: int = 0,
) -> LANDEnergy:
    """The official LAND metric (``LandInterpolator.fit``): the first ``n_reference`` rows are
    the reference points, ``gamma`` = median pairwise distance among the first 200 of them / 3,
    and the scalar ``W`` (from 1) is fitted by Adam (lr 0.1, 3000 iterations of batch 128) on
    ``(1 - mean_d W M_dd(z))^2`` over the remaining rows."""
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 2 or len(data) <= n_reference:
        raise ValueError(f"data of shape {data.shape}: expected more than {n_reference} rows")
    ref = data[:n_reference]
    m = min(200, n_reference)
    d = np.sqrt(((ref[:m, None] - ref[None, :m]) ** 2).sum(-1))
    gamma = float(np.median(d[~np.eye(m, dtype=bool)])) / 3.0
    land = LANDEnergy(jnp.asarray(ref), jnp.asarray(gamma))

    def loss(w, z):
        mdd = jax.vmap(land.local_variance)(z)
        return jnp.mean((1.0 - jnp.mean(w * mdd, axis=-1)) ** 2)

    w = _adam_fit(loss, jnp.asarray(1.0), data[n_reference:], lr=lr, iters=fit_iters,
                  batch=batch, seed=seed)  # fmt: skip
    return LANDEnergy(jnp.asarray(ref), jnp.asarray(gamma), w)


class OfficialEnergy(eqx.Module):
    """``path (K, d) -> energy`` of one baseline in the official code's form; see
    :func:`official_energy`. A module (arrays as leaves), so jitted solves are reused across
    seeds and noise levels."""

    method: str = eqx.field(static=True)
    metric: object = None
    score: object = None
    sigma: jax.Array | None = None
    lam: float = eqx.field(static=True, default=STEIN_LAMBDA)

    def __call__(self, path):
        dt = 1.0 / (path.shape[0] - 1)
        dx = path[1:] - path[:-1]
        v = dx / dt
        mid = 0.5 * (path[1:] + path[:-1])
        if self.method == "rbf":
            g = 1.0 / (jax.vmap(self.metric.h)(mid) + METRIC_EPS)
            return jnp.mean(g * jnp.sum(v**2, -1)) * dt
        if self.method == "land":
            g = jax.vmap(self.metric.diagonal)(mid)
            return jnp.mean(jnp.sum(g * v**2, -1)) * dt
        if self.method == "jacobian":
            s = jax.vmap(self.score)(path)
            return 0.5 * jnp.sum((s[1:] - s[:-1]) ** 2) / dt
        if self.method == "stein":
            s2 = self.sigma.astype(path.dtype) ** 2
            den = jax.lax.stop_gradient(mid + s2 * jax.vmap(self.score)(mid))
            s = (den - mid) / s2
            return 0.5 * jnp.mean(jnp.sum(dx**2, -1) + self.lam * jnp.sum(s * dx, -1) ** 2)
        # inverse_density
        inc = jnp.sum(jax.vmap(self.score)(mid) * dx, -1)
        logp = jnp.concatenate([jnp.zeros(1, path.dtype), jnp.cumsum(inc)])
        logp_mid = 0.5 * (logp[1:] + logp[:-1])
        return jnp.mean(jnp.exp(-logp_mid) * jnp.sum(v**2, -1)) * dt


def official_energy(
    method: str, *, metric=None, score=None, sigma=None, lam: float = STEIN_LAMBDA
) -> OfficialEnergy:
    """``path (K, d) -> energy`` in the official code's form (``dt = 1/(K-1)``, ``v_i = dx_i /
    dt``, ``m_i`` segment midpoints):

    - ``"rbf"``: ``mean_i g(m_i) |v_i|^2 dt``, ``g = 1/(h + 1e-3)`` (``metric``: an
      :class:`RBFEnergy`);
    - ``"land"``: ``mean_i sum_d g_d(m_i) v_id^2 dt`` (``metric``: a :class:`LANDEnergy`);
    - ``"jacobian"``: ``1/2 sum_i |s(x_{i+1}) - s(x_i)|^2 / dt``, gradients through the score;
    - ``"stein"``: ``1/2 mean_i (|dx_i|^2 + lam (s(m_i) . dx_i)^2)`` with
      ``s(m) = (stop_gradient(D(m)) - m) / sigma^2``, ``D(m) = m + sigma^2 score(m)`` (the
      network output detached, ``m`` in the graph, as there);
    - ``"inverse_density"``: the conformal ``1/p`` metric ``mean_i |v_i|^2 / p(m_i) dt`` (not in
      the official code). A denoiser gives no ``log p``; it is reconstructed along the path by
      integrating the score (midpoint rule: ``log p(x_{i+1}) - log p(x_i) ~ s(m_i) . dx_i``,
      ``log p(m_i)`` the mean of its ends), up to the constant ``log p(x_0)``, which scales the
      energy and does not move its minimiser. An approximation: exact only for a conservative
      score and in the limit of fine paths.
    """
    if method in ("rbf", "land"):
        if metric is None:
            raise ValueError(f"method {method!r} needs a fitted metric")
        return OfficialEnergy(method, metric=metric)
    if method not in ("jacobian", "stein", "inverse_density"):
        raise ValueError(
            f"method {method!r}: expected 'rbf', 'land', 'jacobian', 'stein' or 'inverse_density'"
        )
    if score is None:
        raise ValueError(f"method {method!r} needs a score")
    if method == "stein" and sigma is None:
        raise ValueError("method 'stein' needs sigma (s = (D - x) / sigma^2)")
    sig = None if sigma is None else jnp.asarray(sigma)
    return OfficialEnergy(method, score=score, sigma=sig, lam=lam)


@eqx.filter_jit
def _adam_core(energy, path0, lr, iters, cosine):
    import optax

    if cosine is None:
        schedule = lr
    else:
        schedule = optax.cosine_decay_schedule(lr, iters, alpha=cosine)
    opt = optax.adam(schedule)

    def one(path):
        inner0 = path[1:-1]
        full = lambda inner: jnp.concatenate([path[:1], inner, path[-1:]])  # noqa: E731

        def step(carry, _):
            inner, state = carry
            e, g = jax.value_and_grad(lambda z: energy(full(z)))(inner)
            u, state = opt.update(g, state, inner)
            return (optax.apply_updates(inner, u), state), e

        (inner, _), trace = jax.lax.scan(step, (inner0, opt.init(inner0)), None, length=iters)
        final = full(inner)
        return final, energy(final), trace

    return jax.vmap(one)(path0)


def adam_path(energy: Callable, init, *, lr: float, iters: int, cosine: float | None = None):
    """Minimise ``energy(path)`` over the interior waypoints of ``init`` ``(B, K, d)`` with
    Adam (optax's defaults = PyTorch's: betas 0.9/0.999, eps 1e-8), ``iters`` iterations at rate
    ``lr``, with cosine annealing to ``cosine * lr`` if given; the endpoints stay fixed, no early
    stopping (as the official code). Returns ``(paths, final_energy, trace (B, iters), seconds)``;
    a pair whose energy went non-finite keeps its (non-finite) final path, so callers can count
    it as diverged."""
    init = jnp.asarray(init)
    if init.ndim != 3 or init.shape[1] < 3:
        raise ValueError(f"init of shape {init.shape}: expected (batch, K >= 3, d)")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters={iters!r}: expected an int >= 1")
    positive("lr", lr)
    t0 = time.perf_counter()
    paths, final, trace = _adam_core(energy, init, jnp.asarray(lr, init.dtype), iters, cosine)
    paths = jax.block_until_ready(paths)
    return paths, np.asarray(final), np.asarray(trace), time.perf_counter() - t0
