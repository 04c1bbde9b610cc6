"""Point-cloud classifiers: the official MLP against its definition, invariances, dropout,
training (one compilation for all strides and for the four MLP orders), bad input."""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon._classify import fit, train_models
from geomopt.canon._factory import make_model, prepare_inputs
from geomopt.canon._layers import official_hilbert_order, official_quantize, point_dropout
from geomopt.canon._model_config import ORDER_PRESETS, ModelConfig, TrainConfig, model_config
from geomopt.canon._models import CanonMLP, DeepSets, PermutationSampleAverage
from geomopt.canon._transformer import SerializedTransformer, serializations

P, D, C = 8, 3, 3
CFG = ModelConfig(
    mlp_dims=(16, 16, 8), n_bands=2, fourier_scale=1.0, n_perms=4, deepsets_width=16,
    tf_dim=8, tf_heads=2, tf_depth=2, tf_window=4,
)  # fmt: skip


@pytest.fixture
def cloud():
    return jax.random.uniform(jax.random.key(3), (P, D))


def _perm(seed=1):
    return np.random.default_rng(seed).permutation(P)


def _official_forward(m: CanonMLP, x: np.ndarray) -> np.ndarray:
    """The official GlobalMLPClassifier.forward in eval mode, written out in numpy from the
    definition (models.py of yonatansverdlov/Canonization) with ``m``'s weights."""
    x = np.asarray(x, np.float64)
    z = x - x.min(axis=0, keepdims=True)  # batched_normalize: per-axis min, one global max
    xn = z / max(z.max(), 1e-8)
    if m.order == "lex":  # stable argsort by z, then y, then x
        idx = np.arange(len(xn))
        for k in (2, 1, 0):
            idx = idx[np.argsort(xn[idx, k], kind="stable")]
        xn = xn[idx]
    proj = (2 * np.pi * xn) @ np.asarray(m.fourier.B, np.float64)
    h = np.concatenate([np.sin(proj), np.cos(proj)], axis=-1).reshape(-1)

    def ln(v, norm):
        v = (v - v.mean()) / np.sqrt(v.var() + 1e-5)
        return v * np.asarray(norm.weight) + np.asarray(norm.bias)

    def lin(v, layer):
        return np.asarray(layer.weight, np.float64) @ v + np.asarray(layer.bias)

    def gelu(v):
        return 0.5 * v * (1 + np.vectorize(math.erf)(v / np.sqrt(2)))

    for b in m.blocks:
        skip = h if b.skip is None else lin(h, b.skip)
        h = skip + gelu(lin(ln(h, b.norm), b.linear))
    return lin(ln(h, m.norm), m.head)


@pytest.mark.parametrize("order", ["identity", "lex"])
def test_official_mlp_matches_definition(key, cloud, order):
    m = CanonMLP(P, D, C, CFG, order=order, key=key)
    assert m.fourier.B.shape == (D, 2 * D)  # d x (n_bands d)
    assert [b.skip is None for b in m.blocks] == [False, True, False]  # 16 -> 16 keeps identity
    np.testing.assert_allclose(
        np.asarray(m(cloud)), _official_forward(m, np.asarray(cloud)), rtol=2e-4, atol=2e-5
    )


def test_official_hilbert_order_is_hilbertcurve_on_zxy():
    x = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    x[0] = [1.0, 0.0, 0.5]  # the clamp at the top of the grid
    q = np.minimum(np.floor(x.astype(np.float64) * 4096), 4095).astype(int)
    h = HilbertCurve(12, 3).distances_from_points(q[:, [2, 0, 1]].tolist())
    expect = np.argsort(np.asarray(h, dtype=object).astype(float), kind="stable")
    np.testing.assert_array_equal(np.asarray(official_hilbert_order(jnp.asarray(x))), expect)


@pytest.mark.parametrize("bits", [12, 31, 32])
def test_official_quantize_clamps_at_every_width(bits):
    """Cells are floor(x * 2**bits) clamped to [0, 2**bits - 1], up to the 32 bits allowed."""
    x = jnp.asarray([[0.0, 0.5, 1.0], [-0.25, 0.25, 1.5]], jnp.float32)
    top = 2**bits - 1
    expect = [[0, 2 ** (bits - 1), top], [0, 2 ** (bits - 2), top]]
    got = np.asarray(official_quantize(x, bits))
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got.astype(np.int64), expect)


def test_order_presets_are_the_official_config():
    cfg = model_config("hilbert", TrainConfig())
    assert (cfg.dropout, cfg.fourier_scale, cfg.label_smoothing, cfg.weight_decay) == (
        0.3, 0.1, 0.2, 0.01,
    )  # fmt: skip
    assert abs(cfg.lr - 9.614e-4) < 1e-6
    assert ORDER_PRESETS["unsorted"]["fourier_scale"] == 1.0
    assert cfg.point_dropout == 0.2 and cfg.input_dropout == 0.2


