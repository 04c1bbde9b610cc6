"""Gradient-noise density: per-coordinate variance of mini-batch gradients and
``phi = (sum_i sigma_i)^2 / (M sum_i sigma_i^2)`` (the paper's noise density, in [1/M, 1]).

The variance is accumulated with Welford's update inside a ``lax.scan`` (numerically safe in
float32: no ``E[g^2] - E[g]^2`` cancellation when the mean is large against the spread); the
sums defining phi are taken on the host in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["welford_variance", "noise_density", "noise_group"]


def welford_variance(fn: Callable, xs, *args):
    """Population variance over ``k`` of ``fn(xs[k], *args)`` (a pytree of arrays).

    Runs ``fn`` once per leading-axis slice of ``xs`` in a ``lax.scan`` and returns
    ``(mean, var)`` pytrees, ``var = (1/K) sum_k (g_k - mean)^2`` (the paper's
    ``E[g^2] - E[g]^2``), accumulated with Welford's recurrence.
    """
    n_samples = jax.tree.leaves(xs)[0].shape[0]
    first = jax.eval_shape(fn, jax.tree.map(lambda x: x[0], xs), *args)
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), first)

    def body(carry, x):
        count, mean, m2 = carry
        g = jax.tree.map(lambda a: a.astype(jnp.float32), fn(x, *args))
        count = count + 1.0
        delta = jax.tree.map(jnp.subtract, g, mean)
        mean = jax.tree.map(lambda m, d: m + d / count, mean, delta)
        m2 = jax.tree.map(lambda s, d, a, m: s + d * (a - m), m2, delta, g, mean)
        return (count, mean, m2), None

    (_, mean, m2), _ = jax.lax.scan(body, (jnp.float32(0.0), zeros, zeros), xs)
    return mean, jax.tree.map(lambda s: s / n_samples, m2)


def _phi(sum_sigma: float, sum_sq: float, m: int) -> float:
    return float(sum_sigma**2 / (m * sum_sq)) if sum_sq > 0 else float("nan")


def noise_density(var_tree, groups=None) -> dict[str, float]:
    """``phi`` of the standard deviations ``sqrt(max(var, 0))``, overall and per group.

    ``groups`` is a pytree of group names like ``var_tree`` (or None). Returns
    ``{"phi": ..., "phi/<group>": ...}``; all sums in float64 on the host.
    """
    leaves = [np.asarray(jax.device_get(v), dtype=np.float64) for v in jax.tree.leaves(var_tree)]
    names = [None] * len(leaves) if groups is None else list(jax.tree.leaves(groups))
    if len(names) != len(leaves):
        raise ValueError(f"groups has {len(names)} leaves, the variance tree {len(leaves)}")
    totals: dict[str, list[float]] = {}
    for var, name in zip(leaves, names, strict=True):
        sigma = np.sqrt(np.maximum(var, 0.0))
        stats = (float(sigma.sum()), float(np.square(sigma).sum()), sigma.size)
        for key in ("phi",) + (() if name is None else (f"phi/{name}",)):
            acc = totals.setdefault(key, [0.0, 0.0, 0])
            for i in range(3):
                acc[i] += stats[i]
    return {k: _phi(s, q, int(m)) for k, (s, q, m) in totals.items()}


def noise_group(path) -> str:
    """Group of a GPT-2 parameter for the per-group phi: embedding, attention, mlp, or
    gains_biases (LayerNorm gains and all biases)."""
    names = [str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p)))) for p in path]
    if names and names[0] in ("wte", "wpe"):
        return "embedding"
    if "kernel" in names:
        return "attention" if "attn" in names else "mlp"
    return "gains_biases"


def noise_groups(params) -> Mapping:
    return jax.tree_util.tree_map_with_path(lambda p, _: noise_group(p), params)
