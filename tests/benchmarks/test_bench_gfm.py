"""The pure helpers of benchmarks/bench_gfm.py: the target search and the timing summaries."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).parents[2] / "benchmarks" / "bench_gfm.py"
_spec = importlib.util.spec_from_file_location("bench_gfm", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("threshold", [1e-4, 0.3, 0.77, 5.0])
def test_smallest_reached_brackets_the_threshold_from_above(threshold):
    calls = []

    def reached(t):
        calls.append(t)
        return t >= threshold

    hi = bench.smallest_reached(reached, hi=5.0, rel=1e-3)
    assert threshold <= hi <= threshold * (1 + 1e-3)
    assert reached(hi)
    assert len(calls) < 60


def test_spread_and_paired_ratio_per_clock():
    adam = np.array([[10.0, 20.0], [30.0, 60.0], [20.0, 40.0]])  # rounds x (wall, cpu)
    ours = np.array([[1.0, 1.0], [1.0, 2.0], [4.0, 4.0]])
    s = bench.spread(adam)
    assert s["wall"] == dict(median=20.0, min=10.0, max=30.0)
    assert s["cpu"] == dict(median=40.0, min=20.0, max=60.0)
    # Median of the per-round ratios (10, 30, 5 on the wall clock), not a ratio of medians.
    assert bench.paired_ratio(adam, ours) == dict(wall=10.0, cpu=20.0)
