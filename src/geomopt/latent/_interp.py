"""Every interpolation method of the latent experiments, behind one interface, with the
official pipeline.

Following the official ``optim_path.py`` (GFM-release):

- the **noised** methods ``gfm``, ``gfm_adam``, ``jacobian``, ``stein`` work at noise level
  ``sigma``: both endpoints are noised (``x + sigma N(0, I)``, one draw shared by these
  methods), the path is optimised between the noised endpoints against the denoiser's score at
  ``sigma``, and its waypoints are then denoised by the EDM Heun sampler from ``sigma`` to
  ``sigma_min`` (``num_steps`` levels, ``rho`` 7, a final Euler step to 0; official: 5 steps,
  0.3 -> 0.002) -- :func:`heun_denoise`;
- ``rbf``, ``land`` optimise their metric energies between the clean endpoints from the
  straight line (Adam, lr 0.01, 2000 / 400 iterations), no noise, no denoising;
- ``linear``, ``slerp``: plain interpolation of the clean endpoints.

**Endpoints: every method's path starts and ends at the clean endpoints.** The official code
also denoises the noised endpoints, so its noised methods end at ``D(x0 + sigma eps)``, not at
``x0``, while rbf / land (and linear / SLERP) keep ``x0``: two methods would then interpolate
between different objects, and every metric that sees the endpoints (PPL, PDV, the figures)
would compare them on different terms. We pin the clean endpoints instead of denoising all:
denoising a clean endpoint changes it (the sampler from ``sigma`` treats its input as noisy),
so "denoise all" would move every method's endpoints away from the pair it was asked to join.
The noised methods' inner waypoints are exactly the official ones; how far the official
pipeline would have moved the endpoints is reported as ``endpoint_shift`` (mean
``|D(x + sigma eps) - x|`` over both ends, divided by the mean ``|x1 - x0|``).

Solvers: ``gfm`` is :func:`geomopt.gfm.solve` (Levenberg-Marquardt, exact Jacobian) with the
``residual`` chosen (official latents: ``"hypersphere"``) from the SLERP path; ``gfm_adam`` is
the official optimiser (Adam lr 0.01, eps 1e-5, no clipping, 500 iterations, force detached).
``jacobian`` (score-Jacobian energy, gradients through the network) and ``stein`` (the
official form, :func:`geomopt.gfm.baselines.official_energy`: score ``(D(m) - m) / sigma^2`` at
the midpoints with the network output detached and ``m`` in the graph, lambda 1000) use Adam
with cosine decay to 0.1 lr from the SLERP path, as the official ``ScoreBasedInterpolator`` /
``SteinScoreInterpolator``. ``rbf`` is the official
RBF metric (:func:`geomopt.gfm.baselines.fit_rbf_official`: k-means centres, ``kappa``, weights
by Adam on ``mean (1 - h)^2``); ``land`` is :func:`geomopt.gfm.baselines.fit_land` (the official
bandwidth, ``W = 1``).

A method is a :class:`Method`: whether it is noised, and ``solve(problem) -> (paths, report)``
on a :class:`Problem` (its endpoints, the denoiser and its score, the data the metric methods
fit, the :class:`Settings`). :data:`REGISTRY` maps names to methods; :func:`interpolate_all`
runs any of them on a batch of pairs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from geomopt.diffusion import pf_ode_denoise
from geomopt.gfm import ScoreAt, solve
from geomopt.gfm import baselines as bl

__all__ = [
    "METHODS",
    "NOISED",
    "REGISTRY",
    "Method",
    "Problem",
    "Settings",
    "slerp",
    "heun_denoise",
    "adam_energy",
    "interpolate_all",
]


@dataclasses.dataclass(frozen=True)
class Settings:
    """What every method may read: path size, noise level, solver budgets, metric fits."""

    n_points: int = 10
    """Waypoints including the endpoints."""
    sigma: float = 0.3
    """Noise level of the noised methods (endpoint noise, score, start of denoising)."""
    lam: float = 1.0
    """Potential weight lambda of GFM."""
    residual: str = "hypersphere"
    """GFM residual: ``"hypersphere"`` or ``"euclidean"``."""
    lr: float = 0.01
    """Adam learning rate of every Adam-based method."""
    adam_iters: int = 500
    """Adam iterations of gfm_adam / jacobian / stein."""
    rbf_iters: int = 2000
    """Adam iterations of the rbf path."""
    land_iters: int = 400
    """Adam iterations of the land path."""
    rbf_centers: int = 64
    """k-means centres of the RBF metric."""
    rbf_kappa: float = 2.0
    """Bandwidth factor kappa of the RBF metric (official training script: 2)."""
    rbf_fit_iters: int = 30_000
    """Adam iterations of the RBF weights' fit (official 30,000, batch 128, lr 1e-3)."""
    denoise_steps: int = 5
    """EDM Heun levels from sigma to 0.002."""

    @classmethod
    def of(cls, cfg: Any) -> Settings:
        """The settings named like fields of ``cfg`` (an experiment config); the rest default."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{n: getattr(cfg, n) for n in names if hasattr(cfg, n)})


class Problem(NamedTuple):
    """One method's input: endpoints ``x0, x1 (B, d)`` (noised for a noised method), the
    SLERP path between them, the denoiser and its score at ``sigma``, the data rbf / land fit,
    and the settings."""

    x0: np.ndarray
    x1: np.ndarray
    slerp: np.ndarray
    denoiser: Any
    score: Any
    data: np.ndarray
    settings: Settings


class Method(NamedTuple):
    """An interpolation method: ``solve(problem) -> (paths (B, K, d), report or None)``;
    ``noised`` methods get noised endpoints and have their waypoints denoised afterwards."""

    noised: bool
    solve: Callable[[Problem], tuple[Any, Any]]


def heun_denoise(
    denoiser: Callable, x, sigma: float, *, num_steps: int = 5, sigma_min: float = 0.002,
    rho: float = 7.0,
):  # fmt: skip
    """EDM's deterministic Heun sampler started AT noise level ``sigma`` (``x`` is taken as
    already noisy, as the official ``init_at_sigma=True``): levels ``sigma = t_0 > ... >
    t_{N-1} = sigma_min`` (EDM eq. 5), a Heun step between consecutive levels and the final
    Euler step to 0 (``x <- D(x, sigma_min)``). ``x`` is ``(B, d)``. This is
    :func:`geomopt.diffusion.pf_ode_denoise` (diffrax's Heun on those levels)."""
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x of shape {x.shape}: expected (B, d)")
    return pf_ode_denoise(denoiser, x, float(sigma), num_steps=num_steps, sigma_min=sigma_min,
                          rho=rho)  # fmt: skip


def slerp(x0, x1, n_points: int) -> np.ndarray:
    """Batched SLERP about the origin, ``(B, d) -> (B, n_points, d)`` float32: the direction
    follows the great circle, the norm is interpolated linearly (the official
    ``slerp_interpolate``): :func:`geomopt.gfm.baselines.spherical` as a NumPy array."""
    return np.asarray(bl.spherical(np.asarray(x0, np.float32), np.asarray(x1, np.float32),
                                   n_points), np.float32)  # fmt: skip


def adam_energy(energy: bl.PathEnergy, path0, *, lr: float, iters: int, cosine: bool):
    """Adam (PyTorch defaults but ``lr``; cosine decay to 0.1 lr if ``cosine``) for ``iters``
    iterations on ``sum_pairs path_energy`` over the interior waypoints of ``path0 (B, K, d)``.
    Pairs are independent: :func:`geomopt.gfm.baselines.adam_path` on each."""
    paths, _, _, _ = bl.adam_path(
        jax.tree_util.Partial(bl.path_energy, energy), jnp.asarray(path0), lr=float(lr),
        iters=int(iters), cosine=0.1 if cosine else None,
    )  # fmt: skip
    return paths


def _f32(module):
    return jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_array(a) else a, module)


