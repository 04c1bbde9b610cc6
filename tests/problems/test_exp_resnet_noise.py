"""signsgd/resnet_noise: ResNet-20's size, the phi estimator against the official formula
(E[g^2] - E[g]^2 over the batches, in float64), the estimator-bias control, the official
optimiser schedule, augmentation, validation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from geomopt.lm._noise import noise_density
from geomopt.problems import exp_resnet_noise as exp
from geomopt.problems._resnet import ResNet20
from geomopt.vision._train import Classifier, cross_entropy


def test_resnet20_has_the_official_parameter_count():
    """conv 3x3x3x16, 9 blocks of two 3x3 convs, two 1x1 shortcuts, 19 batch norms' scale and
    bias on their channels, a 64 x 10 linear layer with bias."""
    convs = 3 * 9 * 16 + 3 * (16 * 16 * 9 * 2)
    convs += (16 * 32 * 9 + 32 * 32 * 9) + 2 * (32 * 32 * 9 * 2) + 16 * 32
    convs += (32 * 64 * 9 + 64 * 64 * 9) + 2 * (64 * 64 * 9 * 2) + 32 * 64
    bns = 2 * (16 + 16 * 6 + 32 * 7 + 64 * 7)
    want = convs + bns + 64 * 10 + 10
    got = sum(p.size for p in jax.tree.leaves(nnx.state(ResNet20(rngs=nnx.Rngs(0)), nnx.Param)))
    assert got == want == 272_474


def test_phi_estimator_agrees_with_the_official_formula():
    rng = np.random.default_rng(0)
    x = rng.random((5, 8, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 10, (5, 8)).astype(np.int32)
    clf = Classifier(ResNet20(in_channels=1, rngs=nnx.Rngs(1)), optax.sgd(0.1))
    _, params, rest = nnx.split(clf.model, nnx.Param, ...)
    mean, var = exp._noise_fn(clf)(x, y, params, rest)
    graph = nnx.split(clf.model, nnx.Param, ...)[0]
    grads = [jax.grad(lambda p, i=i: cross_entropy(nnx.merge(graph, p, rest)(x[i]), y[i]))(params)
             for i in range(5)]  # fmt: skip
    flat = np.stack([np.concatenate([np.ravel(np.asarray(v, np.float64))
                                     for v in jax.tree.leaves(g)]) for g in grads])  # fmt: skip
    official = np.maximum((flat**2).mean(0) - flat.mean(0) ** 2, 0.0)  # gradient_utils.py
    ours = np.concatenate([np.ravel(np.asarray(v)) for v in jax.tree.leaves(var)])
    scale = official.max()
    np.testing.assert_allclose(ours, official, atol=1e-4 * scale)
    sig = np.sqrt(official)
    phi_official = sig.sum() ** 2 / (sig.size * (sig**2).sum())
    assert noise_density(var)["phi"] == pytest.approx(phi_official, rel=1e-3)


def test_estimator_bias_vanishes_with_many_batches_and_phi_bounds():
    rng = np.random.default_rng(2)
    sig = [rng.exponential(size=2000)]
    assert abs(exp.estimator_bias(sig, 4000, rng)) < 0.01
    assert abs(exp.estimator_bias(sig, 4, rng)) > abs(exp.estimator_bias(sig, 4000, rng))
    assert noise_density([np.ones(50)])["phi"] == pytest.approx(1.0)
    one = np.zeros(50)
    one[3] = 2.0
    assert noise_density([one])["phi"] == pytest.approx(1 / 50)


def test_official_schedule_divides_the_rate_by_ten_at_half_and_three_quarters():
    for name, lr in (("sgd", 0.1), ("adam", 1e-3)):
        tx = exp.optimizer(name, epochs=8, steps_per_epoch=2)
        p = {"w": jnp.zeros(3)}
        state = tx.init(p)
        sizes = []
        for _ in range(16):
            g = {"w": jnp.ones(3)}
            u, state = tx.update(g, state, p)
            sizes.append(float(jnp.abs(u["w"][0])))
        if name == "adam":  # Adam's step is the rate (constant gradient)
            np.testing.assert_allclose(sizes[:8], lr, rtol=1e-3)
            np.testing.assert_allclose(sizes[8:12], lr / 10, rtol=1e-3)
            np.testing.assert_allclose(sizes[12:], lr / 100, rtol=1e-3)
        else:
            assert sizes[8] < sizes[7] / 5 and sizes[12] < sizes[11] / 5


def test_augment_crops_and_flips_like_the_official():
    rng = np.random.default_rng(3)
    x = rng.random((64, 32, 32, 3)).astype(np.float32)
    a = exp.augment(x, rng)
    assert a.shape == x.shape
    pad = np.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0)))
    kinds = set()
    for i in range(16):
        hits = [(dy, dx, f) for dy in range(9) for dx in range(9) for f in (0, 1)
                if np.array_equal(a[i], (lambda c: c[:, ::-1] if f else c)(
                    pad[i, dy : dy + 32, dx : dx + 32]))]  # fmt: skip
        assert hits, f"image {i} is not a padded crop (or its mirror)"
        kinds |= {(h[0] == 4 and h[1] == 4, h[2]) for h in hits}
    assert (False, 1) in kinds and (False, 0) in kinds  # shifted, flipped and not


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(data="imagenet"), "data"),
        (dict(optimizers=("sgd", "lion")), "optimizers"),
        (dict(noise_batches=1), "noise_batches"),
        (dict(batch_size=4000), "batch_size"),
        (dict(n_train=1700), "n_train"),
    ],
)
def test_validate_names_the_bad_field(change, field):
    cfg = dataclasses.replace(exp.EXPERIMENT.presets["quick"], **change)
    with pytest.raises(ValueError, match=field):
        exp.validate(cfg)


def test_the_paper_preset_is_the_official_setting():
    for cfg in exp.EXPERIMENT.presets.values():
        exp.validate(cfg)
    p = exp.EXPERIMENT.presets["paper"]
    assert (p.data, p.epochs, p.repeats, p.batch_size, p.noise_batches) == (
        "cifar10", 160, 3, 128, 391)
