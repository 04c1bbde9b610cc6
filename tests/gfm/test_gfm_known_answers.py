"""Known answers for the force term of each GFM residual, independent of the implementation.

- identity metric: the metric residual with ``G = I`` and a nonzero score solves to the
  Euclidean path (and both to the exact discrete path of a Gaussian well);
- constant metric ``G`` with the quadratic-well score ``s(x) = -A (x - c)``: the Christoffel
  term vanishes and the collocation equations ``a_i = lam G^{-1} A (x_i - c)`` are a linear
  system, solved densely here;
- hypersphere residual with ``lam > 0``: ``P(a_i) + lam P(s(x_i))`` written out in NumPy, for
  the residual itself and at the solutions of the banded and matrix-free solvers.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm._matrix_free import solve_matrix_free


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


# A symmetric positive-definite well matrix and a constant SPD metric, neither diagonal.
A = np.array([[3.0, 1.0], [1.0, 2.0]])
G = np.array([[2.0, 0.6], [0.6, 0.5]])
CENTRE = np.array([0.3, 0.9])


def quadratic_well(x):
    return -jnp.asarray(A, x.dtype) @ (x - jnp.asarray(CENTRE, x.dtype))


def exact_quadratic_well_path(x0, x1, lam, n, metric=None):
    """The collocation solution of ``(x_{i+1} - 2 x_i + x_{i-1}) / dt^2 = M (x_i - c)`` with
    ``M = lam G^{-1} A``, as one dense linear system over the stacked interior waypoints."""
    d = x0.shape[0]
    dt = 1.0 / (n - 1)
    m = n - 2
    mm = lam * (A if metric is None else np.linalg.solve(metric, A))
    second = (np.diag(np.full(m, -2.0)) + np.diag(np.ones(m - 1), 1)
              + np.diag(np.ones(m - 1), -1)) / dt**2  # fmt: skip
    system = np.kron(second, np.eye(d)) - np.kron(np.eye(m), mm)
    rhs = np.tile(-mm @ CENTRE, (m, 1))
    rhs[0] -= x0 / dt**2
    rhs[-1] -= x1 / dt**2
    inner = np.linalg.solve(system, rhs.reshape(-1)).reshape(m, d)
    return np.concatenate([x0[None], inner, x1[None]])


X0, X1 = np.array([0.0, 0.0]), np.array([1.0, -0.5])


@pytest.mark.parametrize("method", ["auto"])
def test_identity_metric_with_a_score_is_the_euclidean_solve(method):
    n, lam = 9, 1.5
    kw = dict(score=quadratic_well, lam=lam, n_points=n, method=method, tol=1e-11)
    euclid, rep_e = gfm.solve(X0, X1, **kw)
    eye, rep_m = gfm.solve(X0, X1, metric=lambda x: jnp.eye(2, dtype=x.dtype),
                           residual="metric", **kw)  # fmt: skip
    assert rep_e.converged and rep_m.converged, (rep_e.reason, rep_m.reason)
    exact = exact_quadratic_well_path(X0, X1, lam, n)
    np.testing.assert_allclose(np.asarray(euclid), exact, atol=1e-9)
    np.testing.assert_allclose(np.asarray(eye), exact, atol=1e-9)
    # the well pulls the path off the chord: the force term matters here
    assert np.abs(exact - np.linspace(X0, X1, n)).max() > 0.05


@pytest.mark.parametrize("method", ["lm"])
def test_constant_metric_with_a_quadratic_well_is_the_linear_solution(method):
    n, lam = 9, 0.8
    path, rep = gfm.solve(X0, X1, score=quadratic_well, metric=lambda x: jnp.asarray(G, x.dtype),
                          lam=lam, n_points=n, method=method, tol=1e-11)  # fmt: skip
    assert rep.converged, rep.reason
    exact = exact_quadratic_well_path(X0, X1, lam, n, metric=G)
    np.testing.assert_allclose(np.asarray(path), exact, atol=1e-9)
    # G^{-1} matters: the Euclidean answer is far from this one
    assert np.abs(exact - exact_quadratic_well_path(X0, X1, lam, n)).max() > 0.05


def hypersphere_residual_numpy(path, score, lam):
    """``P_x(a_i) + lam P_x(s(x_i))``, ``P_x(u) = u - <u, x> x / |x|^2``, at interior waypoints."""
    path = np.asarray(path, np.float64)
    dt = 1.0 / (len(path) - 1)
    out = []
    for i in range(1, len(path) - 1):
        x = path[i]
        acc = (path[i + 1] - 2.0 * x + path[i - 1]) / dt**2
        force = np.asarray(score(jnp.asarray(x)))
        proj = lambda u, x=x: u - (u @ x) / (x @ x) * x  # noqa: E731
        out.append(proj(acc) + lam * proj(force))
    return np.stack(out)


def sphere_score(x):
    """A nonlinear score whose projection on the sphere's tangent space is not zero."""
    c = jnp.asarray([1.0, 0.5, -0.5, 0.2], x.dtype)
    return -(x - c) + 0.3 * jnp.sin(2.0 * x)


