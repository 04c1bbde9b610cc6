"""Small statistics shared by the experiments: t-intervals over replications and the smallest
effect a design can detect.

The unit of replication is the caller's choice (a data seed, a denoiser); each value passed here
is one replication's summary (e.g. a per-data-seed average over model seeds), so the interval
does not treat correlated runs as independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["mean_ci", "min_detectable_effect", "ols_slope", "put_mean_ci"]


def _t_quantile(q: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(q, dof))


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t interval ``(mean, lo, hi)`` over independent replications.

    One value gives ``(v, nan, nan)``; non-finite values are refused (a NaN replication is a
    failure to report, not a number to average)."""
    v = np.asarray(values, float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values of shape {v.shape}: expected a non-empty 1-D sequence")
    if not np.isfinite(v).all():
        raise ValueError(f"values {v.tolist()}: expected finite numbers")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level {level!r}: expected a probability in (0, 1)")
    m = float(v.mean())
    if v.size < 2:
        return m, math.nan, math.nan
    half = _t_quantile((1 + level) / 2, v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return m, m - half, m + half


def put_mean_ci(headline: dict, key: str, values: Sequence[float]) -> None:
    """``headline[key]`` = the mean of ``values`` and, with two or more, ``key/lo`` and
    ``key/hi`` = its 95 % :func:`mean_ci` interval (nothing is added for an empty list)."""
    vals = [float(v) for v in values]
    if not vals:
        return
    m, lo, hi = mean_ci(vals)
    headline[key] = m
    if len(vals) > 1:
        headline[f"{key}/lo"], headline[f"{key}/hi"] = lo, hi


def min_detectable_effect(sd: float, n: int, *, level: float = 0.95, power: float = 0.8) -> float:
    """Smallest true mean a two-sided one-sample t-test over ``n`` replications with standard
    deviation ``sd`` detects with probability ``power`` (normal approximation of the noncentral
    t: ``(t_{1-a/2} + t_{power}) sd / sqrt(n)`` with ``n - 1`` degrees of freedom)."""
    if n < 2:
        return math.nan
    dof = n - 1
    return (_t_quantile((1 + level) / 2, dof) + _t_quantile(power, dof)) * sd / math.sqrt(n)


def ols_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` on ``xs`` (nan with fewer than two distinct ``xs``)."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"xs {x.shape}, ys {y.shape}: expected two 1-D sequences of one length")
    if np.unique(x).size < 2:
        return math.nan
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())
