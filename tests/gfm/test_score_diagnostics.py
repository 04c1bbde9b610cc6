"""gfm.score_diagnostics: the three official diagnostics against closed forms (an isotropic
Gaussian's score), the decomposition's geometry, the plane's coordinates, any model with
``score(x, sigma)`` (an EDM denoiser in 16-D), bad input; and the experiment's validation."""

import dataclasses

import jax
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import DenoiserConfig, EDMDenoiser
from geomopt.gfm import exp_score_diagnostics

MU = np.array([0.3, -0.2, 0.5])
S0 = 0.4


def gaussian_score(x, sigma):
    """Score of N(MU, S0^2 I) smoothed at sigma: -(x - MU) / (S0^2 + sigma^2)."""
    return -(x - MU) / (S0**2 + sigma**2)


def test_heat_map_and_decomposition_match_the_gaussian_closed_form():
    x0, x1 = np.array([1.0, 0.0, 0.0]), np.array([-1.0, 1.0, 0.5])
    sigmas = (0.1, 0.3, 0.9)
    d = gfm.score_diagnostics(gaussian_score, x0, x1, sigma=0.3, sigmas=sigmas, n_points=7)
    a = np.linspace(0, 1, 7)
    pts = (1 - a)[:, None] * x0 + a[:, None] * x1
    for i, s in enumerate(sigmas):
        want = s * np.linalg.norm(pts - MU, axis=1) / (S0**2 + s**2)
        np.testing.assert_allclose(d.force_norm[i], want, rtol=1e-5)
        np.testing.assert_allclose(d.forces[i], -s * (pts - MU) / (S0**2 + s**2), rtol=1e-5,
                                   atol=1e-7)  # fmt: skip
    f = -0.3 * (pts - MU) / (S0**2 + 0.09)
    e1 = (x1 - x0) / np.linalg.norm(x1 - x0)
    np.testing.assert_allclose(d.tangential, f @ e1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(d.normal, np.linalg.norm(f - np.outer(f @ e1, e1), axis=1),
                               rtol=1e-5, atol=1e-7)  # fmt: skip
    np.testing.assert_allclose(d.tangential**2 + d.normal**2, d.total**2, rtol=1e-5)
    assert 0 <= d.normal_fraction <= 1


def test_a_score_along_the_path_has_no_normal_part():
    """Data centred on the chord's line: the force on the chord points along it."""
    x0, x1 = MU - np.array([1.0, 0, 0]), MU + np.array([1.0, 0, 0])
    d = gfm.score_diagnostics(gaussian_score, x0, x1, sigma=0.2, sigmas=(0.2,), n_points=5)
    np.testing.assert_allclose(d.normal, 0, atol=1e-6)
    assert d.normal_fraction < 1e-10


def test_plane_puts_the_pair_at_plus_minus_one_and_projects_the_force():
    x0, x1 = np.array([0.0, 0.0, 1.0]), np.array([2.0, 0.0, 1.0])
    d = gfm.score_diagnostics(gaussian_score, x0, x1, sigma=0.5, sigmas=(0.5,), grid_size=3,
                              extent=1.0, key=3)  # fmt: skip
    pl = d.plane
    np.testing.assert_allclose(pl.points[0, 1], x0, atol=1e-6)
    np.testing.assert_allclose(pl.points[2, 1], x1, atol=1e-6)
    assert abs(pl.e1 @ pl.e2) < 1e-6 and abs(np.linalg.norm(pl.e2) - 1) < 1e-6
    f = np.asarray(gfm.score_force(gaussian_score, pl.points, 0.5))
    np.testing.assert_allclose(pl.f_u, f @ pl.e1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pl.f_v, f @ pl.e2, rtol=1e-5, atol=1e-7)
    assert np.all(pl.f_norm + 1e-6 >= np.hypot(pl.f_u, pl.f_v))
    other = gfm.score_diagnostics(gaussian_score, x0, x1, sigma=0.5, sigmas=(0.5,),
                                  grid_size=3, extent=1.0, key=4)  # fmt: skip
    assert not np.allclose(other.plane.e2, pl.e2)  # the key draws the second direction


def test_force_is_sigma_times_score_for_a_denoiser_in_16d():
    """Any model with score(x, sigma): force = (D - x) / sigma, the official definition."""
    model = EDMDenoiser(16, DenoiserConfig(width=16, n_blocks=1, embed_dim=8),
                        key=jax.random.key(0))  # fmt: skip
    x = np.asarray(jax.random.normal(jax.random.key(1), (4, 16)))
    f = np.asarray(gfm.score_force(model, x, 0.3))
    want = np.stack([(np.asarray(model.denoise(xi, 0.3)) - xi) / 0.3 for xi in x])
    np.testing.assert_allclose(f, want, rtol=1e-4, atol=1e-5)
    d = gfm.score_diagnostics(model, x[0], x[1], sigma=0.3, sigmas=(0.3, 0.6), n_points=4,
                              grid_size=3)  # fmt: skip
    assert d.force_norm.shape == (2, 4) and d.plane.f_norm.shape == (3, 3)
    assert np.all(np.isfinite(d.force_norm))


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(x1=np.zeros(2)), "x0"),
        (dict(x1=np.array([1.0, 0.0, 0.0])), "distinct"),
        (dict(sigma=0.0), "sigma=0.0"),
        (dict(sigmas=(0.1, -1.0)), r"sigmas\[1\]"),
        (dict(sigmas=()), "sigmas"),
        (dict(n_points=1), "n_points"),
        (dict(grid_size=2.5), "grid_size"),
        (dict(extent=-1.0), "extent"),
    ],
)
def test_bad_input_names_the_value(kw, match):
    args = dict(x1=np.array([0.0, 1.0, 0.0]), sigma=0.1, sigmas=(0.1,))
    args.update(kw)
    x1 = args.pop("x1")
    with pytest.raises(ValueError, match=match):
        gfm.score_diagnostics(gaussian_score, np.array([1.0, 0.0, 0.0]), x1, **args)


def test_a_model_without_a_score_is_named():
    with pytest.raises(TypeError, match="score"):
        gfm.score_force(object(), np.zeros(2), 0.1)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(manifolds=("klein_bottle",)), "manifolds"),
        (dict(n_denoisers=1), "n_denoisers"),
        (dict(sigma=0.2), "sigma"),
        (dict(sigmas=(0.1, -0.3)), "sigmas"),
        (dict(near=0.0), "near"),
    ],
)
def test_experiment_validate_names_the_bad_field(change, field):
    cfg = dataclasses.replace(exp_score_diagnostics.EXPERIMENT.presets["smoke"], **change)
    with pytest.raises(ValueError, match=field):
        exp_score_diagnostics.validate(cfg)


def test_every_preset_is_valid_and_quick_uses_the_official_grid():
    for cfg in exp_score_diagnostics.EXPERIMENT.presets.values():
        exp_score_diagnostics.validate(cfg)
    quick = exp_score_diagnostics.EXPERIMENT.presets["quick"]
    assert quick.sigmas == gfm.DEFAULT_DIAGNOSTIC_SIGMAS
    assert (quick.n_points, quick.grid_size, quick.extent) == (20, 15, 1.5)


@pytest.mark.slow
def test_smoke_preset_runs_and_draws_its_figures(run_smoke, gfm_out):
    outcome = run_smoke(exp_score_diagnostics.EXPERIMENT, gfm_out)
    assert outcome.headline
