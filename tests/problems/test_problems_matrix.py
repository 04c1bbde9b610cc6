"""Matrix problems: gradients, nuclear-norm stationarity, noise rank and trace norm, and the
paper's construction: Muon with the exact (SVD) msign on the embedded problem is SignSGD."""

import jax
import numpy as np
import pytest

from geomopt import problems as pr


def _embedded(n=6, rank=2, seed=0):
    vec = pr.sgd_hard_instance(n, rank, 0.6)
    z0 = jax.random.normal(jax.random.key(11), (n,)) + 2.0
    kq, kp = jax.random.split(jax.random.key(seed))
    return (
        vec,
        pr.embedded_problem(
            vec.L, vec.sigma, z0, pr.random_orthogonal(kq, n), pr.random_orthogonal(kp, n)
        ),
        z0,
    )


def test_embedded_gradient_and_nuclear_stationarity():
    _, prob, _ = _embedded()
    W = prob.x0 + 0.3 * np.random.default_rng(2).standard_normal(prob.x0.shape)
    both = jax.jit(lambda W: (prob.grad(W), jax.grad(prob.value)(W), prob.stationarity(W)))
    g, g_auto, stat = both(W)
    np.testing.assert_allclose(g, g_auto, atol=1e-5)
    s = np.linalg.svd(np.asarray(g, np.float64), compute_uv=False).sum()
    assert float(stat) == pytest.approx(s, rel=1e-4)
    assert float(pr.nuclear_norm(g)) == pytest.approx(s, rel=1e-4)
    assert float(prob.trace_norm) == pytest.approx(0.6, rel=1e-6)
    assert float(prob.spectral_smoothness) == pytest.approx(1.0, rel=1e-5)
    Q = np.asarray(prob.Q, np.float64)
    np.testing.assert_allclose(Q @ Q.T, np.eye(6), atol=1e-5)


def test_embedded_noise_rank_and_covariance():
    _, prob, _ = _embedded(n=6, rank=2)
    keys = jax.random.split(jax.random.key(4), 20_000)
    N = np.asarray(jax.jit(jax.vmap(lambda k: prob.noise_matrix(k, (6, 6))))(keys))
    assert np.linalg.matrix_rank(N[0], tol=1e-5) == 2
    cov = np.einsum("kij,klj->il", N, N) / len(keys)
    Q, sig = np.asarray(prob.Q), np.asarray(prob.sigma)
    np.testing.assert_allclose(cov, Q.T @ np.diag(sig**2) @ Q, atol=0.01)


def test_muon_svd_on_embedded_problem_is_signsgd():
    vec, mat, z0 = _embedded(n=6, rank=2)
    vec = pr.separable_problem(vec.L, vec.sigma, z0)
    keys = jax.random.split(jax.random.key(7), 3)
    lrs = [0.01, 0.05]
    a = pr.run_trajectories(pr.stack_problems([vec]), "signsgd", lrs, keys, steps=30, log_every=3)
    b = pr.run_trajectories(pr.stack_problems([mat]), "muon_svd", lrs, keys, steps=30, log_every=3)
    np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(a["stationarity"], b["stationarity"], rtol=1e-4, atol=1e-6)


def test_quadratic_matrix_problem():
    rng = np.random.default_rng(1)
    A, B, W0 = (rng.standard_normal(s) for s in ((5, 4), (3, 2), (4, 3)))
    U = np.linalg.qr(rng.standard_normal((4, 2)))[0]
    prob = pr.quadratic_matrix_problem(A, B, W0, U, [0.5, 0.25])
    g, g_auto = jax.jit(lambda W: (prob.grad(W), jax.grad(prob.value)(W)))(prob.x0)
    np.testing.assert_allclose(g, g_auto, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g, A.T @ A @ W0 @ B @ B.T, rtol=1e-4, atol=1e-4)
    assert float(prob.trace_norm) == pytest.approx(0.75)
    keys = jax.random.split(jax.random.key(4), 8_000)
    N = np.asarray(jax.jit(jax.vmap(lambda k: prob.noise_matrix(k, (4, 3))))(keys), np.float64)
    assert np.linalg.matrix_rank(N[0], tol=1e-5) == 2
    cov = np.einsum("kij,klj->il", N, N) / len(keys)
    Un = np.asarray(U, np.float64)
    np.testing.assert_allclose(cov, Un @ np.diag([0.25, 0.0625]) @ Un.T, atol=0.015)
    # L_* bound: ||grad F(W) - grad F(V)||_* <= bound * ||W - V||_op on random pairs
    An, Bn = np.asarray(A, np.float64), np.asarray(B, np.float64)
    bound = float(prob.spectral_smoothness_bound)
    assert bound == pytest.approx(np.sum(An**2) * np.linalg.norm(Bn, 2) ** 2, rel=1e-4)
    for _ in range(20):
        D = rng.standard_normal((4, 3))
        lhs = np.linalg.svd(An.T @ An @ D @ Bn @ Bn.T, compute_uv=False).sum()
        assert lhs <= bound * np.linalg.norm(D, 2) * (1 + 1e-6)


def test_matrix_bad_input():
    Q = np.eye(3)
    with pytest.raises(ValueError, match="mismatched shapes"):
        pr.embedded_problem(np.ones(2), np.ones(3), np.ones(3), Q, Q)
    with pytest.raises(ValueError, match="sigma"):
        pr.embedded_problem(np.ones(3), -np.ones(3), np.ones(3), Q, Q)
    with pytest.raises(ValueError, match="n=0"):
        pr.random_orthogonal(jax.random.key(0), 0)
    with pytest.raises(ValueError, match="orthonormal"):
        pr.quadratic_matrix_problem(np.eye(3), np.eye(3), np.eye(3), np.ones((3, 1)), [1.0])
    with pytest.raises(ValueError, match="mismatched shapes"):
        pr.quadratic_matrix_problem(np.eye(2), np.eye(3), np.eye(3), np.eye(3)[:, :1], [1.0])