def test_deepsets_invariant(key, cloud):
    m = DeepSets(P, D, C, CFG, key=key)
    np.testing.assert_allclose(m(cloud), m(cloud[_perm()]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", ["lex", "hilbert", "morton"])
def test_canonized_invariant_for_distinct_points(key, cloud, order):
    m = CanonMLP(P, D, C, CFG, order=order, key=key)
    np.testing.assert_array_equal(m(cloud), m(cloud[_perm()]))


@pytest.mark.parametrize("ser", ["lex", "hilbert", "morton"])
def test_transformer_invariant_for_curves_not_for_random(key, cloud, ser):
    m = SerializedTransformer(P, D, C, CFG, serialization=ser, key=key)
    np.testing.assert_allclose(m(cloud), m(cloud[_perm()]), rtol=1e-5, atol=1e-6)
    r = SerializedTransformer(P, D, C, CFG, serialization="random", key=key)
    assert not np.allclose(r(cloud), r(cloud[_perm()]), atol=1e-5)


def test_serializations_are_the_curve_on_both_axis_orders(cloud):
    s = np.asarray(serializations("lex", cloud))
    xs = np.asarray(cloud)
    np.testing.assert_array_equal(s[0], np.lexsort(xs.T[::-1]))
    np.testing.assert_array_equal(s[1], np.lexsort(xs.T))  # last axis primary
    r = np.asarray(serializations("random", jnp.stack([cloud, cloud])))
    assert sorted(r[0, 0]) == list(range(P)) and not np.array_equal(r[0, 0], r[1, 0])


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
    k = 200
    gk = PermutationSampleAverage(p, 2, C, ModelConfig(**{**CFG.__dict__, "n_perms": k}), key=key)
    sd = np.asarray(jnp.std(jax.vmap(lambda q: base(x[q]))(perms), axis=0))
    np.testing.assert_array_less(np.abs(np.asarray(gk(x) - full_avg(x))), 5 * sd / np.sqrt(k))


def test_permutation_sample_average_is_not_invariant(key, cloud):
    """K = 8 sampled permutations of P points: the model's name says it averages samples, and it
    is not invariant (why the hierarchy's exactly averaged model is not what it computes)."""
    m = make_model("perm_sample_avg", P, D, C, CFG, key=key)
    assert not np.allclose(m(cloud), m(cloud[_perm()]), atol=1e-4)


def test_point_dropout_drops_whole_points_only_in_training(key):
    h = jnp.ones((50, 7))
    rows = np.asarray(point_dropout(h, 0.5, key))
    assert all(np.all(r == 0) or np.allclose(r, 2.0) for r in rows)
    assert 5 < int((rows[:, 0] == 0).sum()) < 45
    np.testing.assert_array_equal(point_dropout(h, 0.5, None), h)
    m = CanonMLP(P, D, C, CFG, order="hilbert", key=key)
    x = jax.random.uniform(jax.random.key(1), (P, D))
    np.testing.assert_array_equal(m(x), m(x))
    assert not np.allclose(m(x, key=jax.random.key(2)), m(x, key=jax.random.key(3)))


def _easy_problem(n, p=8):
    rng = np.random.default_rng(0)
    y = (np.arange(n) % 2).astype(np.int32)
    centre = np.where(y[:, None, None] == 0, 0.25, 0.75)
    x = centre + 0.05 * rng.standard_normal((n, p, 2))
    x[:, 0] = np.where(y[:, None] == 0, 1.0, 0.0)
    return x.astype(np.float32), y


TINY = TrainConfig(
    epochs=15,
    batch=8,
    use_order_presets=False,
    model=ModelConfig(mlp_dims=(16,), n_bands=2, fourier_scale=1.0, lr=3e-3, point_dropout=0.0),
)


def test_training_learns_and_compiles_once_for_strides_and_orders():
    x, y = _easy_problem(64)
    res = fit("lex", x[:48], y[:48], x[48:], y[48:], 2, TINY, [0, 1], strides=(1, 2))
    assert res[0]["n_train"] == 48 and res[1]["n_train"] == 24
    assert np.all(res[0]["test_acc"] > 0.8)
    curve = res[0]["loss_curve"]
    assert np.all(curve[:, -3:].mean(1) < curve[:, :2].mean(1))
    np.testing.assert_allclose(res[0]["gap"], res[0]["train_acc"] - res[0]["test_acc"])
    # the hilbert and unsorted MLPs reuse the compiled training loop of lex
    inp = prepare_inputs("unsorted", x[:48], TINY.model)
    traces = []
    with jax.log_compiles():
        import logging

        class H(logging.Handler):
            def emit(self, record):
                if "_train" in record.getMessage():
                    traces.append(record.getMessage())

        h = H()
        logging.getLogger("jax").addHandler(h)
        try:
            train_models("unsorted", inp, y[:48], 2, TINY, [0, 1], stride=4, n_points=8, d=2)
        finally:
            logging.getLogger("jax").removeHandler(h)
    assert traces == []


def test_vmapped_seeds_equal_separate_runs():
    x, y = _easy_problem(32)
    inp = prepare_inputs("lex", x, TINY.model)
    kw = dict(n_points=8, d=2)
    _, loss_a, _ = train_models("lex", inp, y, 2, TINY, [0, 1], **kw)
    _, loss_b, _ = train_models("lex", inp, y, 2, TINY, [1, 2], **kw)
    np.testing.assert_allclose(loss_a[1], loss_b[0], rtol=1e-4, atol=1e-5)
    assert not np.allclose(loss_a[0], loss_b[1])


def test_equal_steps_trains_scarce_fractions_as_long_as_the_full_set():
    """``equal_steps``: at stride 1 the official loop unchanged (bitwise); at stride 4 four
    passes over the subset per epoch, so after 2 epochs the loss is far below the official
    recipe's (a quarter of the steps)."""
    x, y = _easy_problem(64)
    inp = prepare_inputs("lex", x, TINY.model)
    kw = dict(n_points=8, d=2, max_passes=4)
    short = dataclasses.replace(TINY, epochs=2)
    eq = dataclasses.replace(short, equal_steps=True)
    _, official, _ = train_models("lex", inp, y, 2, short, [0, 1], stride=1, n_points=8, d=2)
    _, same, _ = train_models("lex", inp, y, 2, eq, [0, 1], stride=1, n_points=8, d=2)
    np.testing.assert_array_equal(official, same)
    _, few, _ = train_models("lex", inp, y, 2, short, [0, 1], stride=4, **kw)
    _, many, _ = train_models("lex", inp, y, 2, eq, [0, 1], stride=4, **kw)
    assert np.all(many[:, -1] < 0.8 * few[:, -1])


def test_fast_compile_trains_the_same_models():
    """`TrainConfig.fast_compile` (the smoke presets) changes how XLA compiles the loops, not
    what they compute: the same loss curves, accuracies and predictions as the default."""
    x, y = _easy_problem(32)
    fast = dataclasses.replace(TINY, epochs=3, fast_compile=True)
    slow = dataclasses.replace(fast, fast_compile=False)
    (a,) = fit("perm_sample_avg", x, y, x[:16], y[:16], 2, slow, [0, 1])
    (b,) = fit("perm_sample_avg", x, y, x[:16], y[:16], 2, fast, [0, 1])
    np.testing.assert_allclose(a["loss_curve"], b["loss_curve"], rtol=1e-4, atol=1e-5)
    for key in ("train_acc", "test_acc", "train_acc_running"):
        np.testing.assert_array_equal(a[key], b[key])


def test_bad_input(key, cloud):
    m = CanonMLP(P, D, C, CFG, order="lex", key=key)
    with pytest.raises(ValueError, match="expected one cloud"):
        m(jnp.zeros((2, P, D)))
    with pytest.raises(ValueError, match="expected one cloud"):
        DeepSets(P, D, C, CFG, key=key)(jnp.zeros((P, D + 1)))
    with pytest.raises(ValueError, match="order 'zorder'"):
        CanonMLP(P, D, C, CFG, order="zorder", key=key)
    with pytest.raises(ValueError, match="n_perms"):
        PermutationSampleAverage(P, D, C, ModelConfig(n_perms=0), key=key)
    with pytest.raises(ValueError, match="model kind"):
        make_model("pointnet", P, D, C, CFG, key=key)
    with pytest.raises(ValueError, match="tf_window"):
        SerializedTransformer(6, D, C, CFG, serialization="hilbert", key=key)
    with pytest.raises(ValueError, match="point_dropout"):
        CanonMLP(P, D, C, ModelConfig(point_dropout=1.0), order="lex", key=key)
    with pytest.raises(ValueError, match="non-finite"):
        prepare_inputs("lex", np.full((2, P, D), np.inf), CFG)
    inp = prepare_inputs("lex", np.zeros((4, P, D)), CFG)
    with pytest.raises(ValueError, match="fewer than one batch"):
        train_models("lex", inp, np.zeros(4, int), C, TINY, [0], stride=1, n_points=P, d=D)


@pytest.mark.parametrize("kind", ["hilbert", "transformer_morton", "rot_skew"])
def test_training_model_on_prepared_inputs_is_the_model(key, cloud, kind):
    from geomopt.canon._factory import training_model

    cfg = ModelConfig(
        **{**CFG.__dict__, "dropout": 0.0, "point_dropout": 0.0, "input_dropout": 0.0}
    )
    inp = jax.tree_util.tree_map(lambda a: a[0], prepare_inputs(kind, cloud[None], cfg))
    if kind == "rot_skew":  # batched and single-cloud eigh differ in the last float32 bits
        from geomopt.canon._rotations import canonize_rotation

        single = canonize_rotation("skew", cloud)
        np.testing.assert_allclose(inp, single, atol=1e-3)
        inp = single
    got = training_model(kind, P, D, C, cfg, key=key).apply(inp)
    np.testing.assert_allclose(got, make_model(kind, P, D, C, cfg, key=key)(cloud), atol=1e-5)
