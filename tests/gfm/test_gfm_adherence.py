"""What gfm/sigma_sweep measures adherence with: the discrete action from the score alone
against the exact potential, the true distance at the support check's points, the components
of two moons, the exact potentials' node spacing and the threshold choice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm import _adherence as ad
from geomopt.gfm._exp_protocol import sample_pairs
from geomopt.manifolds import get_manifold


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def discrete_action(paths, pot, sigma, lam):
    k = paths.shape[1]
    kin = 0.5 * jnp.sum((paths[:, 1:] - paths[:, :-1]) ** 2, axis=(1, 2)) * (k - 1) ** 2
    u = jax.vmap(jax.vmap(lambda x: pot.energy(x, sigma)))(paths)
    return np.asarray(kin + lam * u.sum(1))


@pytest.mark.parametrize("name", ["circle", "swiss_roll"])
def test_action_difference_from_the_score_matches_the_exact_potential(name):
    m = get_manifold(name)
    sigma, lam = 0.05, 2.0
    pot, _ = ad.exact_potential(m, sigma)
    x0, x1 = sample_pairs(m, 3, jax.random.key(0))
    chord = gfm.straight_line(jnp.asarray(x0), jnp.asarray(x1), 10)
    along = gfm.coordinate_linear(m, x0, x1, 10)
    got = ad.action_difference(chord, along, gfm.ScoreAt(pot, sigma), lam)
    want = discrete_action(chord, pot, sigma, lam) - discrete_action(along, pot, sigma, lam)
    # the quadrature nodes are float32: relative 1e-3 of the action's scale
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    assert np.abs(want).max() > 1.0  # the chords cut the data: a real difference


def test_distance_profile_sees_the_midpoint_of_a_chord_through_the_circle():
    m = get_manifold("circle")
    path = jnp.asarray([[[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]])  # waypoints on the circle
    prof = ad.distance_profile(m, path)
    assert prof.shape == (1, 5)
    np.testing.assert_allclose(prof[0, ::2], 0.0, atol=1e-12)
    np.testing.assert_allclose(prof[0, 1], 1.0)  # the midpoint (0, 0) is 1 from the circle
    np.testing.assert_allclose(ad.true_max_distance(m, path), [1.0])
    nan_path = path.at[0, 1, 0].set(jnp.nan)
    assert np.isnan(ad.true_max_distance(m, nan_path)).all()


def test_components_of_two_moons_and_of_connected_manifolds():
    m = get_manifold("two_moons")
    outer = jax.vmap(m.embed)(jnp.asarray([[0.3], [2.0]]))
    inner = jax.vmap(m.embed)(jnp.asarray([[2 * np.pi + 0.3], [2 * np.pi + 2.0]]))
    assert ad.components(m, jnp.concatenate([outer, inner])).tolist() == [0, 0, 1, 1]
    torus = get_manifold("torus")
    x, _ = sample_pairs(torus, 4, jax.random.key(1))
    assert ad.components(torus, x).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("name", ["torus", "two_moons"])
def test_exact_potential_node_spacing_follows_sigma(name):
    from scipy.spatial import cKDTree

    m = get_manifold(name)
    for sigma in (0.1, 0.05):
        pot, n = ad.exact_potential(m, sigma)
        nodes = np.asarray(pot.nodes, float)
        assert n == len(nodes)
        d, _ = cKDTree(nodes).query(nodes, k=2)
        s = np.sqrt(sigma**2 + m.default_noise**2)
        assert d[:, 1].max() <= ad.NODE_SPACING * s * 1.05


def test_exact_potential_is_closed_form_on_the_circle_and_sphere():
    from geomopt.diffusion import SmoothedCircle, SmoothedSphere

    assert isinstance(ad.exact_potential(get_manifold("circle"), 0.05)[0], SmoothedCircle)
    pot, n = ad.exact_potential(get_manifold("sphere"), 0.05)
    assert isinstance(pot, SmoothedSphere) and n == 0 and pot.data_noise == 0.01


def test_flag_errors_and_the_threshold_with_the_widest_margin():
    e = ad.flag_errors([True, False, True, True], [True, True, False, False])
    assert (e["fp"], e["fn"], e["n_on"], e["n_off"]) == (1, 2, 2, 2)
    assert e["false_positive"] == 0.5 and e["false_negative"] == 1.0 and e["error"] == 0.75
    assert np.isnan(ad.flag_errors([True], [True])["false_negative"])
    grid = np.arange(0.5, 6.01, 0.5)
    # on paths up to 1.0, off from 3.0 (and one NaN, off): every value in [1, 2.5] separates
    thr, errors = ad.choose_threshold([0.4, 1.0, 3.0, 4.5, np.nan], [1, 1, 0, 0, 0], grid)
    assert errors == 0 and thr == pytest.approx(1.5)  # the middle of 1.0 ... 2.5
    thr, errors = ad.choose_threshold([0.4, 2.0, 1.5], [1, 0, 1], grid)
    assert errors == 0 and 1.5 <= thr < 2.0


def test_insert_midpoints_keeps_the_waypoints():
    path = jnp.arange(12.0).reshape(1, 4, 3)
    fine = ad.insert_midpoints(path)
    assert fine.shape == (1, 7, 3)
    np.testing.assert_allclose(fine[:, ::2], path)
