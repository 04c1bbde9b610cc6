"""Schedules: known values at start, end of warmup and end; jittable with a traced peak."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.optim import cosine_schedule, one_cycle_schedule, wsd_schedule


def test_one_cycle_known_values():
    s = one_cycle_schedule(2.0, 1000, warmup_frac=0.1, div=100.0)
    np.testing.assert_allclose(s(0), 0.02, rtol=1e-6)
    np.testing.assert_allclose(s(50), 0.5 * (2.0 + 0.02), rtol=1e-6)  # cosine midpoint
    np.testing.assert_allclose(s(100), 2.0, rtol=1e-6)
    np.testing.assert_allclose(s(550), 0.5 * (2.0 + 0.02), rtol=1e-5)
    np.testing.assert_allclose(s(1000), 0.02, rtol=1e-5)
    np.testing.assert_allclose(s(5000), 0.02, rtol=1e-5)
    lrs = np.array([float(s(t)) for t in range(0, 1001, 10)])
    assert lrs.argmax() == 10


def test_wsd_known_values():
    s = wsd_schedule(1.0, 100, warmup_steps=10, decay_frac=0.2, final_frac=0.1)
    got = [float(s(t)) for t in (0, 5, 10, 50, 80, 90, 100, 150)]
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0, 1.0, 1.0, 0.55, 0.1, 0.1], rtol=1e-6)


def test_cosine_known_values():
    s = cosine_schedule(3.0, 110, warmup_steps=10, final_frac=0.0)
    got = [float(s(t)) for t in (0, 5, 10, 60, 110)]
    np.testing.assert_allclose(got, [0.0, 1.5, 3.0, 1.5, 0.0], atol=1e-6)


def test_schedules_jit_with_traced_peak():
    @jax.jit
    def lr_at(peak, t):
        return one_cycle_schedule(peak, 100)(t) + wsd_schedule(peak, 100, 10, 0.1)(t)

    np.testing.assert_allclose(lr_at(jnp.float32(2.0), 10), 4.0, rtol=1e-6)
    np.testing.assert_allclose(lr_at(jnp.float32(1.0), 10), 2.0, rtol=1e-6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: one_cycle_schedule(-1.0, 10), r"peak_lr=-1\.0: expected a finite"),
        (lambda: one_cycle_schedule(float("nan"), 10), r"peak_lr=nan: expected a finite"),
        (lambda: one_cycle_schedule(1.0, 0), r"total_steps=0: expected an int >= 1"),
        (lambda: one_cycle_schedule(1.0, 10, warmup_frac=1.5), r"warmup_frac=1\.5"),
        (lambda: wsd_schedule(1.0, 10, warmup_steps=8, decay_frac=0.5),
         r"warmup_steps=8 \+ decay_frac\*total_steps=5 exceed total_steps=10"),
        (lambda: cosine_schedule(1.0, 10, warmup_steps=11), r"warmup_steps=11: .* \[0, 10\]"),
    ],
)  # fmt: skip
def test_schedules_bad_input_names_the_value(make, match):
    with pytest.raises(ValueError, match=match):
        make()
