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

__all__ = ["ScoreAt", "LogDensityAt", "path_metrics", "prior_length", "compiled_memory_bytes"]


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


@eqx.filter_jit
def _metrics_one(path, manifold, metric, score, lam, log_density, kind):
    out = {}
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
    lam=1.0,
    log_density: Callable | None = None,
) -> dict[str, jax.Array]:
    """Metrics of one path ``(K, d)`` or a batch ``(B, K, d)`` (values gain a leading axis).

    ``manifold`` (a :mod:`geomopt.manifolds` shape, with ``distance``) gives ``dist`` (per
    waypoint), ``manifold_error_mean`` / ``_max``; ``metric`` the prior for ``prior_length`` and
    the residual; ``score``/``lam`` the potential of the GFM residual ``el_residual``
    (``sqrt(mean_i r_i^T G r_i)``); ``log_density`` gives ``log_density_mean`` / ``_min``.
    """
    path = jnp.asarray(path)
    kind = "euclidean" if metric is None or isinstance(metric, Euclidean) else "metric"
    lam = jnp.asarray(lam, path.dtype)
    f = lambda p: _metrics_one(p, manifold, metric, score, lam, log_density, kind)  # noqa: E731
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
