"""How ``gfm.solve`` calls its compiled solver: the per-configuration cache of jitted functions
(array leaves of score / metric modules traced, everything else part of the key), host-side
input checks, dtypes and the returned types."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import i0e, i1e

from geomopt import gfm

TRACES = []


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def circle_score(x, sigma=0.1):
    """Exact score of the unit circle smoothed by N(0, sigma^2 I) (see test_gfm_solve)."""
    r = jnp.sqrt(x @ x)
    z = r / sigma**2
    return x / sigma**2 * (i1e(z) / i0e(z) / r - 1.0)


class CircleScore(eqx.Module):
    """sigma is an array leaf (traced); ``scale`` a static field (part of the compiled code)."""

    sigma: jax.Array
    scale: float = eqx.field(static=True, default=1.0)

    def __call__(self, x):
        TRACES.append(1)  # runs only while tracing
        return self.scale * circle_score(x, self.sigma)


class Unhashable:
    """A non-array leaf that cannot be hashed (so it cannot be part of a cache key)."""

    __hash__ = None

    def __init__(self, scale):
        self.scale = scale

    def __eq__(self, other):
        return isinstance(other, Unhashable) and other.scale == self.scale


class UnhashableScore(eqx.Module):
    factor: Unhashable

    def __call__(self, x):
        TRACES.append(1)
        return self.factor.scale * circle_score(x)


X0, X1 = np.array([1.0, 0.0]), np.array([0.0, 1.0])  # float64 under the x64 fixture
# Adam with a few iterations: the cheapest method to compile, and deterministic, so paths from
# two solves can be compared exactly; what is tested here does not depend on the method.
KW = dict(lam=1.0, n_points=12, method="adam", max_iters=30)


def test_module_array_leaves_are_traced_not_baked():
    TRACES.clear()
    p1, r1 = gfm.solve(X0, X1, score=CircleScore(jnp.asarray(0.1)), **KW)
    n = len(TRACES)
    assert n > 0
    # A new module with a new sigma array: same compiled function, new value used.
    p2, r2 = gfm.solve(X0, X1, score=CircleScore(jnp.asarray(0.2)), **KW)
    assert len(TRACES) == n, "a new sigma array recompiled"
    assert float(jnp.max(jnp.abs(p1 - p2))) > 1e-3
    ref, _ = gfm.solve(X0, X1, score=lambda x: circle_score(x, 0.2), **KW)
    np.testing.assert_allclose(p2, ref, atol=1e-10)


def test_static_fields_are_part_of_the_cache_key():
    p1, _ = gfm.solve(X0, X1, score=CircleScore(jnp.asarray(0.1), scale=1.0), **KW)
    p2, _ = gfm.solve(X0, X1, score=CircleScore(jnp.asarray(0.1), scale=2.0), **KW)
    ref, _ = gfm.solve(X0, X1, score=lambda x: 2.0 * circle_score(x), **KW)
    np.testing.assert_allclose(p2, ref, atol=1e-10)
    assert float(jnp.max(jnp.abs(p1 - p2))) > 1e-3


def test_plain_functions_are_keyed_by_identity():
    def weak(x):
        TRACES.append(1)
        return 0.5 * circle_score(x)

    def strong(x):
        return 2.0 * circle_score(x)

    TRACES.clear()
    pw, _ = gfm.solve(X0, X1, score=weak, **KW)
    n = len(TRACES)
    ps, _ = gfm.solve(X0, X1, score=strong, **KW)
    assert float(jnp.max(jnp.abs(pw - ps))) > 1e-3
    pw2, _ = gfm.solve(X0, X1, score=weak, **(KW | dict(lam=0.7, tol=1e-6, max_iters=50)))
    assert len(TRACES) == n, "changing lam / tol / max_iters recompiled"
    assert not np.allclose(pw, pw2)


def test_unhashable_static_leaf_falls_back_to_object_identity():
    score = UnhashableScore(Unhashable(2.0))
    TRACES.clear()
    p, rep = gfm.solve(X0, X1, score=score, **KW)
    n = len(TRACES)
    p_again, _ = gfm.solve(X0, X1, score=score, **KW)
    assert len(TRACES) == n
    ref, _ = gfm.solve(X0, X1, score=lambda x: 2.0 * circle_score(x), **KW)
    np.testing.assert_allclose(p, ref, atol=1e-10)
    np.testing.assert_array_equal(p, p_again)
    # A different object with other contents is not served by the first one's compiled code.
    p3, _ = gfm.solve(X0, X1, score=UnhashableScore(Unhashable(0.5)), **KW)
    ref3, _ = gfm.solve(X0, X1, score=lambda x: 0.5 * circle_score(x), **KW)
    np.testing.assert_allclose(p3, ref3, atol=1e-10)


def test_adam_hyperparameters_do_not_recompile():
    score = CircleScore(jnp.asarray(0.1))
    kw = dict(score=score, lam=1.0, n_points=8, method="adam")
    TRACES.clear()
    _, r1 = gfm.solve(X0, X1, max_iters=20, **kw)
    n = len(TRACES)
    _, r2 = gfm.solve(X0, X1, max_iters=30, lr=0.01, clip=1.0, tol=1e-3, **kw)
    assert len(TRACES) == n
    assert r1.iterations == 20 and r2.iterations == 30


def test_init_is_checked_on_the_host_and_used():
    line = gfm.straight_line(X0, X1, 12)
    with pytest.raises(ValueError, match="init's endpoints differ"):
        gfm.solve(X0, X1, init=line.at[0].add(0.1), **KW)
    with pytest.raises(ValueError, match="init has non-finite"):
        gfm.solve(X0, X1, init=line.at[3, 1].set(jnp.nan), **KW)
    p_line, _ = gfm.solve(X0, X1, score=circle_score, init=np.asarray(line), **KW)
    p_default, _ = gfm.solve(X0, X1, score=circle_score, **KW)
    np.testing.assert_allclose(p_line, p_default, atol=1e-12)
    # A batch with an init per pair: pair 1 starts off the line, and solves as it would alone.
    bump = jnp.sin(jnp.linspace(0, np.pi, 12))[:, None] * jnp.array([[0.3, 0.3]])
    paths, _ = gfm.solve(
        np.stack([X0, X0]), np.stack([X1, X1]), score=circle_score,
        init=jnp.stack([line, line + bump]), **KW,
    )  # fmt: skip
    one, _ = gfm.solve(X0, X1, score=circle_score, init=line + bump, **KW)
    np.testing.assert_allclose(paths[0], p_default, atol=1e-12)
    np.testing.assert_allclose(paths[1], one, atol=1e-12)
    assert float(jnp.max(jnp.abs(paths[1] - paths[0]))) > 1e-3


def test_dtypes_and_types_follow_jax():
    path, rep = gfm.solve([1, 0], [0, 1], score=circle_score, **KW)  # ints -> default float
    assert isinstance(path, jax.Array) and path.dtype == jnp.float64
    assert isinstance(rep.residual, np.floating) and isinstance(rep.iterations, np.integer)
    p32, rep32 = gfm.solve(
        X0.astype(np.float32), jnp.asarray(X1, jnp.float32), score=circle_score, **KW
    )
    assert p32.dtype == jnp.float32 and np.isfinite(rep32.residual)
    np.testing.assert_allclose(p32, path, atol=1e-4)
    paths, reps = gfm.solve(np.stack([X0, X1]), np.stack([X1, X0]), score=circle_score, **KW)
    assert paths.shape == (2, 12, 2) and reps.converged.shape == (2,)
    np.testing.assert_allclose(paths[0], path, atol=1e-12)
    np.testing.assert_allclose(paths[1], path[::-1], atol=1e-8)  # the reversed pair


def test_non_finite_endpoint_is_named():
    with pytest.raises(ValueError, match="x1 has non-finite entries"):
        gfm.solve(X0, np.array([np.inf, 0.0]))
    with pytest.raises(ValueError, match="x0 has non-finite"):
        gfm.solve(np.array([[0.0, 0.0], [np.nan, 1.0]]), np.zeros((2, 2)))


def test_bad_score_on_the_initial_path_is_named_at_interior_and_endpoints():
    # Interior: pair 1's straight line passes the origin (waypoint 2 of 5), where the circle
    # score divides by |x| = 0.
    x0 = np.array([[1.0, 0.0], [-1.0, 0.0]])
    x1 = np.array([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="score is not finite at pair 1, waypoint 2"):
        gfm.solve(x0, x1, score=circle_score, **(KW | dict(n_points=5)))

    # Endpoint: the residual never evaluates the score there, but the check still names it.
    def score(x):
        return jnp.where(x[1] < -0.9, jnp.nan, 1.0) * circle_score(x)

    with pytest.raises(ValueError, match="score is not finite at the endpoint x1;"):
        gfm.solve(X0, np.array([0.0, -1.0]), score=score, **(KW | dict(n_points=5)))


@pytest.mark.parametrize("method", ["lm", "action", "adam"])
def test_a_score_that_is_not_finite_at_an_endpoint_is_named_as_that_endpoint(method):
    def score(x):  # NaN only at (0, -1): an endpoint, never an interior waypoint
        return jnp.where(x[1] < -0.99, jnp.nan, 1.0) * circle_score(x)

    kw = dict(score=score, n_points=5, method=method, max_iters=3)
    end = np.array([0.0, -1.0])
    with pytest.raises(ValueError, match="score is not finite at the endpoint x0;"):
        gfm.solve(end, X0, **kw)
    with pytest.raises(ValueError, match="score is not finite at the endpoint x1;"):
        gfm.solve(X0, end, **kw)
    x0 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    x1 = np.stack([x0[1], x0[2], end])
    with pytest.raises(ValueError, match="score is not finite at the endpoint x1 of pair 2;"):
        gfm.solve(x0, x1, **kw)
    with pytest.raises(ValueError, match="score is not finite at the endpoint x0 of pair 2;"):
        gfm.solve(x1, x0, **kw)


def test_a_score_that_is_not_finite_at_an_endpoint_is_named_by_the_matrix_free_backend():
    def score(x):
        return jnp.where(x[0] < -0.5, jnp.nan, 1.0) * -x

    x0, x1 = np.ones(4), -np.ones(4)
    with pytest.raises(ValueError, match="score is not finite at the endpoint x1;"):
        gfm.solve(x0, x1, score=score, n_points=5, backend="matrix_free", max_iters=2)
    with pytest.raises(ValueError, match="score is not finite at the endpoint x0 of pair 1;"):
        gfm.solve(np.stack([x0, x1]), np.stack([x0, x0]), score=score, n_points=5,
                  backend="matrix_free", max_iters=2)  # fmt: skip


def test_default_method_is_the_most_robust_one_for_the_problem():
    from geomopt.gfm._gfm import MATRIX_FREE_MIN_D, resolve_method

    assert resolve_method("auto", "euclidean", 3) == "action"
    assert resolve_method("auto", "metric", 3) == "action"
    assert resolve_method("auto", "metric", MATRIX_FREE_MIN_D) == "action"  # no matrix-free G
    assert resolve_method("auto", "hypersphere", 3) == "lm"
    assert resolve_method("auto", "euclidean", MATRIX_FREE_MIN_D) == "matrix_free"
    assert resolve_method("auto", "hypersphere", MATRIX_FREE_MIN_D) == "matrix_free"
    assert resolve_method("auto", "euclidean", MATRIX_FREE_MIN_D, "banded") == "action"
    assert resolve_method("lm", "euclidean", 3) == "lm"

    x0, x1 = np.array([1.0, 0.2]), np.array([-0.3, 1.0])
    kw = dict(score=circle_score, n_points=8)
    _, rep = gfm.solve(x0, x1, **kw)
    assert rep.method == "action" and rep.converged
    metric = gfm.Conformal(lambda x: 1.0 + 0.1 * x @ x)
    _, rep = gfm.solve(x0, x1, metric=metric, **kw)
    assert rep.method == "action" and rep.converged
    _, rep = gfm.solve(x0, x1, residual="hypersphere", **kw)
    assert rep.method == "lm"
    d = MATRIX_FREE_MIN_D
    _, rep = gfm.solve(np.ones(d), -np.ones(d) + 0.1, n_points=5, residual="hypersphere")
    assert rep.method == "matrix_free" and rep.converged
    with pytest.raises(ValueError, match="method 'newton'"):
        gfm.solve(x0, x1, method="newton")


def test_a_solver_object_is_the_keyword_spelling_with_its_options():
    x0, x1 = np.array([1.0, 0.2]), np.array([-0.3, 1.0])
    kw = dict(score=circle_score, n_points=8)
    pairs = [
        (gfm.LM(geodesic=False), dict(method="lm", lm_options={"geodesic": False})),
        (gfm.Action(), dict()),
        (gfm.Adam(lr=1e-2, clip=5.0), dict(method="adam", lr=1e-2, clip=5.0)),
        (gfm.GaussNewton(), dict(method="gauss_newton")),
    ]
    for solver, keywords in pairs:
        p_obj, r_obj = gfm.solve(x0, x1, solver=solver, max_iters=60, **kw)
        p_kw, r_kw = gfm.solve(x0, x1, max_iters=60, **keywords, **kw)
        assert r_obj.method == r_kw.method == solver.name
        assert int(r_obj.iterations) == int(r_kw.iterations)
        np.testing.assert_array_equal(np.asarray(p_obj), np.asarray(p_kw))
    # the default max_iters is the solver's
    _, rep = gfm.solve(x0, x1, solver=gfm.Adam(lr=1e-9), tol=1e-12, **kw)
    assert int(rep.iterations) == gfm.Adam.max_iters


def test_a_solver_that_does_not_apply_is_refused_in_one_line():
    x0, x1 = np.array([1.0, 0.2]), np.array([-0.3, 1.0])
    with pytest.raises(ValueError, match="method='action' with residual 'hypersphere'"):
        gfm.solve(x0, x1, solver=gfm.Action(), residual="hypersphere")
    with pytest.raises(ValueError, match="backend='matrix_free' with residual 'metric'"):
        gfm.solve(x0, x1, solver=gfm.MatrixFree(), metric=gfm.Conformal(lambda x: 1.0 + x @ x))
    with pytest.raises(TypeError, match="solver 'lm': expected gfm.LM"):
        gfm.solve(x0, x1, solver="lm")
    assert gfm.as_solver("auto", backend="banded").matrix_free is None


def test_minimise_path_runs_a_solver_object_like_its_method_name():
    """``gfm.minimise_path(..., solver=...)``, the front of the baselines' energies, is its
    ``method=`` spelling; the action descent needs GFM's score and ``lam`` and is refused."""
    dt = 1.0 / 7

    def local(a, b, c):
        return (a - 2 * b + c) / dt**2 + circle_score(b)

    path0 = gfm.straight_line(jnp.array([1.0, 0.2]), jnp.array([-0.3, 1.0]), 8)
    kw = dict(window=3, tol=1e-10, gtol=0.0, max_iters=40)
    pairs = [
        (gfm.LM(damping=1e-2), dict(method="lm", lm_options={"damping": 1e-2})),
        (gfm.GaussNewton(), dict(method="gauss_newton")),
        (gfm.Adam(lr=1e-2, eps=1e-5), dict(method="adam", lr=1e-2, eps=1e-5)),
    ]
    for solver, keywords in pairs:
        p_obj, res_obj, it_obj, code_obj = gfm.minimise_path(path0, local, solver=solver, **kw)
        p_kw, res_kw, it_kw, code_kw = gfm.minimise_path(path0, local, **keywords, **kw)
        np.testing.assert_array_equal(np.asarray(p_obj), np.asarray(p_kw))
        assert int(it_obj) == int(it_kw) > 0 and int(code_obj) == int(code_kw)
        assert float(res_obj) == float(res_kw)
    with pytest.raises(ValueError, match="gfm.Action needs the GFM problem's score and lam"):
        gfm.minimise_path(path0, local, solver=gfm.Action(), **kw)
    with pytest.raises(ValueError, match="method 'action': expected one of"):
        gfm.minimise_path(path0, local, method="action", **kw)


