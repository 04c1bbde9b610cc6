"""Separable problems: exact norms, noise constructions, noise statistics, gradients, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import problems as pr


def test_norms_and_phi_known_vectors():
    d = 7
    one_hot = np.zeros(d)
    one_hot[3] = 2.0
    assert float(pr.noise_density(one_hot)) == pytest.approx(1.0 / d)
    assert float(pr.noise_density(np.full(d, 0.3))) == pytest.approx(1.0)
    v = np.array([3.0, -4.0, 0.0])
    assert float(pr.l1_norm(v)) == pytest.approx(7.0)
    assert float(pr.l2_norm(v)) == pytest.approx(5.0)
    assert float(pr.noise_density(v)) == pytest.approx(49.0 / (3 * 25.0))
    assert float(pr.l_inf_smoothness(np.array([1000.0, 1.0, 1.0]))) == pytest.approx(1002.0)


def test_multiplicities_equal_the_expanded_vector():
    vals, mult = np.array([0.5, 2.0, 0.0]), np.array([3.0, 1.0, 6.0])
    full = np.repeat(vals, mult.astype(int))
    for f in (pr.l1_norm, pr.l2_norm, pr.noise_density):
        assert float(f(vals, mult)) == pytest.approx(float(f(full)), rel=1e-6)


def test_matched_l1_pair_and_sparse_sigma():
    for d in (1, 5, 1000):
        sparse, dense = pr.matched_l1_pair(d, 2.5)
        assert sparse.sum() == pytest.approx(2.5) and dense.sum() == pytest.approx(2.5)
        assert float(pr.noise_density(sparse)) == pytest.approx(1.0 / d, rel=1e-5)
        assert float(pr.noise_density(dense)) == pytest.approx(1.0, rel=1e-5)
    s = pr.sparse_sigma(100, 10, 1.0)
    assert np.count_nonzero(s) == 10
    assert float(pr.noise_density(s)) == pytest.approx(0.1, rel=1e-5)


@pytest.mark.parametrize("d", [2, 10, 1000])
def test_sigma_with_prescribed_phi(d):
    for phi in np.unique(np.r_[1.0 / d, np.geomspace(1.0 / d, 1.0, 6), (d - 1) / d, 1.0]):
        sigma = pr.sigma_with_phi(d, float(phi), l1=3.0)
        assert np.all(sigma >= 0)
        assert sigma.sum() == pytest.approx(3.0)
        got = (sigma.sum() ** 2) / (d * np.sum(sigma**2))  # float64 oracle
        assert got == pytest.approx(phi, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("noise,df,tol", [("gaussian", 4.0, 0.05), ("student_t", 6.0, 0.1)])
def test_noise_per_coordinate_variance(noise, df, tol):
    sigma = np.array([0.0, 0.5, 1.0, 3.0])
    prob = pr.separable_problem(np.ones(4), sigma, np.zeros(4), noise=noise, df=df)
    keys = jax.random.split(jax.random.key(1), 20_000)
    g = np.asarray(jax.jit(jax.vmap(prob.stochastic_grad, (None, 0)))(jnp.zeros(4), keys))
    np.testing.assert_array_equal(g[:, 0], 0.0)
    np.testing.assert_allclose(g[:, 1:].var(0), sigma[1:] ** 2, rtol=tol)
    np.testing.assert_allclose(g[:, 1:].mean(0), 0.0, atol=0.05 * sigma[1:].max())
    kurt = np.mean(g[:, 3] ** 4) / np.mean(g[:, 3] ** 2) ** 2
    if noise == "gaussian":
        assert kurt == pytest.approx(3.0, abs=0.25)
    else:  # Student-t(6) has kurtosis 3 + 6 / (df - 4) = 6: heavier tails than the Gaussian
        assert kurt > 4.0


@pytest.mark.parametrize("kind", ["quadratic", "logcosh"])
def test_gradient_matches_autodiff_and_curvature_bound(kind):
    L = jnp.array([1000.0, 1.0, 0.3, 0.0])
    x = jnp.array([0.7, -2.0, 5.0, 1.0])
    prob = pr.separable_problem(L, jnp.zeros(4), x, kind=kind)
    np.testing.assert_allclose(prob.grad(x), jax.grad(prob.value)(x), rtol=1e-5)
    hess = jax.jit(lambda y: jnp.diag(jax.hessian(prob.value)(y)))
    assert bool(jnp.all(hess(x) <= L * (1 + 1e-6)))
    np.testing.assert_allclose(hess(jnp.zeros(4)), L, rtol=1e-6)
    assert float(prob.grad_l1(x)) == pytest.approx(float(jnp.sum(jnp.abs(prob.grad(x)))))
    assert float(prob.l_inf) == pytest.approx(1001.3, rel=1e-6)
    assert float(prob.value(jnp.zeros(4))) == 0.0


def test_logcosh_is_stable_for_large_arguments():
    prob = pr.separable_problem([1.0], [0.0], [0.0], kind="logcosh")
    x = jnp.array([200.0])
    assert float(prob.value(x)) == pytest.approx(200.0 - np.log(2.0), rel=1e-6)
    assert float(prob.grad(x)[0]) == pytest.approx(1.0)


@pytest.mark.parametrize("reduced", [False, True])
def test_fixed_curvature_instance_changes_only_the_noise(reduced):
    for d in (10, 200):
        base = pr.fixed_curvature_instance(d, 1.0, 0.0, reduced=reduced, levels=4)
        assert float(base.sigma_l1) == 0.0
        for phi in (1.0 / d, 0.1, 1.0):
            p = pr.fixed_curvature_instance(d, phi, 3.0, reduced=reduced, levels=4)
            np.testing.assert_array_equal(p.L, base.L)  # the same quadratic for every noise
            np.testing.assert_array_equal(p.x0, base.x0)
            assert float(p.sigma_l1) == pytest.approx(3.0, rel=1e-5)
            assert float(p.phi) == pytest.approx(phi, rel=1e-4)
            assert float(p.l_inf) == pytest.approx(1.0, rel=1e-5)
            assert float(p.delta) == pytest.approx(0.5, rel=1e-5)
            assert int(np.argmax(p.sigma)) == 0 and float(p.L[0]) == float(p.L.max())
        # the stiff coordinate is sgd_hard_instance(d, 1)'s
        np.testing.assert_allclose(base.L, pr.sgd_hard_instance(d, 1, 0.0, reduced=reduced,
                                                                levels=4).L)  # fmt: skip


def test_sgd_hard_instance_keeps_the_invariants_fixed():
    for d, s in ((10, 1), (10, 10), (1000, 1), (1000, 37), (100_000, 1)):
        for reduced in (False, True) if d <= 1000 else (True,):
            p = pr.sgd_hard_instance(d, s, 0.25, l_inf=2.0, delta=0.5, reduced=reduced)
            assert float(p.d) == pytest.approx(d, rel=1e-6)
            assert float(p.l_inf) == pytest.approx(2.0, rel=1e-5)
            assert float(p.sigma_l1) == pytest.approx(0.25, rel=1e-5)
            assert float(p.delta) == pytest.approx(0.5, rel=1e-5)
            assert float(p.phi) == pytest.approx(s / d, rel=1e-4)


KEYS = jax.random.split(jax.random.key(3), 128)
GRIDS = (("sgd", [0.5, 3.0]), ("signsgd", [0.01, 0.05]))


def _pair(sigma_l1):
    return [
        pr.stack_problems([pr.sgd_hard_instance(32, 4, sigma_l1, reduced=r, levels=4)])
        for r in (False, True)
    ]


def test_reduced_and_full_instance_agree_exactly_without_noise():
    full, red = _pair(0.0)
    for name, lrs in GRIDS:
        a = pr.run_trajectories(full, name, lrs, KEYS, steps=40, log_every=10)
        b = pr.run_trajectories(red, name, lrs, KEYS, steps=40, log_every=10)
        np.testing.assert_allclose(a["stationarity"], b["stationarity"], rtol=2e-5)
        np.testing.assert_allclose(a["loss"], b["loss"], rtol=2e-5)


def test_reduced_and_full_instance_agree_in_expectation():
    full, red = _pair(0.5)
    for name, lrs in GRIDS:
        a = pr.run_trajectories(full, name, lrs, KEYS, steps=40, log_every=10)["stationarity"]
        b = pr.run_trajectories(red, name, lrs, KEYS, steps=40, log_every=10)["stationarity"]
        sa, sb = np.asarray(a[0]), np.asarray(b[0])  # (G, S, K)
        se = np.sqrt(sa.var(1) / len(KEYS) + sb.var(1) / len(KEYS))
        assert np.all(np.abs(sa.mean(1) - sb.mean(1)) <= 4 * se + 1e-6)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pr.sparse_sigma(0, 1, 1.0), r"d=0: expected an integer >= 1"),
        (lambda: pr.sparse_sigma(5, 6, 1.0), r"s=6: .* in \[1, d=5\]"),
        (lambda: pr.sparse_sigma(5, -1, 1.0), r"s=-1: .* in \[1, d=5\]"),
        (lambda: pr.sparse_sigma(5, 1, -1.0), r"l1=-1\.0: expected a finite number >= 0"),
        (lambda: pr.sparse_sigma(5, 1, float("nan")), r"l1=nan: expected a finite number"),
        (lambda: pr.sigma_with_phi(10, 0.05), r"phi=0\.05: .* \[0\.1, 1\]"),
        (lambda: pr.sigma_with_phi(10, 1.5), r"phi=1\.5: .* \[0\.1, 1\]"),
        (lambda: pr.separable_problem([1.0, 1.0], [0.1], [0.0, 0.0]), r"mismatched shapes"),
        (lambda: pr.separable_problem([1.0], [-0.1], [0.0]), r"sigma has negative entries"),
        (lambda: pr.separable_problem([1.0], [float("inf")], [0.0]),
         r"sigma=\[inf\]: expected finite values"),
        (lambda: pr.separable_problem([], [], []), r"L has d=0 coordinates"),
        (lambda: pr.separable_problem([1.0], [0.1], [0.0], kind="cubic"), r"kind='cubic'"),
        (lambda: pr.separable_problem([1.0], [0.1], [0.0], noise="student_t", df=2.0),
         r"df=2\.0: expected a finite number > 2"),
        (lambda: pr.sgd_hard_instance(10, 11, 1.0), r"s=11: .* in \[1, d=10\]"),
        (lambda: pr.sgd_hard_instance(0, 1, 1.0), r"d=0: expected an integer >= 1"),
    ],
)  # fmt: skip
def test_bad_input_raises_value_error_naming_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_error_messages_name_the_value():
    with pytest.raises(ValueError, match="s=7"):
        pr.sparse_sigma(5, 7, 1.0)
    with pytest.raises(ValueError, match="d=0"):
        pr.sparse_sigma(0, 1, 1.0)
    with pytest.raises(ValueError, match="mismatched shapes"):
        pr.separable_problem([1.0, 2.0], [0.1, 0.2], [0.0])
