"""Covering-number proxies and a regularity probe for canonizations of point clouds.

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

Regularity probe: how far a canonical form moves, relative to the Wasserstein distance the points
moved, under small perturbations. For a Hoelder-``alpha`` canonization the displacement of the
canonical form scales like ``eps**alpha``; the fitted exponent of the mean displacement against
``eps`` estimates ``alpha`` (Lipschitz: 1; the paper's bound for Hilbert sorting: ``1/d``).
"""

from __future__ import annotations

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
    "regularity_probe",
    "fit_exponent",
]

Distance = Literal["l2", "lex", "hilbert", "wass"]
DISTANCES: tuple[str, ...] = ("l2", "lex", "hilbert", "wass")


def _check_clouds(x, name):
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"{name}: shape {x.shape}; expected (n_clouds, P, d)")
    if np.isnan(x).any():
        raise ValueError(f"{name}: contains NaN")
    return x


@jax.jit
def _mean_point_distance(a, b):
    """``(1/P) sum_i |a[m, i] - b[n, i]|_2`` for all pairs ``(m, n)``: shape ``(M, N)``."""
    diff = a[:, None, :, :] - b[None, :, :, :]
    return jnp.mean(jnp.sqrt(jnp.sum(diff * diff, axis=-1)), axis=-1)


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
        order = get_order(kind)
        kw = {"bits": bits} if kind == "hilbert" else {}
        a = np.asarray(canonize(a, order(jnp.asarray(a), **kw)))
        b = np.asarray(canonize(b, order(jnp.asarray(b), **kw)))
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


def regularity_probe(
    clouds,
    order: str,
    eps_values,
    *,
    n_perturb: int = 4,
    seed: int = 0,
    bits: int = 12,
) -> dict:
    """Perturbation probe of a canonization ``order`` on clouds ``(n, P, d)`` in ``[0, 1]^d``.

    For each ``eps``: ``X' = X + eps * G`` (``G`` standard normal) and

    - ``displacement``: mean over clouds of ``(1/P) sum_i |C(X)[i] - C(X')[i]|_2``,
    - ``wasserstein``: mean of the assignment distance ``W(X, X')`` (the invariant motion),
    - ``ratio``: mean of ``displacement / W`` (an empirical Lipschitz ratio; large = irregular),
    - ``changed``: fraction of perturbed clouds whose order changed as a permutation.

    ``exponent`` is :func:`fit_exponent` of displacement vs ``eps`` (Hoelder exponent estimate).
    Orders use the clouds' own normalisation; for Hilbert/Morton, ``bits`` per axis.
    """
    x = _check_clouds(clouds, "clouds").astype(np.float32)
    fn = get_order(order)
    kw = {"bits": bits} if order in ("hilbert", "morton") else {}
    base_perm = np.asarray(fn(jnp.asarray(x), **kw))
    base = np.take_along_axis(x, base_perm[..., None], axis=1)
    rng = np.random.default_rng(seed)
    rows = []
    for eps in np.asarray(eps_values, float):
        disp, wass, ratio, changed = [], [], [], []
        for _ in range(n_perturb):
            xp = (x + eps * rng.standard_normal(x.shape)).astype(np.float32)
            perm = np.asarray(fn(jnp.asarray(xp), **kw))
            moved = np.take_along_axis(xp, perm[..., None], axis=1)
            dd = np.sqrt(((moved - base) ** 2).sum(-1)).mean(-1)
            ww = np.array([assignment_distance(a, b) for a, b in zip(x, xp, strict=True)])
            disp.append(dd)
            wass.append(ww)
            ratio.append(dd / np.maximum(ww, 1e-12))
            changed.append((perm != base_perm).any(-1))
        rows.append(
            {
                "eps": float(eps),
                "displacement": float(np.mean(disp)),
                "wasserstein": float(np.mean(wass)),
                "ratio": float(np.mean(ratio)),
                "changed": float(np.mean(changed)),
            }
        )
    exponent = fit_exponent([r["eps"] for r in rows], [r["displacement"] for r in rows])
    return {"order": order, "rows": rows, "exponent": exponent}
