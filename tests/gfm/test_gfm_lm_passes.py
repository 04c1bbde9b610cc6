"""How an LM pass skips work, checked for the same numbers: the Jacobian blocks from the kept
linearisation equal ``jacfwd``'s, the unrolled small Cholesky equals LAPACK's, a single solve runs
unbatched (real ``lax.cond``s), and a batch, whose conds count their predicates over the batch,
gives each pair the path, iterations and code of its single solve."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from geomopt import gfm
from geomopt.gfm import _compiled
from geomopt.gfm._potentials import TubePotential
from geomopt.gfm._residuals import local_residual
from geomopt.gfm.solvers._banded import small_cholesky, small_tri_solve
from geomopt.gfm.solvers._interface import eval_rows as _eval
from geomopt.gfm.solvers._levenberg_marquardt import _blocks_of, _linearised_rows
from geomopt.manifolds import get_manifold


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def torus():
    return get_manifold("torus")


@pytest.fixture(scope="module")
def score(torus):
    return gfm.ScoreAt(TubePotential(torus), 0.1)


def _pairs(torus, n, seed):
    u = torus.sample_coords(jax.random.key(seed), 2 * n).reshape(2, n, 2)
    return tuple(np.asarray(jax.vmap(torus.embed)(c)) for c in u)


def test_linearised_blocks_equal_jacfwd_blocks(torus):
    x0, x1 = _pairs(torus, 1, 0)
    path = jnp.asarray(gfm.coordinate_linear(torus, x0[0], x1[0], 12))
    smooth_score = lambda x: jnp.sin(2.0 * x) - x * jnp.sum(x**2)  # noqa: E731
    local = functools.partial(
        local_residual, dt=1 / 11, lam=1.0, score=smooth_score,
        metric=gfm.TorusMetric(5.0, 0.1, 1.0), kind="metric",
    )  # fmt: skip
    w_ref, jac_ref = jax.jit(lambda p: _eval(p, local, 3, True))(path)

    @jax.jit
    def linearised(p):
        w, lins = _linearised_rows(p, local, 3)
        return w, _blocks_of(lins, 10, 3, p.dtype)

    w, jac = linearised(path)
    np.testing.assert_allclose(w, w_ref, rtol=0, atol=1e-12)
    for a, b in zip(jac, jac_ref, strict=True):
        assert a.shape == b.shape == (10, 3, 3)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("d", [1, 3, 5])
def test_small_cholesky_matches_lapack_and_marks_non_spd_blocks(d):
    rng = np.random.default_rng(d)
    m = rng.normal(size=(4, d, d))
    spd = m @ np.swapaxes(m, 1, 2) + 0.1 * np.eye(d)
    low = np.asarray(small_cholesky(jnp.asarray(spd)))
    np.testing.assert_allclose(low, np.linalg.cholesky(spd), rtol=1e-12, atol=1e-12)
    b = rng.normal(size=(d, 2))
    for transpose in (False, True):
        got = small_tri_solve(jnp.asarray(low[0]), jnp.asarray(b), transpose=transpose)
        want = scipy.linalg.solve_triangular(low[0], b, lower=True, trans=int(transpose))
        np.testing.assert_allclose(got, want, rtol=1e-10)
    # vectors too
    np.testing.assert_allclose(
        small_tri_solve(jnp.asarray(low[0]), jnp.asarray(b[:, 0])),
        scipy.linalg.solve_triangular(low[0], b[:, 0], lower=True), rtol=1e-10,
    )  # fmt: skip
    bad = spd[0] - (np.linalg.eigvalsh(spd[0])[0] + 1.0) * np.eye(d)  # one negative eigenvalue
    assert not np.all(np.isfinite(np.asarray(small_cholesky(jnp.asarray(bad)))))


def _solver_jaxpr(score, metric, x0, x1, n_points, mode="vmap"):
    batched = x0.ndim == 2
    kind = "euclidean" if metric is None else "metric"
    cfg = (kind, gfm.LM(), True, n_points, batched, False, "float64",
           mode if batched else "single", False)  # fmt: skip
    fn, dynamic = _compiled._get_solver(score, metric, cfg)
    hyper = np.array([1.0, 1e-8, 1.0])  # lam, tol, support sigma (LM traces no option)
    return str(jax.make_jaxpr(fn)(x0, x1, None, dynamic, hyper, np.asarray(50)))


def test_a_single_solve_is_not_vmapped_and_a_batch_counts_its_predicates(torus, score):
    x0, x1 = _pairs(torus, 3, 1)
    single = _solver_jaxpr(score, None, x0[0], x1[0], 10)
    batch = _solver_jaxpr(score, None, x0, x1, 10)
    mapped = _solver_jaxpr(score, None, x0, x1, 10, mode="map")
    # Under vmap every cond on a per-pair predicate becomes a select of both branches; a
    # single solve keeps its conds (the LM pass's skips) and needs no batch reduction.
    assert single.count("cond[") >= 4 and "psum" not in single
    assert batch.count("cond[") >= 4 and "psum" in batch
    # batch="map": one pair after another (a scan over pairs), each with the single solve's
    # loop and conds.
    assert "scan[" in mapped and mapped.count("cond[") >= 4 and "psum" not in mapped


@pytest.mark.parametrize("method", ["lm", "action"])
def test_batch_gives_each_pair_its_single_solve(torus, score, method):
    # Geodesic LM and the action solver's polish (plain LM: test_gfm_lm_stall.py).
    x0, x1 = _pairs(torus, 4, 4)  # LM: one pair stalls (code 7), three converge
    metric = None
    init = np.asarray(gfm.coordinate_linear(torus, x0, x1, 12))
    opts = dict(method=method)
    # batch="vmap": the pairs share one loop, whose conds count their predicates over the
    # batch (the CPU default, "map", solves one pair after another: test_batch_modes_agree).
    paths, rep = gfm.solve(
        x0, x1, score=score, metric=metric, n_points=12, init=init, batch="vmap", **opts
    )
    assert len(set(np.asarray(rep.iterations).tolist())) > 1  # pairs stop at different passes
    for i in range(len(x0)):
        p, r = gfm.solve(
            x0[i], x1[i], score=score, metric=metric, n_points=12, init=init[i], **opts
        )
        assert (rep.code[i], rep.iterations[i]) == (r.code, r.iterations), (i, rep.reason[i])
        np.testing.assert_allclose(paths[i], p, atol=1e-9)


def test_batch_modes_agree_and_bad_mode_is_named(torus, score):
    x0, x1 = _pairs(torus, 3, 4)
    kw = dict(score=score, n_points=10, method="lm", lm_options=dict(geodesic=False))
    p_v, r_v = gfm.solve(x0, x1, batch="vmap", **kw)
    p_m, r_m = gfm.solve(x0, x1, batch="map", **kw)
    p_a, r_a = gfm.solve(x0, x1, **kw)  # auto: "map" on the CPU for LM
    assert len(set(np.asarray(r_v.iterations).tolist())) > 1  # pairs stop at different passes
    for p, r in ((p_m, r_m), (p_a, r_a)):
        np.testing.assert_array_equal(r.iterations, r_v.iterations)
        np.testing.assert_array_equal(r.code, r_v.code)
        np.testing.assert_allclose(p, p_v, atol=1e-9)
    with pytest.raises(ValueError, match="batch 'pmap'"):
        gfm.solve(x0, x1, batch="pmap", **kw)
