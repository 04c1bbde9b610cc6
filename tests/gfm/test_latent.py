"""The official latent pipeline (``geomopt.gfm.latent``): EDM Heun denoising against the exact
probability-flow solution of a Gaussian, McCann interpolation of a translated set, the
pipeline end to end for every method, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.diffusion import GaussianMixture
from geomopt.gfm import latent

SHAPE = (16, 4)


def shaped(mixture):
    """A denoiser on latents of shape SHAPE from a mixture on the flattened latent."""

    def denoiser(z, sigma):
        return mixture.denoise(z.reshape(-1), sigma).reshape(z.shape)

    return denoiser


def test_heun_sigmas_follow_edm():
    s = latent.heun_sigmas(0.3, 5)
    assert s.shape == (6,) and s[-1] == 0.0
    np.testing.assert_allclose(s[[0, 4]], [0.3, 0.002])
    assert np.all(np.diff(s) < 0)
    with pytest.raises(ValueError, match="num_steps=1"):
        latent.heun_sigmas(0.3, 1)
    with pytest.raises(ValueError, match="sigma_start=0.001"):
        latent.heun_sigmas(0.001, 5)


def test_heun_denoise_matches_the_exact_flow_of_a_gaussian():
    # Data N(mu, s0^2 I): the PF-ODE is x(sigma) = mu + (x(sigma_0) - mu) r(sigma) with
    # r = sqrt((s0^2 + sigma^2) / (s0^2 + sigma_0^2)), and the last step D(x, sigma_min) is exact.
    d, s0, sigma0 = 8, 0.5, 0.3
    mu = jnp.linspace(-1.0, 1.0, d)
    gm = GaussianMixture(mu[None], stds=s0)
    x = mu + jax.random.normal(jax.random.key(0), (d,))
    errors = []
    for n in (5, 10, 20):
        sig = latent.heun_sigmas(sigma0, n)
        out = latent.heun_denoise(gm.denoise, x, sig)
        x_min = mu + (x - mu) * np.sqrt((s0**2 + sig[-2] ** 2) / (s0**2 + sigma0**2))
        exact = mu + (x_min - mu) * s0**2 / (s0**2 + sig[-2] ** 2)
        errors.append(float(jnp.max(jnp.abs(out - exact))))
    # Heun is second order: the official 5 steps are within 2e-2, and doubling the steps cuts
    # the error about 4x.
    assert errors[0] < 2e-2 and errors[2] < 1e-3, errors
    assert 3.0 < errors[1] / errors[2] < 5.0, errors
    # It moves the point: the exact answer is not the input.
    assert float(jnp.max(jnp.abs(exact - x))) > 1e-2


def test_mccann_of_a_translated_set_moves_every_point_halfway():
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-3, 3, size=(12, 2)).astype(np.float32)
    shift = np.array([0.2, -0.1], np.float32)
    x1 = (x0 + shift)[rng.permutation(12)]
    path = np.asarray(latent.mccann_path(x0, x1, 5, eps_scale=0.001))
    assert path.shape == (5, 12, 2)
    np.testing.assert_allclose(path[0], x0)
    np.testing.assert_allclose(path[-1], x1)
    np.testing.assert_allclose(path[2], x0 + shift / 2, atol=1e-3)


def test_slerp_and_linear_paths_keep_the_latent_shape():
    a = np.ones(SHAPE, np.float32)
    b = -np.arange(64, dtype=np.float32).reshape(SHAPE)
    lin = latent.linear_path(a, b, 10)
    sl = latent.slerp_path(a, b, 10)
    assert lin.shape == sl.shape == (10, *SHAPE)
    np.testing.assert_allclose(np.asarray(lin)[[0, -1]], np.stack([a, b]))
    np.testing.assert_allclose(np.asarray(sl)[[0, -1]], np.stack([a, b]), rtol=1e-6)


@pytest.fixture(scope="module")
def mixture():
    return GaussianMixture(2.0 * jax.random.normal(jax.random.key(3), (4, 64)), stds=0.05)


@pytest.mark.parametrize("method", latent.METHODS)
def test_pipeline_runs_every_method(mixture, method):
    den = shaped(mixture)
    z0, z1 = (np.asarray(mixture.means[i]).reshape(SHAPE) for i in (0, 1))
    out = latent.interpolate(
        z0,
        z1,
        denoiser=den,
        method=method,
        key=jax.random.key(1),
        decode=lambda z: float(jnp.sum(z)),
        max_iters=None if method == "gfm" else 20,
    )
    assert out.clean.shape == out.path.shape == (10, *SHAPE)
    assert len(out.decoded) == 10 and np.isfinite(np.asarray(out.clean)).all()
    np.testing.assert_allclose(np.asarray(out.path)[[0, -1]], np.asarray(out.endpoints), atol=1e-5)
    if method == "gfm":
        assert out.report.converged, out.report.reason
    if method in ("gfm", "gfm_adam", "seq_gfm"):
        # Endpoints were noised at sigma 0.3; the probability-flow ODE of a component of std
        # 0.05 maps them to 0.05 / sqrt(0.05^2 + 0.3^2) = 0.16 of that distance from its mean.
        noisy = np.asarray(out.endpoints)
        clean = np.asarray(out.clean)[[0, -1]]
        ref = np.stack([z0, z1])
        assert np.linalg.norm(clean - ref) < 0.5 * np.linalg.norm(noisy - ref)
    else:
        np.testing.assert_allclose(np.asarray(out.endpoints), np.stack([z0, z1]))


def test_sequential_warm_start_with_no_force_refines_to_the_straight_line():
    x0 = np.linspace(0.0, 1.0, 6).astype(np.float32)
    x1 = -x0 + 2.0
    path, rep = latent.sequential_warm_start(
        x0, x1, score=lambda x: jnp.zeros_like(x), max_iters=50, refine="matrix_free", tol=1e-4
    )
    assert rep.converged, rep.reason
    np.testing.assert_allclose(
        np.asarray(path), np.asarray(latent.linear_path(x0, x1, 10)), atol=1e-4
    )


@pytest.mark.parametrize(
    ("x0", "x1", "kwargs", "match"),
    [
        (np.ones(SHAPE), np.ones((4, 16)), {}, r"shapes \(16, 4\) and \(4, 16\)"),
        (np.ones(SHAPE, np.int32), np.ones(SHAPE, np.int32), {}, "latent x0 has dtype int32"),
        (np.ones(SHAPE, np.float32), np.ones(SHAPE), {}, "dtypes float32 and float64"),
        (np.full(SHAPE, np.nan), np.ones(SHAPE), {}, r"latent x0 has a non-finite entry nan"),
        (np.ones(SHAPE), np.ones(SHAPE), {"method": "rbf"}, "method 'rbf'"),
        (np.ones(SHAPE), np.ones(SHAPE), {"sigma": -0.3}, "sigma=-0.3"),
        (np.ones(SHAPE), np.ones(SHAPE), {"key": None}, "needs a PRNG `key`"),
        (np.ones((2, 2, 2)), np.ones((2, 2, 2)), {"method": "mccann"}, r"expected \(N, C\)"),
        (np.ones(SHAPE), np.ones(SHAPE), {"denoiser": "edm"}, "denoiser must be a callable"),
    ],
)
def test_bad_input_names_the_value(x0, x1, kwargs, match):
    args = {"denoiser": lambda z, s: z, "key": jax.random.key(0)} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        latent.interpolate(x0, x1, **args)
