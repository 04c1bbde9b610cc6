"""Direct Hoelder measurement of the curves: pair sampling, exponents, the Morton worst case."""

import numpy as np
import pytest

from geomopt.canon import words_to_int
from geomopt.canon._holder import curve_modulus, default_bits, fit_holder, sample_pairs


@pytest.mark.parametrize("kind", ["random", "straddle"])
def test_pairs_have_the_requested_gap_and_stay_in_range(kind):
    d, bits, e = 3, 12, 9  # 36-bit indices: two words
    rng = np.random.default_rng(0)
    t, s = sample_pairs(d, bits, e, 400, kind, rng)
    ti = np.array([int(v) for v in words_to_int(t.astype(np.uint32))], dtype=object)
    si = np.array([int(v) for v in words_to_int(s.astype(np.uint32))], dtype=object)
    gap = si - ti
    assert min(gap) >= 2 ** (e - 1) and max(gap) <= 2**e
    assert min(ti) >= 0 and max(si) < 2 ** (d * bits)
    if kind == "straddle":  # every pair crosses a multiple of 2**e
        assert all(a // 2**e != b // 2**e for a, b in zip(ti, si, strict=True))


def test_sample_pairs_rejects_bad_scale():
    with pytest.raises(ValueError, match="scale exponent"):
        sample_pairs(2, 4, 8, 4, "random", np.random.default_rng(0))
    with pytest.raises(ValueError, match="kind"):
        sample_pairs(2, 4, 3, 4, "grid", np.random.default_rng(0))


@pytest.mark.parametrize("d", [2, 3])
def test_hilbert_is_holder_one_over_d_and_morton_is_not(d):
    bits = default_bits(d, 36)
    hil = curve_modulus("hilbert", d, bits, n_pairs=64)
    mor = curve_modulus("morton", d, bits, n_pairs=64)
    assert hil["exponent"] == pytest.approx(1 / d, abs=0.05)
    assert hil["exponent_median"] == pytest.approx(1 / d, abs=0.06)
    # Morton: typical pairs scale like the Hilbert curve, the worst case does not shrink at all
    assert mor["exponent_median"] == pytest.approx(1 / d, abs=0.1)
    assert abs(mor["exponent"]) < 0.05
    assert min(r["sup"] for r in mor["rows"]) > 0.5 * np.sqrt(d - 1)
    assert mor["constant"] > 20 * hil["constant"]


def test_fit_holder_and_errors():
    assert fit_holder([1e-4, 1e-2, 1.0], [1e-2, 1e-1, 1.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="two positive"):
        fit_holder([1.0], [1.0])
    with pytest.raises(ValueError, match="curve"):
        curve_modulus("peano", 2, 4)
