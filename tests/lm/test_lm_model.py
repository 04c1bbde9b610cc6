"""GPT-2 model: the published parameter count, shapes, causality, dtype handling."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from geomopt.lm import (
    GPT2,
    GPT2Config,
    abstract_param_count,
    count_params,
    flops_per_token,
    param_label,
    presets,
)


def test_124m_has_gpt2_small_param_count():
    cfg = dataclasses.replace(presets["124M"], vocab_size=50257, bias=True)
    assert abstract_param_count(cfg) == 124_439_808
    assert abstract_param_count(presets["gpt2-original"]) == 124_439_808
    # the paper's variant: padded vocabulary, no biases
    # 47 more vocabulary rows; per block 11 * 768 bias entries fewer, and the final LN bias
    assert abstract_param_count(presets["124M"]) == 124_439_808 + 47 * 768 - 12 * 11 * 768 - 768


def test_flops_per_token_formula():
    cfg = presets["124M"]
    n = abstract_param_count(cfg) - cfg.context * cfg.d_model
    assert flops_per_token(cfg) == 6 * n + 12 * 12 * 768 * 1024
    assert flops_per_token(cfg, seq_len=512) == 6 * n + 12 * 12 * 768 * 512


CFG = GPT2Config(
    vocab_size=256, n_layer=2, n_head=2, d_model=32, context=32, bias=True, dropout=0.1
)


@pytest.fixture(scope="module")
def split_model():
    graphdef, params = nnx.split(GPT2(CFG, rngs=nnx.Rngs(0)), nnx.Param)
    return graphdef, params


@functools.partial(jax.jit, static_argnums=0)
def forward(graphdef, params, tokens, key=None):
    return nnx.merge(graphdef, params)(tokens, key=key)


def test_forward_shape_dtype_and_causality(split_model, key):
    graphdef, params = split_model
    tokens = jax.random.randint(key, (2, 16), 0, CFG.vocab_size)
    logits = forward(graphdef, params, tokens)
    assert logits.shape == (2, 16, CFG.vocab_size) and logits.dtype == jnp.float32
    changed = tokens.at[:, 10].set((tokens[:, 10] + 1) % CFG.vocab_size)
    logits2 = forward(graphdef, params, changed)
    np.testing.assert_array_equal(np.asarray(logits[:, :10]), np.asarray(logits2[:, :10]))
    assert not np.allclose(np.asarray(logits[:, 10:]), np.asarray(logits2[:, 10:]))
    # dropout acts only when a key is given
    np.testing.assert_array_equal(np.asarray(forward(graphdef, params, tokens)), logits)
    assert not np.allclose(np.asarray(forward(graphdef, params, tokens, key)), logits)


def test_init_statistics_and_tied_head(split_model):
    _, params = split_model
    assert np.std(np.asarray(params["wte"][...])) == pytest.approx(0.02, rel=0.05)
    block = params["blocks"][0]
    resid = np.concatenate(
        [
            np.ravel(block["mlp"]["proj"]["kernel"][...]),
            np.ravel(block["attn"]["proj"]["kernel"][...]),
        ]
    )
    assert np.std(resid) == pytest.approx(0.02 / np.sqrt(2 * CFG.n_layer), rel=0.05)
    assert np.std(np.asarray(block["attn"]["qkv"]["kernel"][...])) == pytest.approx(0.02, rel=0.05)
    assert np.all(np.asarray(block["attn"]["qkv"]["bias"][...]) == 0)
    # tied embeddings: the output head is the token table, no separate head parameter
    shapes = [x.shape for x in jax.tree.leaves(params)]
    assert shapes.count((256, 32)) == 1
    labels = jax.tree_util.tree_map_with_path(lambda p, _: param_label(p), params)
    assert labels["wte"].get_value() == "embedding"
    assert labels["blocks"][1]["mlp"]["fc"]["kernel"].get_value() == "matrix"
    assert labels["blocks"][1]["ln1"]["bias"].get_value() == "vector"
    assert count_params(params) == abstract_param_count(CFG)


def test_bf16_compute_keeps_float32_params(split_model, key):
    graphdef, params = split_model
    bf16 = dataclasses.replace(CFG, dtype="bfloat16")
    graphdef16 = nnx.graphdef(nnx.eval_shape(lambda: GPT2(bf16, rngs=nnx.Rngs(0))))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    tokens = jax.random.randint(key, (2, 8), 0, CFG.vocab_size)
    logits = forward(graphdef16, params, tokens)
    assert logits.dtype == jnp.float32
    ref = forward(graphdef, params, tokens)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(ref), atol=0.05)


@pytest.mark.parametrize(
    "field,value", [("n_head", 3), ("vocab_size", 0), ("dropout", 1.0), ("dtype", "float16")]
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(presets["tiny"], **{field: value})


def test_sequence_longer_than_context_raises():
    model = GPT2(presets["tiny"], rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="exceeds the model context 32"):
        model(jnp.zeros((1, 33), jnp.int32))