def _gfm(p: Problem, **solver):
    s = p.settings
    return solve(p.x0, p.x1, score=p.score, lam=s.lam, n_points=s.n_points,
                 residual=s.residual, init=p.slerp, **solver)  # fmt: skip


def _gfm_adam(p: Problem):
    return _gfm(p, method="adam", lr=p.settings.lr, max_iters=p.settings.adam_iters, clip=np.inf)


def _jacobian(p: Problem):
    s = p.settings
    energy = bl.ScoreEnergy(p.score)
    return adam_energy(energy, p.slerp, lr=s.lr, iters=s.adam_iters, cosine=True), None


def _stein(p: Problem):
    s = p.settings
    energy = bl.official_energy("stein", score=p.score, sigma=s.sigma)
    paths, _, _, _ = bl.adam_path(energy, p.slerp, lr=s.lr, iters=s.adam_iters, cosine=0.1)
    return paths, None


def _rbf(p: Problem):
    s = p.settings
    energy = _f32(bl.fit_rbf_official(p.data, n_centers=s.rbf_centers, kappa=s.rbf_kappa,
                                      fit_iters=s.rbf_fit_iters))  # fmt: skip
    line = np.asarray(bl.linear(p.x0, p.x1, s.n_points))
    return adam_energy(energy, line, lr=s.lr, iters=s.rbf_iters, cosine=False), None


