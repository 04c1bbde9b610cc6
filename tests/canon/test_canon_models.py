"""Point-cloud classifiers: invariances, point dropout, training, vmapped seeds, bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.canon._classify import TrainConfig, accuracy, train_models
from geomopt.canon._models import (
    CanonMLP,
    DeepSets,
    GroupAveraged,
    ModelConfig,
    make_model,
    point_dropout,
)

P, D, C = 6, 3, 3
CFG = ModelConfig(width=16, n_blocks=1, n_fourier=4, fourier_scale=1.0, dropout=0.2, n_perms=4)


@pytest.fixture
def cloud():
    return jax.random.uniform(jax.random.key(3), (P, D))


def _perm(seed=1):
    return np.random.default_rng(seed).permutation(P)


def test_deepsets_invariant(key, cloud):
    m = DeepSets(P, D, C, CFG, key=key)
    np.testing.assert_allclose(m(cloud), m(cloud[_perm()]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", ["lex", "hilbert", "morton"])
def test_canonized_invariant_for_distinct_points(key, cloud, order):
    m = CanonMLP(P, D, C, CFG, order=order, key=key)
    np.testing.assert_array_equal(m(cloud), m(cloud[_perm()]))


def test_unsorted_not_invariant(key, cloud):
    m = make_model("unsorted", P, D, C, CFG, key=key)
    assert not np.allclose(m(cloud), m(cloud[_perm()]), atol=1e-4)


def test_group_average_over_all_permutations_is_invariant(key):
    p = 3
    x = jax.random.uniform(jax.random.key(5), (p, 2))
    base = CanonMLP(p, 2, C, CFG, order="identity", key=key)
    perms = jnp.array(list(itertools.permutations(range(p))))

    def full_avg(c):
        return jnp.mean(jax.vmap(lambda q: base(c[q]))(perms), axis=0)

    np.testing.assert_allclose(full_avg(x), full_avg(x[jnp.array([2, 0, 1])]), atol=1e-5)
    # the Monte-Carlo model with large K approaches the full group average (within 5 standard
    # errors of the permutation-sample mean)
    k = 200
    gk = GroupAveraged(p, 2, C, ModelConfig(**{**CFG.__dict__, "n_perms": k}), key=key)
    sd = np.asarray(jnp.std(jax.vmap(lambda q: base(x[q]))(perms), axis=0))
    np.testing.assert_array_less(np.abs(np.asarray(gk(x) - full_avg(x))), 5 * sd / np.sqrt(k))
    # and its eval output is deterministic
    np.testing.assert_array_equal(gk(x), gk(x))


def test_point_dropout_drops_whole_points_only_in_training(key):
    h = jnp.ones((50, 7))
    out = point_dropout(h, 0.5, key)
    rows = np.asarray(out)
    assert all(np.all(r == 0) or np.allclose(r, 2.0) for r in rows)
    assert 5 < int((rows[:, 0] == 0).sum()) < 45
    np.testing.assert_array_equal(point_dropout(h, 0.5, None), h)
    m = CanonMLP(P, D, C, CFG, order="hilbert", key=key)
    x = jax.random.uniform(jax.random.key(1), (P, D))
    np.testing.assert_array_equal(m(x), m(x))  # no key: deterministic (eval)
    assert not np.allclose(m(x, key=jax.random.key(2)), m(x, key=jax.random.key(3)))


def _easy_problem(n, p=8):
    rng = np.random.default_rng(0)
    y = (np.arange(n) % 2).astype(np.int32)
    centre = np.where(y[:, None, None] == 0, 0.25, 0.75)
    x = centre + 0.05 * rng.standard_normal((n, p, 2))
    # a third class-independent cloud anchor so per-axis normalisation keeps the class signal
    x[:, 0] = np.where(y[:, None] == 0, 1.0, 0.0)
    return x.astype(np.float32), y


TINY = TrainConfig(
    steps=60,
    batch=16,
    use_order_presets=False,
    model=ModelConfig(width=16, n_blocks=1, n_fourier=4, fourier_scale=1.0, lr=3e-3, n_perms=2),
)


@pytest.mark.slow  # ~20-60 s of compilation on the shared 2-core machine
def test_training_beats_chance_and_vmapped_seeds_equal_separate_runs():
    # one compilation serves all three runs (same kind, shapes and number of seeds)
    x, y = _easy_problem(64)
    models, losses = train_models("lex", x, y, 2, TINY, [0, 1], n_train=48)
    assert np.all(np.asarray(losses[:, -10:].mean(1)) < np.asarray(losses[:, :5].mean(1)))
    assert np.all(accuracy(models, x[48:], y[48:]) > 0.8)
    # seed 1 trained next to seed 0 == seed 1 trained next to seed 2
    _, other = train_models("lex", x, y, 2, TINY, [1, 2], n_train=48)
    np.testing.assert_allclose(losses[1], other[0], rtol=1e-4, atol=1e-5)
    assert not np.allclose(losses[0], other[1])


def test_bad_input(key, cloud):
    m = CanonMLP(P, D, C, CFG, order="lex", key=key)
    with pytest.raises(ValueError, match="expected one cloud"):
        m(jnp.zeros((2, P, D)))
    with pytest.raises(ValueError, match="expected one cloud"):
        DeepSets(P, D, C, CFG, key=key)(jnp.zeros((P, D + 1)))
    with pytest.raises(ValueError, match="order 'zorder'"):
        CanonMLP(P, D, C, CFG, order="zorder", key=key)
    with pytest.raises(ValueError, match="n_perms"):
        GroupAveraged(P, D, C, ModelConfig(n_perms=0), key=key)
    with pytest.raises(ValueError, match="model kind"):
        make_model("pointnet", P, D, C, CFG, key=key)
    with pytest.raises(ValueError, match="n_train"):
        train_models("lex", np.zeros((4, P, D)), np.zeros(4, int), C, TINY, [0], n_train=9)
