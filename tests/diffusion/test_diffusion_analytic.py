"""Analytic potentials: closed forms vs autodiff, quadrature, Monte Carlo and scipy."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from geomopt.diffusion import (
    GaussianMixture,
    SmoothedCircle,
    SmoothedManifold,
    SmoothedSphere,
)
from geomopt.manifolds import get_manifold

POINTS_2D = jnp.array([[0.9, 0.3], [1.5, -0.2], [0.05, 0.01], [0.0, 0.0], [-0.3, -1.1]])
POINTS_3D = jnp.array([[0.5, 0.2, 0.9], [1.2, 0.0, 0.4], [0.01, 0.0, 0.02], [0.0, 0.0, 0.0]])


def _grad_check(pot, points, sigma, atol):
    score = jax.jit(jax.vmap(lambda x: pot.score(x, sigma)))(points)
    grad = jax.jit(jax.vmap(jax.grad(lambda x: pot.log_density(x, sigma))))(points)
    np.testing.assert_allclose(score, grad, atol=atol, rtol=1e-4)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 2.0])
def test_circle_score_is_grad_log_density(sigma):
    pot = SmoothedCircle(data_noise=0.01)
    _grad_check(pot, POINTS_2D[:3], sigma, atol=1e-3)
    # at the origin the score vanishes by symmetry
    np.testing.assert_allclose(jax.jit(pot.score)(jnp.zeros(2), sigma), 0.0, atol=1e-6)


def _batched(pot, sigma):
    """Jitted, vmapped (score, log_density) of a potential at one sigma."""
    return jax.jit(jax.vmap(lambda x: (pot.score(x, sigma), pot.log_density(x, sigma))))


def test_circle_matches_monte_carlo_and_quadrature(key):
    pot = SmoothedCircle(radius=1.0)
    sigma = 0.3
    quad = SmoothedManifold(get_manifold("circle"), n=256, data_noise=0.0)

    @jax.jit
    def monte_carlo(x):
        theta = jax.random.uniform(key, (200_000,), minval=0, maxval=2 * math.pi)
        y = jnp.stack([jnp.cos(theta), jnp.sin(theta)], -1)
        w = jnp.exp(-jnp.sum((y - x[None]) ** 2, -1) / (2 * sigma**2)) / (2 * math.pi * sigma**2)
        return jnp.sum(w[:, None] * (y - x[None]), 0) / jnp.sum(w) / sigma**2, jnp.mean(w)

    x = POINTS_2D[:3]
    mc_score, mc_density = jax.vmap(monte_carlo)(x)
    score, logp = _batched(pot, sigma)(x)
    np.testing.assert_allclose(jnp.exp(logp), mc_density, rtol=2e-2)
    np.testing.assert_allclose(score, mc_score, rtol=3e-2, atol=3e-2)
    # the trapezoid rule in the angle is spectrally accurate: agrees to float precision
    q_score, q_logp = _batched(quad, sigma)(x)
    np.testing.assert_allclose(q_score, score, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(q_logp, logp, atol=1e-4)


def test_circle_density_integrates_to_one():
    pot = SmoothedCircle(data_noise=0.02)
    g = jnp.linspace(-2.5, 2.5, 501)
    xx = jnp.stack(jnp.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    dens = jnp.exp(jax.jit(jax.vmap(lambda x: pot.log_density(x, 0.1)))(xx))
    assert float(jnp.sum(dens) * (g[1] - g[0]) ** 2) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.parametrize("sigma", [0.1, 0.5])
def test_sphere_closed_form_vs_grad_and_quadrature(sigma):
    pot = SmoothedSphere(data_noise=0.0)
    _grad_check(pot, POINTS_3D[:3], sigma, atol=2e-3)
    quad = SmoothedManifold(get_manifold("sphere"), n=96, data_noise=0.0)
    score, logp = _batched(pot, sigma)(POINTS_3D)
    q_score, q_logp = _batched(quad, sigma)(POINTS_3D)
    np.testing.assert_allclose(q_score, score, rtol=1e-3, atol=2e-3)
    np.testing.assert_allclose(q_logp, logp, atol=1e-3)


def test_smoothed_torus_quadrature_converged_and_consistent():
    torus = get_manifold("torus")
    x = jnp.array([[1.3, 0.4, 0.35], [0.0, -1.55, 0.1]])
    coarse = SmoothedManifold(torus, n=48)
    fine = SmoothedManifold(torus, n=96)
    sigma = 0.1
    c_score, _ = _batched(coarse, sigma)(x)
    f_score, _ = _batched(fine, sigma)(x)
    np.testing.assert_allclose(c_score, f_score, rtol=1e-4, atol=1e-4)
    _grad_check(coarse, x, sigma, atol=1e-3)
    # the force points back to the surface: just outside, the score has a negative component
    # along the outward normal
    y = jax.vmap(torus.project)(x) + 0.05 * jax.vmap(torus.normal)(x)
    y_score, _ = _batched(fine, 0.05)(y)
    assert np.all(np.sum(np.asarray(y_score) * np.asarray(jax.vmap(torus.normal)(x)), -1) < 0)


def test_gaussian_mixture_against_scipy(key):
    means = jnp.array([[0.0, 0.0], [2.0, 1.0], [-1.0, 2.0]])
    stds = jnp.array([0.3, 0.5, 0.2])
    weights = jnp.array([0.5, 0.3, 0.2])
    gm = GaussianMixture(means, stds, weights)
    sigma = 0.4
    x = jax.random.normal(key, (6, 2))
    ref = np.log(
        sum(
            float(w)
            * scipy.stats.multivariate_normal(np.asarray(m), float(s) ** 2 + sigma**2).pdf(
                np.asarray(x)
            )
            for m, s, w in zip(means, stds, weights, strict=True)
        )
    )
    _, ours = _batched(gm, sigma)(x)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
    _grad_check(gm, x, sigma, atol=1e-4)
    # Tweedie: the ideal denoiser of a single Gaussian shrinks towards its mean
    one = GaussianMixture(jnp.array([[1.0, -1.0]]), 0.5)
    d = jax.jit(lambda x: one.denoise(x, 0.5))(jnp.array([3.0, 1.0]))
    np.testing.assert_allclose(d, [2.0, 0.0], rtol=1e-6)


def test_bad_inputs():
    pot = SmoothedCircle()
    with pytest.raises(ValueError, match="sigma -0.1"):
        pot.score(jnp.zeros(2), -0.1)
    with pytest.raises(ValueError, match="sigma 0"):
        pot.log_density(jnp.zeros(2), 0)
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(2,\)"):
        pot.score(jnp.zeros(3), 0.1)
    with pytest.raises(ValueError, match="expected a scalar"):
        pot.score(jnp.zeros(2), jnp.ones(2))
    with pytest.raises(ValueError, match="means of shape"):
        GaussianMixture(jnp.zeros(3))
    with pytest.raises(ValueError, match="weights of shape"):
        GaussianMixture(jnp.zeros((2, 2)), 0.1, jnp.ones(3))
    with pytest.raises(ValueError, match="n 1"):
        SmoothedManifold(get_manifold("torus"), n=1)
