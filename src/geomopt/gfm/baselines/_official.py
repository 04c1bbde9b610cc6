"""The official baseline protocol of the GFM paper (taka2223/GFM-release,
``gfm/path/metrics.py``, ``geodesic_interpolation.py`` and ``optim_path.py``): the metric fits
(:func:`fit_rbf_official`, :func:`fit_land_official`), each baseline's path energy in the
official form (:func:`official_energy`), the optimiser settings per baseline (:data:`OFFICIAL`),
and Adam on the interior waypoints (:func:`adam_path`; :func:`official_adam_path`, the official
latent GFM solver, is the same loop on the mean squared GFM residual). Public through
:mod:`geomopt.gfm.baselines`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import positive
from .._matrix_free import gfm_residual
from ._energies import METRIC_EPS, STEIN_LAMBDA, LANDEnergy, RBFEnergy

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


def adam_on_interior(energy: Callable, path0, opt: optax.GradientTransformation, iters: int):
    """``iters`` steps of ``opt`` on ``energy(path)`` over the interior waypoints of one path
    ``(K, d)``, its endpoints fixed, no early stop; traces (``iters`` static). Returns
    ``(path, trace)``, ``trace[k]`` the energy before update ``k``."""
    inner0 = path0[1:-1]
    full = lambda inner: jnp.concatenate([path0[:1], inner, path0[-1:]])  # noqa: E731

    def step(carry, _):
        inner, state = carry
        e, g = jax.value_and_grad(lambda z: energy(full(z)))(inner)
        u, state = opt.update(g, state, inner)
        return (optax.apply_updates(inner, u), state), e

    (inner, _), trace = jax.lax.scan(step, (inner0, opt.init(inner0)), None, length=iters)
    return full(inner), trace


@eqx.filter_jit
def _adam_core(energy, path0, lr, iters, cosine):
    schedule = lr if cosine is None else optax.cosine_decay_schedule(lr, iters, alpha=cosine)
    opt = optax.adam(schedule)

    def one(path):
        final, trace = adam_on_interior(energy, path, opt, iters)
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


def official_adam_path(
    path0, *, score, lam=1.0, lr=0.01, eps=1e-5, iters=500, residual="hypersphere"
):
    """The official GFM latent solver from the initial path ``path0`` ``(n_points, d)`` (its
    first and last rows are the endpoints, kept fixed; the official init is
    :func:`geomopt.gfm.slerp`): Adam (lr 0.01, eps 1e-5, no clipping) on
    ``mean((P a_i + lam P s(x_i))^2)`` over all entries of the GFM residual
    (:func:`geomopt.gfm.gfm_residual`, ``residual`` its kind), the force detached, ``iters``
    iterations (500 for shapes), no early stop. Traces: call it inside ``jit`` / ``vmap``
    (``iters`` and ``residual`` static).

    Returns ``(path, rms_history, final_rms)``: ``rms_history[k]`` is ``sqrt(mean_i |r_i|^2)``
    before update ``k``. The official loss also averages over a batch of pairs (16 in the shape
    runs), which scales the gradient relative to ``eps``; here the mean is per pair.
    """
    dtype = path0.dtype
    lam = jnp.asarray(lam, dtype)
    detached = lambda x: jax.lax.stop_gradient(score(x))  # noqa: E731

    def energy(path):
        return jnp.mean(gfm_residual(path, lam=lam, score=detached, kind=residual) ** 2)

    opt = optax.adam(jnp.asarray(lr, dtype), eps=jnp.asarray(eps, dtype))
    path, trace = adam_on_interior(energy, path0, opt, int(iters))
    w = gfm_residual(path, lam=lam, score=score, kind=residual)
    rms = lambda mean_sq: jnp.sqrt(w.shape[-1] * mean_sq)  # noqa: E731
    return path, rms(trace), rms(jnp.mean(w**2))