def test_a_banded_solver_of_ones_own_runs_through_the_front():
    """The solver interface is open: a user's :class:`gfm.solvers.BandedSolver` (here a
    composite, two Gauss-Newton passes and then LM from where they stopped) runs in
    ``gfm.solve`` like the shipped ones, batched too, under its own name and ``max_iters``."""
    import dataclasses
    from typing import ClassVar

    from geomopt.gfm.solvers import BandedSolver

    @dataclasses.dataclass(frozen=True)
    class TwoStage(BandedSolver):
        name: ClassVar[str] = "two_stage"
        max_iters: ClassVar[int] = 30

        def minimise(self, path0, problem, *, tol, gtol, max_iters, branches=True,
                     batch_axis=None):  # fmt: skip
            kw = dict(tol=tol, gtol=gtol, branches=branches, batch_axis=batch_axis)
            p, _, it1, _, _ = gfm.GaussNewton().minimise(path0, problem, max_iters=2, **kw)
            out = gfm.LM().minimise(p, problem, max_iters=max_iters - it1, **kw)
            return (out[0], out[1], out[2] + it1, *out[3:])

    x0, x1 = np.array([1.0, 0.2]), np.array([-0.3, 1.0])
    kw = dict(score=circle_score, n_points=8, tol=1e-9)
    path, rep = gfm.solve(x0, x1, solver=TwoStage(), **kw)
    ref, ref_rep = gfm.solve(x0, x1, solver=gfm.LM(), **kw)
    assert rep.method == "two_stage" and rep.converged and ref_rep.converged
    assert 2 <= int(rep.iterations) <= TwoStage.max_iters
    np.testing.assert_allclose(np.asarray(path), np.asarray(ref), atol=1e-6)
    paths, reps = gfm.solve(np.stack([x0, x1]), np.stack([x1, x0]), solver=TwoStage(), **kw)
    assert reps.converged.all()
    np.testing.assert_allclose(np.asarray(paths[0]), np.asarray(path), atol=1e-9)
