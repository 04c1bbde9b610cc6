"""Matrix-free solvers (``geomopt.gfm._matrix_free``): PCG, GMRES, SLERP, agreement of Newton-GMRES
and LM-PCG with the banded LM, the LM taking over from a failed Newton line search,
convergence at latent scale, O(K d) memory (no d x d array in the jaxpr), no recompilation, and
bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import GaussianMixture
from geomopt.gfm._init import slerp
from geomopt.gfm._matrix_free import (
    NewtonGMRES,
    gfm_residual,
    minimise_path_matrix_free,
    solve_matrix_free,
)
from geomopt.gfm.solvers._interface import iterate
from geomopt.gfm.solvers._krylov import gmres, pcg

TRACES = []


class CountingScore(eqx.Module):
    """Score of a Gaussian mixture at an array ``sigma``; records each trace."""

    mixture: GaussianMixture
    sigma: jax.Array

    def __call__(self, x):
        TRACES.append(1)  # runs only while tracing
        return self.mixture.score(x, self.sigma)


def mixture(d, k, std, seed=1):
    return GaussianMixture(jax.random.normal(jax.random.key(seed), (k, d)), stds=std)


def test_pcg_solves_spd_system():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(12, 12))
    spd = a @ a.T + 0.5 * np.eye(12)
    b = rng.normal(size=(12,))
    diag = np.diag(spd)
    x, k, r = pcg(
        lambda v: jnp.asarray(spd) @ v,
        jnp.asarray(b),
        lambda r: r / jnp.asarray(diag),
        rtol=1e-7,
        max_iters=100,
    )
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(spd, b), rtol=1e-3, atol=1e-4)
    assert 1 <= int(k) <= 100
    np.testing.assert_allclose(np.asarray(r), b - spd @ np.asarray(x), atol=1e-4)


def test_gmres_solves_nonsymmetric_system():
    rng = np.random.default_rng(1)
    n = 12
    a = np.eye(n) * 3.0 + rng.normal(size=(n, n))  # nonsymmetric, nonsingular
    b = rng.normal(size=(n,))
    op = lambda v: jnp.asarray(a) @ v  # noqa: E731
    x, k, res = gmres(op, jnp.asarray(b), rtol=1e-6, atol=0.0, max_iters=n)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-3, atol=1e-4)
    assert 1 <= int(k) <= n
    # The reported residual is the true one, and the stopping rule held.
    true = np.linalg.norm(b - a @ np.asarray(x))
    np.testing.assert_allclose(float(res), true, atol=1e-4)
    assert float(res) <= 1e-6 * np.linalg.norm(b) * 10
    # Fewer steps than needed: the least-squares iterate over the Krylov space, residual > tol.
    x3, k3, res3 = gmres(op, jnp.asarray(b), rtol=1e-6, atol=0.0, max_iters=3)
    assert int(k3) == 3 and float(res3) > 1e-3
    np.testing.assert_allclose(float(res3), np.linalg.norm(b - a @ np.asarray(x3)), rtol=1e-4)
    # An absolute tolerance stops earlier; an exact breakdown (identity) stops after one step.
    _, k_abs, res_abs = gmres(op, jnp.asarray(b), rtol=0.0, atol=0.5, max_iters=n)
    assert float(res_abs) <= 0.5 and int(k_abs) < int(k)
    xi, ki, _ = gmres(lambda v: v, jnp.asarray(b), rtol=1e-6, atol=0.0, max_iters=n)
    assert int(ki) == 1
    np.testing.assert_allclose(np.asarray(xi), b, rtol=1e-6)


def test_slerp_follows_the_great_circle():
    x0 = jnp.array([2.0, 0.0, 0.0])
    x1 = jnp.array([0.0, 2.0, 0.0])
    path = np.asarray(slerp(x0, x1, 7))
    np.testing.assert_allclose(path[0], x0)
    np.testing.assert_allclose(path[-1], x1)
    np.testing.assert_allclose(np.linalg.norm(path, axis=-1), 2.0, rtol=1e-6)
    angles = np.arctan2(path[:, 1], path[:, 0])
    np.testing.assert_allclose(np.diff(angles), np.pi / 12, rtol=1e-5)
    # Batched endpoints and (nearly) parallel ones fall back to linear interpolation.
    batch = slerp(jnp.stack([x0, x0]), jnp.stack([x1, 3.0 * x0]), 5)
    assert batch.shape == (2, 5, 3)
    np.testing.assert_allclose(np.asarray(batch[1, :, 0]), np.linspace(2.0, 6.0, 5), rtol=1e-5)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def test_agrees_with_banded_lm_and_batches(x64):
    d = 6
    gm = mixture(d, 3, 0.3)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    means = np.asarray(gm.means, np.float64)
    x0, x1 = means[0], means[2]
    init = np.asarray(slerp(jnp.asarray(x0), jnp.asarray(x1), 10))
    path, rep = solve_matrix_free(
        x0, x1, score=score, residual="euclidean", tol=1e-9, max_iters=100, cg_max_iters=200
    )
    ref, rep_ref = gfm.solve(
        x0, x1, score=score, n_points=10, residual="euclidean", init=init, tol=1e-9,
        method="lm",
    )  # fmt: skip
    assert rep.converged and rep_ref.converged and rep.code == 0
    assert rep.method == "matrix_free" and rep.cg_iterations >= rep.iterations
    np.testing.assert_allclose(np.asarray(path), np.asarray(ref), atol=1e-7)
    # A batch of two pairs gives each pair's own solution.
    xb0, xb1 = np.stack([x0, means[1]]), np.stack([x1, means[2]])
    paths, reps = solve_matrix_free(
        xb0, xb1, score=score, residual="euclidean", tol=1e-9, max_iters=100, cg_max_iters=200
    )
    assert paths.shape == (2, 10, d) and reps.converged.all()
    np.testing.assert_allclose(np.asarray(paths[0]), np.asarray(path), atol=1e-7)
    assert reps[1].cg_iterations == np.asarray(reps.cg_iterations)[1]


def test_methods_reach_the_same_path(x64):
    """Newton-GMRES and LM with our PCG solve the same system (Euclidean
    residual; the hypersphere residual's solutions are not unique: it leaves each waypoint's
    radius free, K-2 fewer equations than unknowns)."""
    rng = np.random.default_rng(3)
    x0, x1 = rng.normal(size=(2, 4))
    score = lambda x: -4.0 * x + jnp.sin(3.0 * x)  # noqa: E731  (nonlinear, cheap to compile)
    kw = dict(score=score, residual="euclidean", tol=1e-10, max_iters=100, cg_max_iters=200)
    paths = {}
    for method in ("newton", "lm"):
        paths[method], rep = solve_matrix_free(x0, x1, method=method, **kw)
        assert rep.code == 0 and rep.residual <= 1e-10, (method, rep.reason)
    np.testing.assert_allclose(np.asarray(paths["lm"]), np.asarray(paths["newton"]), atol=1e-8)


def test_lm_takes_over_when_the_newton_line_search_fails(x64):
    """``r(x) = arctan(x)`` from x = 20: the Newton step (-609) overshoots and no step length
    down to 1/8 decreases |r|, so the Newton phase stops (code 4); the LM continues to the root."""

    def residual(path):
        return jnp.arctan(path[1:-1])

    path0 = jnp.array([[0.0], [20.0], [0.0]])
    newton = NewtonGMRES(residual, tol=1e-10, max_iters=50, gmres_max_iters=5)
    path, _, it, code, _, _ = iterate(newton, path0)
    assert int(code) == 4 and int(it) == 1
    np.testing.assert_allclose(np.asarray(path), path0)  # the failed step is not taken
    kw = dict(tol=1e-10, max_iters=100, cg_max_iters=5)
    path, res, it, code, _ = minimise_path_matrix_free(path0, residual, **kw)
    assert int(code) == 0 and float(res) <= 1e-10 and int(it) > 1
    assert abs(float(path[1, 0])) <= 1e-10


def test_hypersphere_residual_vanishes(x64):
    d = 6
    gm = mixture(d, 3, 0.3)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    x0, x1 = (np.asarray(gm.means[i], np.float64) for i in (0, 2))
    path, rep = solve_matrix_free(x0, x1, score=score, tol=1e-9, max_iters=100)
    assert rep.converged, rep.reason
    res = gfm.path_residuals(path, lam=1.0, score=score, metric=None, kind="hypersphere")
    assert float(gfm.residual_norm(res)) <= 1e-9
    np.testing.assert_allclose(np.asarray(path)[[0, -1]], np.stack([x0, x1]))


def test_converges_at_d512_without_recompiling():
    d = 512
    gm = mixture(d, 8, 0.5)
    keys = jax.random.split(jax.random.key(2), 4)
    noisy = [gm.means[i] + 0.3 * jax.random.normal(keys[i], (d,)) for i in range(4)]
    TRACES.clear()
    score = CountingScore(gm, jnp.asarray(0.3))
    _, rep = solve_matrix_free(noisy[0], noisy[1], score=score, tol=1e-3)
    assert rep.converged and rep.residual <= 1e-3, rep.reason
    n_traces = len(TRACES)
    # New endpoints, sigma, lam and tol: same compiled solve.
    score2 = CountingScore(gm, jnp.asarray(0.25))
    _, rep2 = solve_matrix_free(noisy[2], noisy[3], score=score2, lam=0.8, tol=2e-3)
    assert rep2.converged, rep2.reason
    assert len(TRACES) == n_traces


def _avals(jaxpr):
    """Every abstract value (inputs, outputs, intermediates) of a jaxpr and its sub-jaxprs."""
    for v in list(jaxpr.invars) + list(jaxpr.constvars):
        yield v.aval
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            yield v.aval
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _avals(inner)


def _shapes(fn, *args):
    return [tuple(a.shape) for a in _avals(jax.make_jaxpr(fn)(*args).jaxpr) if hasattr(a, "shape")]


def test_memory_is_linear_in_d():
    d, k = 512, 10
    gm = mixture(d, 4, 0.5)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    res = lambda p: gfm_residual(p, lam=1.0, score=score, kind="hypersphere")  # noqa: E731

    def matrix_free(x0, x1):
        return minimise_path_matrix_free(
            slerp(x0, x1, k), res, tol=1e-3, max_iters=5, cg_max_iters=5
        )

    x0, x1 = gm.means[0], gm.means[1]
    shapes = _shapes(matrix_free, x0, x1)
    # No array has two axes of length d; the largest is the GMRES basis (21, K-2, d) of the
    # Newton phase (gmres_max_iters=20), then the mixture's (K-2, components, d).
    assert max(sum(n >= d for n in s) for s in shapes) == 1
    assert max(int(np.prod(s)) for s in shapes) == 21 * (k - 2) * d
    assert (21, k - 2, d) in shapes

    # The walker does see d x d blocks where they exist: the banded LM forms them.
    def banded(x0, x1):
        from geomopt.gfm.solvers._minimise import minimise_path

        loc = lambda a, b, c: res(jnp.stack([a, b, c]))[0]  # noqa: E731
        return minimise_path(
            slerp(x0, x1, k), loc, window=3, method="lm", tol=1e-3, gtol=0.0, max_iters=5
        )

    assert any(sum(n >= d for n in s) >= 2 for s in _shapes(banded, x0, x1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"x0": np.ones((2, 3, 4), np.float32), "x1": np.ones((2, 3, 4), np.float32)},
            r"shape \(2, 3, 4\)",
        ),
        ({"x1": np.ones(5, np.float32)}, r"shapes \(4,\) and \(5,\)"),
        ({"x0": np.arange(4)}, "x0 has dtype int"),
        ({"x1": np.ones(4, np.float16)}, "x1 has dtype float16"),
        (
            {"x0": np.array([1.0, np.nan, 1.0, 1.0], np.float32)},
            r"x0 has a non-finite entry nan at index \(1,\)",
        ),
        ({"x1": np.array([1.0, 1.0, np.inf, 1.0], np.float32)}, r"x1 has a non-finite entry inf"),
        ({"x0": np.zeros(4, np.float32)}, "x0 is zero"),
        ({"n_points": 2}, "n_points=2"),
        ({"lam": -1.0}, "lam=-1.0"),
        ({"tol": 0.0}, "tol=0.0"),
        ({"residual": "metric"}, "residual 'metric'"),
        ({"init": "cubic"}, "init 'cubic'"),
        ({"init": np.ones((9, 4), np.float32)}, r"init has shape \(9, 4\), expected \(10, 4\)"),
        ({"precond": "jacobi"}, "precond 'jacobi'"),
        ({"method": "bfgs"}, "method 'bfgs'"),
        ({"gmres_max_iters": 0}, "gmres_max_iters=0"),
        ({"score": 3.0}, "score must be a callable"),
    ],
)
def test_bad_input_names_the_value(kwargs, match):
    args = {"x0": np.ones(4, np.float32), "x1": -np.ones(4, np.float32), "score": None}
    args.update(kwargs)
    x0, x1 = args.pop("x0"), args.pop("x1")
    with pytest.raises((ValueError, TypeError), match=match):
        solve_matrix_free(x0, x1, **args)


def test_gfm_solve_dispatches_by_backend_and_d(x64):
    d = 6
    gm = mixture(d, 3, 0.3)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    x0, x1 = (np.asarray(gm.means[i], np.float64) for i in (0, 2))
    path, rep = gfm.solve(x0, x1, score=score, n_points=10, backend="matrix_free", tol=1e-9)
    ref, _ = solve_matrix_free(x0, x1, score=score, residual="euclidean", init="linear", tol=1e-9)
    assert rep.method == "matrix_free" and rep.converged
    np.testing.assert_allclose(np.asarray(path), np.asarray(ref), atol=1e-10)
    _, rep_auto = gfm.solve(x0, x1, score=score, n_points=10, tol=1e-9)
    assert rep_auto.method == "action"  # small d: the banded default
    with pytest.raises(ValueError, match="backend='matrix_free' with residual 'metric'"):
        gfm.solve(x0, x1, metric=gfm.Conformal(lambda x: 1.0 + x @ x), backend="matrix_free")
    with pytest.raises(ValueError, match="backend 'sparse'"):
        gfm.solve(x0, x1, backend="sparse")


def test_gfm_solve_auto_is_matrix_free_at_latent_scale():
    d = 256
    gm = mixture(d, 2, 0.5)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    x0, x1 = gm.means[0] + 0.1, gm.means[1] - 0.1
    _, rep = gfm.solve(x0, x1, score=score, n_points=10, residual="hypersphere", tol=1e-3)
    assert rep.method == "matrix_free" and rep.converged, rep.reason


def test_matrix_free_options_reach_the_backend_through_the_front():
    d = 6
    gm = mixture(d, 3, 0.3)
    score = gfm.ScoreAt(gm, jnp.asarray(0.3))
    x0, x1 = (np.asarray(gm.means[i], np.float32) for i in (0, 2))
    solver = gfm.MatrixFree(method="lm", cg_max_iters=3, precond="fd")
    path, rep = gfm.solve(x0, x1, score=score, n_points=10, solver=solver, max_iters=5)
    ref, ref_rep = solve_matrix_free(
        x0, x1, score=score, residual="euclidean", init="linear", method="lm", cg_max_iters=3,
        precond="fd", max_iters=5,
    )  # fmt: skip
    assert rep.method == "matrix_free"
    np.testing.assert_array_equal(np.asarray(path), np.asarray(ref))
    np.testing.assert_array_equal(rep.cg_iterations, ref_rep.cg_iterations)

