"""The quantitative claims of experiments/canon/README.md that are cheap to check, at the
README's own settings (``canon/curve_regularity`` quick: bits per axis min(16, 96 // d), 256
random and 256 straddling pairs per scale, seed 0)."""

import pytest

from geomopt.canon._holder import curve_modulus, default_bits


@pytest.mark.parametrize("d", [2, 3, 4, 5, 6, 7, 8])
def test_hilbert_worst_case_exponent_is_one_over_d_within_the_readme_tolerance(d):
    """README, curve regularity: "the Hilbert curve's worst-case exponent is 1/d within 0.004
    at every d, with a Hoelder constant that grows slowly (2.1 -> 3.4)", d = 2..8."""
    hil = curve_modulus("hilbert", d, default_bits(d, 96, 16), n_pairs=256, seed=0)
    assert abs(hil["exponent"] - 1 / d) <= 0.004, hil["exponent"]
    assert 2.0 <= hil["constant"] <= 3.4, hil["constant"]
