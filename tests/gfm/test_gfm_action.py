"""``gfm.solve(method="action")``: trust-region descent of the path action, then LM."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm._potentials import TubePotential
from geomopt.gfm.solvers._action import _block_cholesky_solve, score_work
from geomopt.gfm.solvers._banded import block_tridiagonal_to_dense
from geomopt.manifolds import get_manifold


def _tridiag(n, d, shift, seed=0):
    rng = np.random.default_rng(seed)
    diag = rng.normal(size=(n, d, d))
    diag = diag @ np.swapaxes(diag, 1, 2) + shift * np.eye(d)
    off = rng.normal(size=(n - 1, d, d))
    return diag, off


def test_block_cholesky_solves_spd_and_flags_indefinite():
    n, d = 7, 3
    diag, off = _tridiag(n, d, shift=8.0)
    dense = block_tridiagonal_to_dense(np.swapaxes(off, 1, 2), diag, off)
    assert np.all(np.linalg.eigvalsh(dense) > 0)
    rhs = np.random.default_rng(1).normal(size=(n, d))
    with jax.enable_x64(True):
        x, ok = _block_cholesky_solve(jnp.asarray(diag), jnp.asarray(off), jnp.asarray(rhs))
        assert bool(ok)
        want = np.linalg.solve(dense, rhs.ravel())
        np.testing.assert_allclose(np.asarray(x).ravel(), want, rtol=1e-9)
        # the same matrix shifted down until it is indefinite: the factorisation must say so
        lam_min = np.linalg.eigvalsh(dense)[0]
        shifted = diag - (lam_min + 0.5) * np.eye(d)
        _, ok = _block_cholesky_solve(jnp.asarray(shifted), jnp.asarray(off), jnp.asarray(rhs))
        assert not bool(ok)


def test_action_matches_lm_where_the_solution_is_unique():
    """A Gaussian potential (score -x): the action is strictly convex, one EL solution."""
    x0 = np.array([[1.0, 0.5], [-0.3, 2.0]])
    x1 = np.array([[-1.0, 0.2], [1.5, -0.4]])

    def score(x):
        return -x

    with jax.enable_x64(True):
        p_lm, r_lm = gfm.solve(x0, x1, score=score, lam=3.0, n_points=15, method="lm")
        p_act, r_act = gfm.solve(x0, x1, score=score, lam=3.0, n_points=15, method="action")
    assert np.all(r_act.converged) and np.all(r_lm.converged)
    assert r_act.method == "action"
    np.testing.assert_allclose(np.asarray(p_act), np.asarray(p_lm), atol=1e-9)


@pytest.mark.parametrize("name", ["circle", pytest.param("sphere", marks=pytest.mark.slow)])
def test_action_stays_on_support_where_lm_cuts_across(name):
    """Tube potential (sigma 0.1), 8 random on-manifold pairs, chord start: LM converges on
    some pairs to the Euler-Lagrange solution through the centre (a saddle of the action, 0.745
    from the manifold), the action descent to the arc (a minimum)."""
    manifold = get_manifold(name)
    with jax.enable_x64(True):
        x0 = np.asarray(manifold.sample(jax.random.key(1), 8, noise=0.0), np.float64)
        x1 = np.asarray(manifold.sample(jax.random.key(2), 8, noise=0.0), np.float64)
        score = gfm.ScoreAt(TubePotential(manifold), 0.1)
        p_lm, r_lm = gfm.solve(x0, x1, score=score, n_points=20, method="lm")
        p_act, r_act = gfm.solve(x0, x1, score=score, n_points=20, method="action")
        d_lm = np.asarray(gfm.path_validity(p_lm, manifold=manifold)["distance_max"])
        d_act = np.asarray(gfm.path_validity(p_act, manifold=manifold)["distance_max"])
    assert np.all(r_act.converged), r_act.reason
    assert d_lm.max() > 0.5  # the problem discriminates: LM's converged paths cut across
    assert d_act.max() < 0.15, d_act


def test_action_refuses_the_hypersphere_residual():
    with pytest.raises(ValueError, match="method='action'"):
        gfm.solve(
            np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), score=lambda x: -x,
            n_points=8, method="action", residual="hypersphere",
        )  # fmt: skip


def _conformal(x):
    return (1.0 + 0.2 * jnp.sum(x**2)) * jnp.eye(2)


def _constant(x):
    return jnp.array([[2.0, 0.3], [0.3, 1.0]])


# Each case compiles an LM and an action solve of the metric residual (~15 s on 2 cores).
@pytest.mark.parametrize("metric", [_conformal, pytest.param(_constant, marks=pytest.mark.slow)])
def test_action_with_a_metric_matches_lm_on_a_convex_problem(metric):
    """Metric prior (position-dependent conformal, or constant SPD) and a Gaussian potential:
    the descent of the midpoint action plus the LM polish reaches the same solution of the
    official residual as LM alone."""
    x0 = np.array([[1.0, 0.5], [-0.3, 1.0]])
    x1 = np.array([[-1.0, 0.2], [1.0, -0.4]])
    with jax.enable_x64(True):
        kw = dict(score=lambda x: -x, metric=metric, lam=2.0, n_points=12)
        p_lm, r_lm = gfm.solve(x0, x1, method="lm", **kw)
        p_act, r_act = gfm.solve(x0, x1, method="action", **kw)
        assert np.all(r_lm.converged) and np.all(r_act.converged), r_act.reason
        np.testing.assert_allclose(np.asarray(p_act), np.asarray(p_lm), atol=1e-8)


def test_unknown_method_lists_action():
    with pytest.raises(ValueError, match="action"):
        gfm.solve(np.zeros(2), np.ones(2), score=lambda x: -x, n_points=5, method="newton")


def test_score_work_is_exact_for_a_quartic_potential():
    """The descent's line integral of the score (corrected trapezoidal rule) equals the fall of
    U along the step when U is a quartic polynomial, where the plain trapezoidal rule does not."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        d, k = 3, 5
        a, c = jnp.asarray(rng.normal(size=d)), jnp.asarray(rng.normal(size=d))
        q = jnp.asarray(rng.normal(size=(d, d)))

        def potential(x):
            return jnp.sum(a * x**4) + (x @ c) ** 3 + x @ q @ x

        score = jax.vmap(lambda x: -jax.grad(potential)(x))
        jac = jax.vmap(jax.jacfwd(lambda x: -jax.grad(potential)(x)))
        x = jnp.asarray(rng.normal(size=(k, d)))
        delta = jnp.asarray(0.7 * rng.normal(size=(k, d)))
        exact = -jnp.sum(jax.vmap(potential)(x + delta) - jax.vmap(potential)(x))
        got = score_work(delta, score(x), jac(x), score(x + delta), jac(x + delta))
        np.testing.assert_allclose(float(got), float(exact), rtol=1e-10)
        plain = 0.5 * jnp.sum((score(x) + score(x + delta)) * delta)
        assert abs(float(plain) - float(exact)) > 1e-3 * abs(float(exact))
