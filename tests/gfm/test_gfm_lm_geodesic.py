"""Levenberg-Marquardt's geodesic acceleration: the second directional derivative of the
residual it uses, and that the accelerated and plain LM reach the same solution."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import SmoothedCircle
from geomopt.gfm._residuals import local_residual
from geomopt.gfm.solvers._levenberg_marquardt import _second_directional


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def test_second_directional_derivative_matches_finite_differences():
    score = gfm.ScoreAt(SmoothedCircle(), 0.2)
    metric = gfm.TorusMetric(0.5, 2.0, 1.0)  # any smooth SPD metric in 3-D
    local = partial(local_residual, dt=0.25, lam=1.0, score=lambda x: score(x[:2]).sum() * x,
                    metric=metric, kind="metric")  # fmt: skip
    k = jax.random.split(jax.random.key(0), 2)
    path = jnp.array([[1.5, 0.2, 0.3], [1.0, 0.9, 0.1], [0.2, 1.4, 0.2], [-0.7, 1.1, 0.3],
                      [-1.4, 0.3, 0.2]]) + 0.01 * jax.random.normal(k[0], (5, 3))  # fmt: skip
    step = jnp.zeros((5, 3)).at[1:-1].set(jax.random.normal(k[1], (3, 3)))
    # jitted: op-by-op, the nested derivatives took ~25 s
    rvv = jax.jit(lambda p, s: _second_directional(p, s, local, 3))(path, step)

    @jax.jit
    def rows(p):
        return jax.vmap(local)(p[:-2], p[1:-1], p[2:])

    h = 1e-4
    fd = (rows(path + h * step) - 2 * rows(path) + rows(path - h * step)) / h**2
    np.testing.assert_allclose(rvv, fd, rtol=1e-5, atol=1e-5 * float(jnp.max(jnp.abs(fd))))


@pytest.fixture(scope="module")
def circle():
    """Score, endpoints, SLERP start of a 16-waypoint path on the smoothed unit circle, and the
    default solver's solution from that start (shared by the tests that vary one LM option)."""
    x0, x1 = np.array([1.0, 0.0]), np.array([-0.6, 0.8])
    with jax.enable_x64(True):  # module scope: outside the per-test x64 fixture
        score, init = gfm.ScoreAt(SmoothedCircle(), 0.1), np.asarray(gfm.slerp(x0, x1, 16))
        solved = gfm.solve(x0, x1, score=score, n_points=16, init=init, method="lm")
        return score, x0, x1, init, solved


def test_accelerated_and_plain_lm_reach_the_same_solution(circle):
    score, x0, x1, init, (p_geo, r_geo) = circle
    p_lm, r_lm = gfm.solve(x0, x1, score=score, n_points=16, init=init, method="lm",
                           lm_options=dict(geodesic=False))  # fmt: skip
    assert r_geo.status == "converged" and r_lm.status == "converged"
    np.testing.assert_allclose(p_geo, p_lm, atol=1e-7)
    with pytest.raises(ValueError, match="lm_options"):
        gfm.solve(x0, x1, score=score, n_points=16, lm_options=dict(trust_radius=1.0))


@pytest.mark.parametrize("damping", [1e-6, 1.0])
def test_initial_damping_changes_the_iterates_not_the_solution(circle, damping):
    score, x0, x1, init, (p_ref, r_ref) = circle
    p, r = gfm.solve(x0, x1, score=score, n_points=16, init=init, method="lm",
                     lm_options=dict(damping=damping))  # fmt: skip
    assert r.status == "converged" and r_ref.status == "converged"
    np.testing.assert_allclose(p, p_ref, atol=1e-7)
    # A large initial damping takes short gradient-like steps first: more iterations.
    if damping == 1.0:
        assert r.iterations > r_ref.iterations