def _land(p: Problem):
    s = p.settings
    energy = _f32(bl.fit_land(p.data))
    line = np.asarray(bl.linear(p.x0, p.x1, s.n_points))
    return adam_energy(energy, line, lr=s.lr, iters=s.land_iters, cosine=False), None


REGISTRY: dict[str, Method] = {
    "gfm": Method(True, _gfm),
    "gfm_adam": Method(True, _gfm_adam),
    "jacobian": Method(True, _jacobian),
    "stein": Method(True, _stein),
    "rbf": Method(False, _rbf),
    "land": Method(False, _land),
    "linear": Method(False, lambda p: (bl.linear(p.x0, p.x1, p.settings.n_points), None)),
    "slerp": Method(False, lambda p: (p.slerp, None)),
}
"""Every method by name."""

METHODS: tuple[str, ...] = tuple(REGISTRY)
NOISED = frozenset(m for m, method in REGISTRY.items() if method.noised)


def interpolate_all(
    x0,
    x1,
    *,
    denoiser,
    data,
    methods: tuple[str, ...] = METHODS,
    key,
    on_method: Callable | None = None,
    **settings,
) -> dict[str, dict]:
    """Paths ``(B, n_points, d)`` between clean endpoints ``x0, x1 (B, d)`` for every method,
    each with the clean endpoints as its first and last waypoint (module docstring).

    ``denoiser``: ``D(x, sigma)`` with a ``score`` method (an :class:`EDMDenoiser`); ``data``
    ``(n, d)``: the points rbf / land are fitted to; ``settings``: fields of :class:`Settings`.
    Returns ``{method: {"path", "seconds", "iterations", "converged"}}``, and for the noised
    methods also ``"noisy_path"`` (before denoising) and ``"endpoint_shift"`` (module
    docstring); ``on_method(name)`` is called after each method.
    """
    s = Settings(**settings)
    x0 = np.asarray(x0, np.float32)
    x1 = np.asarray(x1, np.float32)
    if x0.shape != x1.shape or x0.ndim != 2:
        raise ValueError(f"endpoints of shapes {x0.shape}, {x1.shape}: expected equal (B, d)")
    for name, x in (("x0", x0), ("x1", x1)):
        if not np.isfinite(x).all():
            raise ValueError(f"endpoints {name} have non-finite values")
    bad = [m for m in methods if m not in REGISTRY]
    if bad:
        raise ValueError(f"methods {bad}: expected some of {METHODS}")
    noise = s.sigma * np.asarray(jax.random.normal(key, (2,) + x0.shape), np.float32)
    n0, n1 = x0 + noise[0], x1 + noise[1]
    score = ScoreAt(denoiser, jnp.asarray(s.sigma, jnp.float32))
    data = np.asarray(data)
    noised = Problem(n0, n1, slerp(n0, n1, s.n_points), denoiser, score, data, s)
    clean = Problem(x0, x1, slerp(x0, x1, s.n_points), denoiser, score, data, s)
    scale = float(np.linalg.norm(x1 - x0, axis=-1).mean())
    out: dict[str, dict] = {}
    for m in methods:
        method = REGISTRY[m]
        t0 = time.perf_counter()
        path, rep = method.solve(noised if method.noised else clean)
        path = np.array(jax.block_until_ready(path))
        entry = {"iterations": None, "converged": None}
        if rep is not None:
            entry["iterations"] = np.asarray(rep.iterations)
            entry["converged"] = np.asarray(rep.converged)
        if method.noised:
            b, k, d = path.shape
            entry["noisy_path"] = path
            flat = heun_denoise(denoiser, path.reshape(b * k, d), s.sigma,
                                num_steps=s.denoise_steps)  # fmt: skip
            path = np.array(flat).reshape(b, k, d)
            shift = np.linalg.norm(path[:, [0, -1]] - np.stack([x0, x1], 1), axis=-1)
            entry["endpoint_shift"] = float(shift.mean() / max(scale, 1e-12))
        path[:, 0], path[:, -1] = x0, x1
        if not np.isfinite(path).all():
            raise FloatingPointError(f"method {m} produced non-finite waypoints")
        entry["path"] = path
        entry["seconds"] = time.perf_counter() - t0
        out[m] = entry
        if on_method is not None:
            on_method(m)
    return out
