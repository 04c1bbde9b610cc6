"""Levenberg-Marquardt's "too slow to finish" stop (code 7) on a pair where the residual has no
zero: the torus tube potential's force jumps across the torus's medial axis (its core circle,
which this pair's path runs through), and LM crawls linearly towards a local minimum of the
residual instead of converging."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm.experiments import TubePotential
from geomopt.manifolds import get_manifold

# A pair of torus surface points (from the GFM benchmark's 32-waypoint batch) whose path crosses
# the tube: before code 7 LM took 55 iterations to give up on it (code 3).
X0 = np.array([1.4210001973926878, -0.7266744609891892, -0.056247836250762934])
X1 = np.array([-0.30791323937848697, 1.2256970987727527, 0.3948821432733984])


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def score():
    return gfm.ScoreAt(TubePotential(get_manifold("torus")), 0.1)


def test_crawling_pair_stops_early_and_reports_it(score):
    path, rep = gfm.solve(X0, X1, score=score, n_points=32)
    assert rep.code in (3, 7) and not rep.converged, rep.reason
    assert rep.status == "stalled" and rep.reason.startswith("stalled")
    assert rep.iterations < 200
    assert bool(jnp.all(jnp.isfinite(path)))
    # Not a premature stop: 25x the budget does not get the residual anywhere near tol.
    _, long = gfm.solve(X0, X1, score=score, n_points=32, max_iters=5000)
    assert not long.converged and long.residual > 0.9 * rep.residual
    # The rule is judged in the second half of the budget: a tiny budget ends at max_iters.
    _, short = gfm.solve(X0, X1, score=score, n_points=32, max_iters=5)
    assert short.code == 1 and short.iterations == 5 and short.status == "max_iters"


def test_a_loose_tol_on_the_same_pair_converges(score):
    # Code 7 compares the rate with the tolerance: a reachable tol is reached, not given up on.
    _, rep = gfm.solve(X0, X1, score=score, n_points=32, tol=2.5)
    assert rep.converged and rep.residual <= 2.5, rep.reason


def test_batch_codes_match_single_solves(score):
    # One crawling pair in a batch stops with its own code; the others converge as alone.
    y0 = np.stack([X0, X0 * np.array([1.0, 1.0, -1.0])])
    y1 = np.stack([X1, X0 * np.array([-1.0, 1.0, -1.0])])
    paths, rep = gfm.solve(y0, y1, score=score, n_points=32)
    for i in range(2):
        p, r = gfm.solve(y0[i], y1[i], score=score, n_points=32)
        assert rep.code[i] == r.code and rep.iterations[i] == r.iterations
        np.testing.assert_allclose(paths[i], p, atol=1e-9)
    assert list(rep.status) == ["stalled", "converged"], rep.reason
