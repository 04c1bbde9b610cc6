"""The support check of ``gfm.solve``'s report: a converged path that jumps the swiss roll's gap
is flagged off the support, an on-surface path is not, batches and single pairs agree, a score
without a known noise level says "unknown", and a new sigma does not recompile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import SmoothedCircle, SmoothedManifold
from geomopt.gfm import baselines as bl
from geomopt.gfm._exp_protocol import sample_pairs
from geomopt.manifolds import get_manifold

SIGMA = 0.05  # node spacing of the n=48 quadrature is ~2 sigma: ripple along the roll ~2 %


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def roll():
    m = get_manifold("swiss_roll")
    with jax.enable_x64(True):
        x0, x1 = sample_pairs(m, 4, jax.random.key(0))
    return m, SmoothedManifold(m, n=48), x0, x1


def true_max_distance(manifold, paths):
    pts = gfm.support_points(jnp.asarray(paths))
    return np.asarray(jax.vmap(jax.vmap(manifold.distance))(pts)).max(-1)


def test_support_points_interleave_waypoints_and_midpoints():
    path = jnp.arange(8.0).reshape(4, 2)
    pts = gfm.support_points(path)
    np.testing.assert_allclose(pts[::2], path)
    np.testing.assert_allclose(pts[1::2], 0.5 * (path[1:] + path[:-1]))
    batch = gfm.support_points(jnp.stack([path, path + 1]))
    assert batch.shape == (2, 7, 2)
    np.testing.assert_allclose(batch[1], pts + 1)


def test_profile_is_the_tweedie_displacement_in_units_of_sigma(roll):
    m, pot, x0, x1 = roll
    path = gfm.straight_line(jnp.asarray(x0[0]), jnp.asarray(x1[0]), 12)
    prof = gfm.support_profile(path, gfm.ScoreAt(pot, SIGMA), SIGMA)
    pts = gfm.support_points(path)
    disp = jnp.linalg.norm(jax.vmap(lambda x: pot.denoise(x, SIGMA))(pts) - pts, axis=-1)
    np.testing.assert_allclose(prof, disp / SIGMA, rtol=1e-5)


def test_a_converged_gap_jump_is_flagged_and_an_on_surface_path_is_not(roll):
    m, pot, x0, x1 = roll
    paths, rep = gfm.solve(x0, x1, score=gfm.ScoreAt(pot, SIGMA), n_points=30)
    truth_off = true_max_distance(m, paths) > 0.1
    assert rep.converged.all()
    # these pairs: two jump a gap between turns (the midpoint ~0.3 from the surface), two stay
    assert truth_off.tolist() == [True, False, False, True]
    assert rep.on_support.tolist() == (~truth_off).tolist()
    assert rep.support == ["off", "on", "on", "off"]
    assert rep.support_max[truth_off].min() > 3 * rep.support_max[~truth_off].max()
    assert rep.support_sigma == pytest.approx(SIGMA)
    assert rep.support_threshold == gfm.DEFAULT_SUPPORT_THRESHOLD
    # "converged" keeps its meaning; the reason says the rest
    assert "but OFF THE DATA SUPPORT" in rep.reason[0] and rep.reason[0].startswith("converged")
    assert rep.reason[1] == gfm.REASONS[0]
    assert "OFF THE DATA SUPPORT" in str(rep[3]) and "[support off]" in str(rep).splitlines()[0]


def test_batched_and_single_solves_agree(roll):
    m, pot, x0, x1 = roll
    score = gfm.ScoreAt(pot, SIGMA)
    _, rep = gfm.solve(x0, x1, score=score, n_points=30)
    for i in range(len(x0)):
        _, one = gfm.solve(x0[i], x1[i], score=score, n_points=30)
        assert bool(one.on_support) == bool(rep.on_support[i]) == bool(rep[i].on_support)
        assert one.support == rep.support[i] == rep[i].support
        np.testing.assert_allclose(one.support_max, rep.support_max[i], rtol=1e-6)
        assert int(one.support_where) == int(rep[i].support_where)


def test_a_plain_score_without_sigma_is_unknown_not_true(roll):
    m, pot, x0, x1 = roll
    plain = lambda x: pot.score(x, SIGMA)  # noqa: E731
    _, rep = gfm.solve(x0[:2], x1[:2], score=plain, n_points=30)
    assert rep.on_support is None and rep.support == ["unknown", "unknown"]
    assert rep[0].on_support is None and rep[0].support == "unknown"
    assert "support not checked" in rep.reason[0] and "support_sigma" in rep.support_note
    _, known = gfm.solve(x0[:2], x1[:2], score=plain, n_points=30, support_sigma=SIGMA)
    _, bound = gfm.solve(x0[:2], x1[:2], score=gfm.ScoreAt(pot, SIGMA), n_points=30)
    np.testing.assert_allclose(known.support_max, bound.support_max, rtol=1e-6)
    assert known.support == ["off", "on"]
    _, none = gfm.solve(x0[0], x1[0], score=None, n_points=30)
    assert none.support == "unknown" and "no score" in none.reason
    with pytest.raises(ValueError, match="support_sigma"):
        gfm.solve(x0[0], x1[0], score=plain, n_points=30, support_sigma=-1.0)
    with pytest.raises(ValueError, match="support_threshold"):
        gfm.solve(x0[0], x1[0], score=plain, n_points=30, support_threshold=0.0)


def test_the_threshold_decides_and_other_backends_check_too(roll):
    m, pot, x0, x1 = roll
    score = gfm.ScoreAt(pot, SIGMA)
    _, rep = gfm.solve(x0, x1, score=score, n_points=30)
    high = float(rep.support_max.max()) * 1.01
    _, lax = gfm.solve(x0, x1, score=score, n_points=30, support_threshold=high)
    assert lax.on_support.all() and lax.support_threshold == pytest.approx(high)
    # the matrix-free backend and the baselines' energy minimiser (a cheap closed-form score:
    # the circle's, two points a quarter turn apart)
    circle = gfm.ScoreAt(SmoothedCircle(1.0, 0.01), SIGMA)
    a, b = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [-1.0, 0.0]])
    _, free = gfm.solve(a, b, score=circle, n_points=12, backend="matrix_free")
    assert free.method == "matrix_free" and free.support == ["on", "on"]
    energy = bl.SteinEnergy(score=circle)
    _, chord = bl.minimise_energy(energy, a[0], b[0], n_points=12, max_iters=1, score=circle)
    assert chord.support == "off" and chord.support_where % 2 == 1  # the chord's middle
    _, blind = bl.minimise_energy(energy, a[0], b[0], n_points=12, max_iters=1)
    assert blind.support == "unknown"


def test_a_new_sigma_does_not_recompile(roll, compiles):
    m, pot, x0, x1 = roll
    plain = lambda x: pot.score(x, SIGMA)  # noqa: E731
    gfm.solve(x0, x1, score=gfm.ScoreAt(pot, SIGMA), n_points=30)
    gfm.solve(x0, x1, score=plain, n_points=30, support_sigma=SIGMA)
    with compiles() as log:
        _, a = gfm.solve(x0, x1, score=gfm.ScoreAt(pot, 0.04), n_points=30)
        _, b = gfm.solve(x0, x1, score=plain, n_points=30, support_sigma=0.5)
    assert log.names == []
    assert a.support_sigma == pytest.approx(0.04) and b.support_sigma == pytest.approx(0.5)
