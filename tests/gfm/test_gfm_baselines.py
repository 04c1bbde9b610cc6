"""Baselines: interpolation, fitted metrics, and energy minimisation with known answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm import baselines as bl


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def unit_circle_data(n=400, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.cos(t), np.sin(t)], 1) + noise * rng.normal(size=(n, 2))


def test_spherical_interpolation_is_a_constant_speed_great_circle():
    a, b = jnp.array([2.0, 0.0, 0.0]), jnp.array([0.0, 0.0, 2.0])
    path = bl.spherical(a, b, 9)
    np.testing.assert_allclose(jnp.linalg.norm(path, axis=1), 2.0, rtol=1e-12)
    np.testing.assert_allclose(path[4], [np.sqrt(2), 0.0, np.sqrt(2)], rtol=1e-12)
    np.testing.assert_allclose(bl.linear(a, b, 3)[1], [1.0, 0.0, 1.0])


def test_fitted_land_metric():
    # (the RBF fit: test_gfm_protocol.py and the two-cluster test below)
    data = unit_circle_data()
    land = bl.fit_land(data)
    d = np.sqrt(((data[:, None] - data[None]) ** 2).sum(-1))
    np.testing.assert_allclose(float(land.gamma), np.median(d[np.triu_indices(len(data), 1)]) / 3)
    g_on, g_off = land.diagonal(jnp.array([1.0, 0.0])), land.diagonal(jnp.array([0.0, 0.0]))
    assert float(g_on[0]) > float(g_off[0])  # moving across the data costs more than in the hole


def test_official_rbf_fit_on_two_clusters_matches_its_formulas_and_least_squares():
    # Two far-apart blobs, two centres: k-means finds the blobs, so the centres are the blob
    # means, sigma_k = sqrt(sum_d var_kd) + 1e-5, lam_k = 0.5 / (kappa sigma_k)^2 and
    # h(x) = sum_k W_k exp(-0.5 lam_k |x - c_k|^2); W (unconstrained) minimises
    # mean_n (1 - h(x_n))^2, a linear least-squares problem whose solution lstsq gives.
    rng = np.random.default_rng(0)
    blobs = [rng.normal(size=(200, 2)) * [0.5, 0.3] + c for c in ([-6.0, 0.0], [6.0, 0.0])]
    data = np.concatenate(blobs)
    kappa = 2.0
    rbf = bl.fit_rbf_official(data, n_centers=2, kappa=kappa, fit_iters=4000, lr=1e-2)
    order = np.argsort(np.asarray(rbf.centers)[:, 0])
    centers = np.asarray(rbf.centers)[order]
    np.testing.assert_allclose(centers, [b.mean(0) for b in blobs], rtol=1e-10, atol=1e-12)
    sig = np.array([np.sqrt(b.var(0).sum()) + 1e-5 for b in blobs])
    lam = 0.5 / (kappa * sig) ** 2
    np.testing.assert_allclose(np.asarray(rbf.bandwidths)[order], 0.5 * lam, rtol=1e-10)
    phi = np.exp(-0.5 * lam[None] * ((data[:, None] - centers[None]) ** 2).sum(-1))
    w_ls = np.linalg.lstsq(phi, np.ones(len(data)), rcond=None)[0]
    np.testing.assert_allclose(np.asarray(rbf.weights)[order], w_ls, rtol=0.03)
    h = jax.vmap(rbf.h)(jnp.asarray(data))
    np.testing.assert_allclose(h, phi @ w_ls, atol=0.05)


def test_stein_energy_without_score_gives_the_straight_line():
    x0, x1 = jnp.array([0.0, 0.0]), jnp.array([1.0, 2.0])
    line = bl.linear(x0, x1, 10)
    bump = jnp.sin(jnp.linspace(0, np.pi, 10))[:, None] * jnp.array([[0.4, -0.3]])
    energy = bl.SteinEnergy(lambda x: jnp.zeros_like(x))
    path, rep = bl.minimise_energy(energy, x0, x1, n_points=10, init=line + bump)
    assert rep.converged, rep.reason
    np.testing.assert_allclose(path, line, atol=1e-6)
    # The discrete energy of a straight line: K-1 segments of |x1-x0|^2/(K-1)^2 over dt.
    np.testing.assert_allclose(bl.path_energy(energy, line), 5.0, rtol=1e-12)


def test_density_conformal_energy_pulls_the_path_to_the_data():
    sigma = 0.2

    def log_p(x):  # smoothed unit circle up to a constant (radial Gaussian shell)
        return -((jnp.sqrt(x @ x) - 1.0) ** 2) / (2 * sigma**2)

    x0, x1 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    energy = bl.DensityConformalEnergy(log_p)
    path, rep = bl.minimise_energy(energy, x0, x1, n_points=16)
    assert rep.converged, rep.reason
    line = bl.linear(x0, x1, 16)
    assert float(bl.path_energy(energy, path)) < float(bl.path_energy(energy, line))
    off = lambda p: float(jnp.max(jnp.abs(jnp.linalg.norm(p, axis=1) - 1)))  # noqa: E731
    assert off(path) < 0.5 * off(line)
    m = gfm.path_metrics(path, log_density=log_p)
    assert float(m["log_density_min"]) > float(
        gfm.path_metrics(line, log_density=log_p)["log_density_min"]
    )


def test_official_adam_path_reports_the_residual_and_straightens_a_forceless_path():
    """With no force the GFM residual is the acceleration: the official latent Adam starts
    from the initial path's residual, decreases it, and ends near the straight line."""
    from geomopt.gfm import gfm_residual, straight_line

    d, k = 6, 10
    x0, x1 = jnp.zeros(d), jnp.ones(d)
    bump = jnp.sin(jnp.pi * jnp.linspace(0.0, 1.0, k))[:, None] * jnp.linspace(-1, 1, d)[None]
    path0 = straight_line(x0, x1, k) + 0.3 * bump
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    path, hist, final = jax.jit(
        lambda p: bl.official_adam_path(p, score=zero, lr=0.01, iters=600, residual="euclidean")
    )(path0)
    w0 = gfm_residual(path0, lam=1.0, score=zero, kind="euclidean")
    assert hist.shape == (600,)
    np.testing.assert_allclose(hist[0], np.sqrt(np.mean(np.sum(w0**2, -1))), rtol=1e-5)
    assert float(final) < 0.05 * float(hist[0])
    np.testing.assert_array_equal(np.asarray(path)[[0, -1]], np.asarray(path0)[[0, -1]])
    assert float(jnp.max(jnp.abs(path - straight_line(x0, x1, k)))) < 0.1 * 0.3
