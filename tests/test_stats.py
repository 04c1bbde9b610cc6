"""``geomopt.stats``: t-intervals over replications, the smallest detectable effect, slopes."""

import math

import numpy as np
import pytest

from geomopt.stats import mean_ci, min_detectable_effect, ols_slope


def test_mean_ci_is_the_student_t_interval():
    m, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764451051977987 * np.std([1, 2, 3, 4, 5], ddof=1) / math.sqrt(5)  # t(0.975, 4)
    assert m == 3.0 and lo == pytest.approx(3.0 - half) and hi == pytest.approx(3.0 + half)
    m, lo, hi = mean_ci([0.5])
    assert m == 0.5 and math.isnan(lo) and math.isnan(hi)


def test_mean_ci_refuses_bad_values():
    with pytest.raises(ValueError, match="expected finite numbers"):
        mean_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        mean_ci([])
    with pytest.raises(ValueError, match="level 1.5"):
        mean_ci([1.0, 2.0], level=1.5)


def test_min_detectable_effect_grows_with_spread_and_shrinks_with_n():
    base = min_detectable_effect(1.0, 5)
    assert base == pytest.approx((2.7764451 + 0.9409646) / math.sqrt(5), rel=1e-6)
    assert min_detectable_effect(2.0, 5) == pytest.approx(2 * base)
    assert min_detectable_effect(1.0, 20) < base / 2
    assert math.isnan(min_detectable_effect(1.0, 1))


def test_ols_slope():
    assert ols_slope([2, 4, 8], [1.0, 2.0, 4.0]) == pytest.approx(0.5)
    assert math.isnan(ols_slope([3, 3], [1.0, 2.0]))
    with pytest.raises(ValueError, match="one length"):
        ols_slope([1, 2], [1.0])


def test_put_mean_ci_adds_the_interval_only_with_replications():
    from geomopt.stats import mean_ci, put_mean_ci

    h: dict = {}
    put_mean_ci(h, "a", [1.0, 2.0, 4.0])
    m, lo, hi = mean_ci([1.0, 2.0, 4.0])
    assert h == {"a": m, "a/lo": lo, "a/hi": hi}
    put_mean_ci(h, "b", [3.0])
    put_mean_ci(h, "c", [])
    assert h["b"] == 3.0 and "b/lo" not in h and "c" not in h
