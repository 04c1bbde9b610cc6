"""Path metrics and adaptors that bind a noise level to a potential.

:func:`path_metrics` measures a solved path: distance to the true manifold along the path
(mean, max, and the per-waypoint profile), length under the prior metric, the GFM
Euler-Lagrange residual, and the log-density along the path where one is available.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from ._metrics import Euclidean
from ._residuals import path_residuals, residual_norm

__all__ = [
    "ScoreAt",
    "LogDensityAt",
    "path_metrics",
    "prior_length",
    "compiled_memory_bytes",
    "denoiser_displacement",
    "path_validity",
]


class ScoreAt(eqx.Module):
    """``x -> model.score(x, sigma)`` for a denoiser / potential with ``score(x, sigma)``.
    ``sigma`` is an array field, so a new noise level does not recompile a solve."""

    model: Callable
    sigma: jax.Array = eqx.field(converter=jnp.asarray)

    def __call__(self, x):
        return self.model.score(x, self.sigma.astype(x.dtype)).astype(x.dtype)


class LogDensityAt(eqx.Module):
    """``x -> model.log_density(x, sigma)`` for an analytic potential."""

    model: Callable
    sigma: jax.Array = eqx.field(converter=jnp.asarray)

    def __call__(self, x):
        return self.model.log_density(x, self.sigma.astype(x.dtype)).astype(x.dtype)


def prior_length(path, metric: Callable | None) -> jax.Array:
    """``sum_i sqrt(dx_i^T G(m_i) dx_i)`` with midpoints ``m_i``: the path's length under G."""
    metric = Euclidean() if metric is None else metric
    dx = path[1:] - path[:-1]
    mid = 0.5 * (path[1:] + path[:-1])
    g = jax.vmap(metric)(mid)
    return jnp.sum(jnp.sqrt(jnp.einsum("ki,kij,kj->k", dx, g, dx)))


def _denoise_fn(denoiser) -> Callable:
    """``(x, sigma) -> D(x, sigma)`` from a model with ``denoise`` or a plain callable."""
    if hasattr(denoiser, "denoise"):
        return denoiser.denoise
    if callable(denoiser):
        return denoiser
    raise TypeError(
        f"denoiser must have .denoise(x, sigma) or be a callable (x, sigma) -> D, got "
        f"{type(denoiser).__name__}"
    )


@eqx.filter_jit
def _displacement(path, denoiser, sigma):
    d = _denoise_fn(denoiser)
    flat = path.reshape(-1, path.shape[-1])
    out = jax.vmap(lambda x: d(x, sigma.astype(x.dtype)).astype(x.dtype) - x)(flat)
    return jnp.linalg.norm(out, axis=-1).reshape(path.shape[:-1])


def denoiser_displacement(path, denoiser, sigma=0.05) -> jax.Array:
    """``|D(x, sigma) - x|`` at every waypoint: how far the denoiser moves each point.

    A validity check that needs no true manifold and applies to any method's path (shape
    ``(..., d)``; the result has shape ``(...)``). For a denoiser that has learned the data
    support, ``D(x, sigma)`` is the posterior mean of the clean point (Tweedie), close to the
    nearest point of the support for points within a few ``sigma`` of it, so the displacement
    approximates the distance to the support there; far off the support the network is outside
    its training distribution and the displacement is only a lower-bound-like indicator (see
    ``experiments/gfm/README_solver.md`` for its calibration against the torus's true
    distance). ``denoiser``: an object with ``denoise(x, sigma)`` (``EDMDenoiser`` and the
    analytic potentials) or a callable ``(x, sigma) -> D``.
    """
    path = jnp.asarray(path)
    sigma = jnp.asarray(sigma, path.dtype)
    if sigma.shape != () or not bool(sigma > 0):
        raise ValueError(f"sigma={sigma}: expected a positive scalar")
    return _displacement(path, denoiser, sigma)


