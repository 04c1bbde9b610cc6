"""canon/rotated_digits: the averaged and canonized CNNs are invariant to quarter turns (to
float tolerance) and the plain CNN is not; the canonizer's fibres shift cyclically; the
nearest-image distances against a brute-force loop; the experiment's validation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from geomopt.canon import exp_rotated_digits as exp
from geomopt.canon._rotated_cnn import CNN, AveragedCNN, CanonizedCNN, quarter_turns
from geomopt.vision._train import Classifier

X = np.asarray(jax.random.uniform(jax.random.key(0), (6, 20, 20, 1)))


def logits(model, x):
    model.eval()
    return np.asarray(model(jnp.asarray(x)))


@pytest.mark.parametrize("cls, invariant", [(CNN, False), (AveragedCNN, True),
                                            (CanonizedCNN, True)])  # fmt: skip
def test_invariance_to_quarter_turns(cls, invariant):
    model = cls(side=20, channels=4, rngs=nnx.Rngs(0))
    base = logits(model, X)
    changes = [np.max(np.abs(logits(model, quarter_turns(X, k)) - base)) for k in (1, 2, 3)]
    if invariant:
        assert max(changes) < 1e-5 * max(1.0, np.max(np.abs(base)))
    else:
        assert min(changes) > 1e-3


def test_invariance_holds_after_training_too():
    """Training (batch statistics, the straight-through canonizer) keeps the invariance."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, len(X)).astype(np.int32)
    tx = optax.adamw(1e-3)
    for model in (AveragedCNN(side=20, channels=4, rngs=nnx.Rngs(1)),
                  CanonizedCNN(side=20, channels=4, train_canonizer=True, rngs=nnx.Rngs(2))):
        clf = Classifier(model, tx)
        for _ in range(2):
            clf.fit_epoch(X, y, batch_size=3, rng=rng)
        base = clf.logits(X)
        for k in (1, 2, 3):
            np.testing.assert_allclose(clf.logits(np.asarray(quarter_turns(X, k))), base,
                                       atol=1e-4)  # fmt: skip


def test_canonizer_fibres_shift_with_the_turn_and_canonical_images_agree():
    model = CanonizedCNN(side=20, channels=4, rngs=nnx.Rngs(3))
    f = np.asarray(model.canonizer(jnp.asarray(X)))
    can, k = model.canonize(jnp.asarray(X))
    for s in (1, 2, 3):
        xs = quarter_turns(X, s)
        np.testing.assert_allclose(np.asarray(model.canonizer(xs)), np.roll(f, s, axis=-1),
                                   rtol=1e-4, atol=1e-6)  # fmt: skip
        can_s, k_s = model.canonize(xs)
        np.testing.assert_array_equal(np.asarray(k_s), (np.asarray(k) + s) % 4)
        np.testing.assert_allclose(np.asarray(can_s), np.asarray(can), atol=1e-6)


def test_the_official_cnn_shapes():
    """28 x 28: 26, 24, 11, 9, 7, 3 with 32 -> 64 -> 128 channels: 1152 features."""
    model = CNN(rngs=nnx.Rngs(0))
    assert model.head.in_features == 128 * 3 * 3
    with pytest.raises(ValueError, match="side=12"):
        CNN(side=12, rngs=nnx.Rngs(0))


def test_nearest_distances_against_brute_force():
    rng = np.random.default_rng(4)
    test, bank = rng.random((5, 16)), rng.random((7, 3, 16))
    got = exp.nearest_distances(test, bank, chunk=2)
    want = [min(np.sqrt(np.mean((t - b) ** 2)) for b in bank.reshape(-1, 16)) for t in test]
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(data="cifar"), "data"),
        (dict(models=("cnn", "mlp")), "models"),
        (dict(canvas=16), "canvas"),
        (dict(n_train=1500), "n_train"),
        (dict(batch_size=2000), "batch_size"),
        (dict(n_distance=1000), "n_distance"),
        (dict(lr=0.0), "lr"),
    ],
)
def test_validate_names_the_bad_field(change, field):
    cfg = dataclasses.replace(exp.EXPERIMENT.presets["quick"], **change)
    with pytest.raises(ValueError, match=field):
        exp.validate(cfg)


def test_presets_are_valid_and_the_paper_preset_is_the_official_setting():
    for cfg in exp.EXPERIMENT.presets.values():
        exp.validate(cfg)
    paper = exp.EXPERIMENT.presets["paper"]
    assert (paper.data, paper.n_seeds, paper.epochs, paper.batch_size, paper.lr,
            paper.channels, paper.canvas) == ("mnist_rot", 5, 100, 256, 1e-3, 32, 28)  # fmt: skip


def test_digits_splits_are_disjoint_and_rotated():
    cfg = dataclasses.replace(exp.EXPERIMENT.presets["smoke"])
    up = exp.load_splits(cfg, rotated=False)
    rot = exp.load_splits(cfg, rotated=True)
    assert [len(s) for s in up] == [cfg.n_train, cfg.n_val, cfg.n_test]
    np.testing.assert_array_equal(up[0].y, rot[0].y)
    assert not np.allclose(up[0].x, rot[0].x)
