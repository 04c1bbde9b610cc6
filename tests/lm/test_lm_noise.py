"""Noise density: Welford variance and phi on constructed cases with known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.lm import noise_density, welford_variance


def test_phi_closed_forms():
    d = 1000
    one_hot = {"a": jnp.zeros(d).at[3].set(4.0)}
    assert noise_density(one_hot)["phi"] == pytest.approx(1 / d)  # maximally sparse
    assert noise_density({"a": jnp.full(d, 2.5)})["phi"] == pytest.approx(1.0)  # isotropic
    sigma = np.arange(1.0, 11.0)
    expected = sigma.sum() ** 2 / (10 * np.square(sigma).sum())
    var = {"w": jnp.asarray(sigma[:4] ** 2), "b": jnp.asarray(sigma[4:] ** 2)}
    groups = {"w": "matrix", "b": "vector"}
    out = noise_density(var, groups)
    assert out["phi"] == pytest.approx(expected, rel=1e-12)
    s = sigma[:4]
    assert out["phi/matrix"] == pytest.approx(s.sum() ** 2 / (4 * np.square(s).sum()), rel=1e-12)
    assert noise_density({"a": jnp.asarray([-1e-9, 4.0])})["phi"] == pytest.approx(0.5)


def test_welford_variance_exact_on_symmetric_samples():
    """Samples mu +- sigma (K = 2) have population variance exactly sigma^2; the large mean
    (1e4) breaks the naive E[g^2] - E[g]^2 in float32 but not Welford's recurrence."""
    sigma = jnp.asarray([0.0, 0.5, 1.0, 2.0, 0.25])
    mu = 1e4 + jnp.arange(5.0)
    signs = jnp.asarray([1.0, -1.0])

    def sample(s, scale):
        return {"g": mu + s * scale * sigma}

    mean, var = jax.jit(welford_variance, static_argnums=0)(sample, signs, jnp.float32(1.0))
    np.testing.assert_allclose(np.asarray(mean["g"]), np.asarray(mu), rtol=1e-7)
    np.testing.assert_allclose(np.asarray(var["g"]), np.asarray(sigma**2), atol=1e-3)
    naive = jnp.mean(jnp.square(mu[None] + signs[:, None] * sigma[None]), 0) - jnp.square(mu)
    assert np.abs(np.asarray(naive) - np.asarray(sigma**2)).max() > 1.0
    phi = noise_density(var)["phi"]
    s = np.asarray(sigma, np.float64)
    assert phi == pytest.approx(s.sum() ** 2 / (5 * np.square(s).sum()), rel=1e-3)


def test_welford_variance_matches_numpy_on_random_samples(key):
    xs = jax.random.normal(key, (64, 7)) * jnp.arange(1.0, 8.0)[None] + 3.0
    _, var = welford_variance(lambda x: {"x": x}, xs)
    np.testing.assert_allclose(np.asarray(var["x"]), np.var(np.asarray(xs), axis=0), rtol=1e-5)