def path_validity(
    path, *, denoiser=None, sigma=0.05, manifold=None, threshold: float | None = None
) -> dict[str, jax.Array]:
    """Is a path (``(K, d)`` or ``(B, K, d)``) on the data support? Per path:

    - ``displacement_mean`` / ``_max``: :func:`denoiser_displacement` along it (no true
      manifold needed), when ``denoiser`` is given;
    - ``distance_mean`` / ``_max``: the true distance to ``manifold`` (a
      :mod:`geomopt.manifolds` shape), when given;
    - ``on_manifold``: with a ``threshold``, ``distance_max <= threshold`` where the manifold is
      known, else ``displacement_max <= threshold``.
    """
    path = jnp.asarray(path)
    if path.ndim not in (2, 3):
        raise ValueError(f"path of shape {path.shape}: expected (K, d) or (B, K, d)")
    out = {}
    if denoiser is not None:
        disp = denoiser_displacement(path, denoiser, sigma)
        out.update(displacement_mean=jnp.mean(disp, -1), displacement_max=jnp.max(disp, -1))
    if manifold is not None:
        flat = path.reshape(-1, path.shape[-1])
        dist = jax.jit(jax.vmap(manifold.distance))(flat).reshape(path.shape[:-1])
        out.update(distance_mean=jnp.mean(dist, -1), distance_max=jnp.max(dist, -1))
    if not out:
        raise ValueError("path_validity needs a denoiser, a manifold, or both")
    if threshold is not None:
        worst = out["distance_max"] if manifold is not None else out["displacement_max"]
        out["on_manifold"] = worst <= threshold
    return out


@eqx.filter_jit
def _metrics_one(path, manifold, metric, score, lam, log_density, kind, denoiser, d_sigma):
    out = {}
    if denoiser is not None:
        disp = _displacement(path, denoiser, d_sigma)
        out.update(
            displacement=disp, displacement_mean=jnp.mean(disp), displacement_max=jnp.max(disp)
        )
    if manifold is not None:
        dist = jax.vmap(manifold.distance)(path)
        out.update(dist=dist, manifold_error_mean=jnp.mean(dist), manifold_error_max=jnp.max(dist))
    out["prior_length"] = prior_length(path, metric)
    res = path_residuals(path, lam=lam, score=score, metric=metric, kind=kind)
    out["el_residual"] = residual_norm(res)
    if log_density is not None:
        lp = jax.vmap(log_density)(path)
        out.update(log_density_mean=jnp.mean(lp), log_density_min=jnp.min(lp))
    return out


def path_metrics(
    path,
    *,
    manifold=None,
    metric: Callable | None = None,
    score: Callable | None = None,
    lam=None,
    log_density: Callable | None = None,
    denoiser=None,
    denoiser_sigma=0.05,
) -> dict[str, jax.Array]:
    """Metrics of one path ``(K, d)`` or a batch ``(B, K, d)`` (values gain a leading axis).

    ``manifold`` (a :mod:`geomopt.manifolds` shape, with ``distance``) gives ``dist`` (per
    waypoint), ``manifold_error_mean`` / ``_max``; ``metric`` the prior for ``prior_length`` and
    the residual; ``score``/``lam`` the potential of the GFM residual ``el_residual``
    (``sqrt(mean_i r_i^T G r_i)``; ``lam`` is required with a score, there is no default
    weight: pass the one the path was solved with, ``report.lam``); ``log_density`` gives
    ``log_density_mean`` / ``_min``;
    ``denoiser`` gives the validity check without the manifold, ``displacement`` (per
    waypoint) and ``displacement_mean`` / ``_max`` (:func:`denoiser_displacement` at
    ``denoiser_sigma``).
    """
    if score is not None and lam is None:
        raise ValueError(
            "path_metrics: a score without lam; pass the lam the path was solved with "
            "(report.lam of geomopt.gfm.solve)"
        )
    path = jnp.asarray(path)
    kind = "euclidean" if metric is None or isinstance(metric, Euclidean) else "metric"
    lam = jnp.asarray(0.0 if lam is None else lam, path.dtype)
    d_sigma = jnp.asarray(denoiser_sigma, path.dtype)
    f = lambda p: _metrics_one(  # noqa: E731
        p, manifold, metric, score, lam, log_density, kind, denoiser, d_sigma
    )
    if path.ndim == 3:
        return jax.vmap(f)(path)
    if path.ndim != 2:
        raise ValueError(f"path of shape {path.shape}: expected (K, d) or (B, K, d)")
    return f(path)


def compiled_memory_bytes(fn: Callable, *args) -> int:
    """XLA's estimate of the peak memory of ``jax.jit(fn)(*args)`` (arguments + outputs +
    temporaries, from ``compiled.memory_analysis()``); -1 where the backend gives none."""
    try:
        stats = jax.jit(fn).lower(*args).compile().memory_analysis()
    except Exception:  # backends without memory analysis
        return -1
    if stats is None:
        return -1
    return int(stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes)
