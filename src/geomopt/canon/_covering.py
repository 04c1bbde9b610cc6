"""Covering-number proxies for canonizations of point clouds.

Covering proxy (the official experiment): for each test cloud ``X`` take the distance to the
nearest training cloud ``Y`` of the same class and reduce over test clouds (mean, or max),

    score = reduce_X  min_{Y: label(Y) = label(X)}  dist(X, Y),

with four distances between clouds of ``P`` points:

- ``"l2"``:      ``(1/P) sum_i |X[i] - Y[i]|_2`` (no reordering; the non-invariant baseline),
- ``"lex"``:     the same after each cloud is sorted by its own lexicographic order,
- ``"hilbert"``: the same after each cloud is sorted by its own Hilbert order (12 bits, global
  normalisation, as in the official code),
- ``"wass"``:    ``min_pi (1/P) sum_i |X[i] - Y[pi(i)]|_2`` by exact assignment
  (``scipy.optimize.linear_sum_assignment``): the invariant lower bound of the other three.

The regularity of the canonizations is measured by :mod:`geomopt.canon._holder` (the curves'
Hoelder exponent) and :mod:`geomopt.canon._stability` (how often and how far the canonical form
jumps under a perturbation).
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

from geomopt.canon._orders import canonize, get_order

__all__ = [
    "DISTANCES",
    "Distance",
    "pairwise_distances",
    "covering_proxy",
    "assignment_distance",
    "fit_exponent",
]

Distance = Literal["l2", "lex", "hilbert", "wass"]
DISTANCES: tuple[str, ...] = ("l2", "lex", "hilbert", "wass")


def _check_clouds(x, name):
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"{name}: shape {x.shape}; expected (n_clouds, P, d)")
    if not np.isfinite(x).all():
        raise ValueError(
            f"{name}: contains a non-finite value (NaN or inf); expected finite clouds"
        )
    return x


@jax.jit
def _mean_point_distance(a, b):
    """``(1/P) sum_i |a[m, i] - b[n, i]|_2`` for all pairs ``(m, n)``: shape ``(M, N)``."""
    diff = a[:, None, :, :] - b[None, :, :, :]
    return jnp.mean(jnp.sqrt(jnp.sum(diff * diff, axis=-1)), axis=-1)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _canonical_form(x, kind: str, bits: int):
    """Every cloud of ``x`` sorted by its own ``kind`` order (one compiled function)."""
    kw = {"bits": bits} if kind in ("hilbert", "morton") else {}
    return canonize(x, get_order(kind)(x, **kw))


def assignment_distance(x: np.ndarray, y: np.ndarray) -> float:
    """``min_pi (1/P) sum_i |x[i] - y[pi(i)]|_2`` (exact, Hungarian / Jonker-Volgenant)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"assignment_distance: shapes {x.shape}, {y.shape}; expected equal (P, d)")
    cost = np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def pairwise_distances(a, b, kind: str, *, bits: int = 12, chunk: int = 64) -> np.ndarray:
    """Distances ``(M, N)`` between clouds ``a`` ``(M, P, d)`` and ``b`` ``(N, P, d)`` (``kind`` in
    :data:`DISTANCES`). Orders are computed per cloud; ``chunk`` bounds memory of the l2 pass."""
    a, b = _check_clouds(a, "a"), _check_clouds(b, "b")
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"cloud shapes {a.shape[1:]} and {b.shape[1:]} differ")
    if kind not in DISTANCES:
        raise ValueError(f"distance {kind!r}: expected one of {DISTANCES}")
    if kind == "wass":
        return np.array([[assignment_distance(x, y) for y in b] for x in a])
    if kind in ("lex", "hilbert"):
        both = np.asarray(_canonical_form(jnp.asarray(np.concatenate([a, b])), kind, bits))
        a, b = both[: len(a)], both[len(a) :]  # one shape, one compilation
    rows = [
        np.asarray(_mean_point_distance(jnp.asarray(a[i : i + chunk]), jnp.asarray(b)))
        for i in range(0, len(a), chunk)
    ]
    return np.concatenate(rows, axis=0)


def covering_proxy(
    test_x,
    test_y,
    train_x,
    train_y,
    kind: str,
    *,
    reduce: Literal["mean", "max"] = "mean",
    bits: int = 12,
) -> float:
    """Class-restricted nearest-training-cloud distance, reduced over test clouds (see module doc).

    Raises if a test class has no training cloud (the minimum would be undefined).
    """
    test_y, train_y = np.asarray(test_y), np.asarray(train_y)
    if reduce not in ("mean", "max"):
        raise ValueError(f"reduce {reduce!r}: expected 'mean' or 'max'")
    missing = sorted(set(test_y.tolist()) - set(train_y.tolist()))
    if missing:
        raise ValueError(f"test classes {missing} have no training cloud")
    dist = pairwise_distances(test_x, train_x, kind, bits=bits)
    same = test_y[:, None] == train_y[None, :]
    nearest = np.where(same, dist, np.inf).min(axis=1)
    return float(nearest.mean() if reduce == "mean" else nearest.max())


def fit_exponent(eps, values) -> float:
    """Least-squares slope of ``log(values)`` against ``log(eps)`` (positive entries only)."""
    eps, values = np.asarray(eps, float), np.asarray(values, float)
    keep = (eps > 0) & (values > 0)
    if keep.sum() < 2:
        raise ValueError("fit_exponent: need at least two positive (eps, value) pairs")
    return float(np.polyfit(np.log(eps[keep]), np.log(values[keep]), 1)[0])
