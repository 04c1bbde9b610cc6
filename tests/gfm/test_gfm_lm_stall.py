"""A pair on which plain Levenberg-Marquardt crawls: the torus tube potential's force jumps
across the torus's medial axis (its core circle, which this pair's straight line runs through),
and plain LM creeps linearly towards a local minimum of the residual and is stopped as stalled
(code 3 / 7); with geodesic acceleration (the default) LM converges."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm._potentials import TubePotential
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


# Plain LM with the small initial damping (1e-6 max diag J^T J) at which this pair crawls; from
# the default 1e-3 plain LM converges on it too.
PLAIN = dict(method="lm", lm_options=dict(geodesic=False, damping=1e-6))


def test_geodesic_acceleration_converges_where_plain_lm_crawls(score):
    path, rep = gfm.solve(X0, X1, score=score, n_points=32, method="lm")
    assert rep.status == "converged" and rep.iterations < 40, rep.reason
    assert bool(jnp.all(jnp.isfinite(path)))
    # Plain LM crawls towards a local minimum of the residual and is stopped as stalled.
    _, plain = gfm.solve(X0, X1, score=score, n_points=32, **PLAIN)
    assert plain.code in (3, 7) and not plain.converged, plain.reason
    assert plain.status == "stalled" and plain.reason.startswith("stalled")
    assert plain.residual > 1e3 * rep.residual
    # The "too slow" rule is judged in the second half of the budget: 5 iterations end there.
    _, short = gfm.solve(X0, X1, score=score, n_points=32, max_iters=5, **PLAIN)
    assert short.code == 1 and short.iterations == 5 and short.status == "max_iters"


def test_a_loose_tol_on_the_same_pair_converges(score):
    _, rep = gfm.solve(X0, X1, score=score, n_points=32, tol=2.5, **PLAIN)
    assert rep.converged and rep.residual <= 2.5, rep.reason


def test_batch_codes_match_single_solves(score):
    # One crawling pair in a batch stops with its own code; the others converge as alone.
    y0 = np.stack([X0, X0 * np.array([1.0, 1.0, -1.0])])
    y1 = np.stack([X1, X0 * np.array([-1.0, 1.0, -1.0])])
    paths, rep = gfm.solve(y0, y1, score=score, n_points=32, **PLAIN)
    for i in range(2):
        p, r = gfm.solve(y0[i], y1[i], score=score, n_points=32, **PLAIN)
        assert rep.code[i] == r.code and rep.iterations[i] == r.iterations
        np.testing.assert_allclose(paths[i], p, atol=1e-9)
    assert list(rep.status) == ["stalled", "converged"], rep.reason