def test_hypersphere_residual_matches_the_formula_with_a_force():
    rng = np.random.default_rng(0)
    path = rng.normal(size=(7, 4))
    lam = 0.7
    got = gfm.path_residuals(jnp.asarray(path), lam=lam, score=sphere_score, metric=None,
                             kind="hypersphere")  # fmt: skip
    want = hypersphere_residual_numpy(path, sphere_score, lam)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    # the force contributes: without it the residual is another one
    assert np.abs(want - hypersphere_residual_numpy(path, sphere_score, 0.0)).max() > 0.1


@pytest.mark.parametrize("backend", ["banded", "matrix_free"])
def test_hypersphere_solutions_satisfy_the_formula(backend):
    x0 = np.array([1.0, 0.0, 0.5, 0.0])
    x1 = np.array([0.0, 1.0, -0.5, 0.3])
    lam, n = 0.7, 8
    if backend == "banded":
        path, rep = gfm.solve(x0, x1, score=sphere_score, lam=lam, n_points=n,
                              residual="hypersphere", backend="banded", tol=1e-10)  # fmt: skip
    else:
        path, rep = solve_matrix_free(x0, x1, score=sphere_score, lam=lam, n_points=n,
                                      residual="hypersphere", tol=1e-10, max_iters=100)  # fmt: skip
    assert rep.converged, rep.reason
    res = hypersphere_residual_numpy(path, sphere_score, lam)
    assert np.sqrt(np.mean(np.sum(res**2, axis=-1))) <= 1e-9
    # the path is not also a solution without the force (the force moved it)
    free = hypersphere_residual_numpy(path, sphere_score, 0.0)
    assert np.sqrt(np.mean(np.sum(free**2, axis=-1))) > 1e-3


def test_report_records_tol_lam_and_n_points_and_path_metrics_needs_lam():
    n, lam = 7, 0.6
    path, rep = gfm.solve(X0, X1, score=quadratic_well, lam=lam, n_points=n, method="lm")
    # the default tolerance resolved (its 1e-8 floor at this size in float64)
    assert (rep.tol, rep.lam, rep.n_points) == (gfm.default_tol(n, np.float64), lam, n) == (
        1e-8, lam, n)  # fmt: skip
    batch, reps = gfm.solve(np.stack([X0, X0]), np.stack([X1, -X1]), score=quadratic_well,
                            lam=lam, n_points=n, tol=1e-9, method="lm")  # fmt: skip
    assert (reps.tol, reps.lam, reps.n_points) == (1e-9, lam, n)
    assert (reps[1].tol, reps[1].lam, reps[1].n_points) == (1e-9, lam, n)
    # the EL residual of a solved path at the lam it was solved with, never an assumed 1
    exact = exact_quadratic_well_path(X0, X1, lam, n)
    with pytest.raises(ValueError, match="a score without lam"):
        gfm.path_metrics(exact, score=quadratic_well)
    at_lam = gfm.path_metrics(exact, score=quadratic_well, lam=rep.lam)["el_residual"]
    at_one = gfm.path_metrics(exact, score=quadratic_well, lam=1.0)["el_residual"]
    assert float(at_lam) <= 1e-9 < 0.1 < float(at_one)
