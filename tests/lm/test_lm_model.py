"""GPT-2 model: the published parameter count, shapes, causality, dtype handling."""

import dataclasses

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


@nnx.jit
def forward(model, tokens, key=None):
    return model(tokens, key=key)


def test_forward_shape_dtype_and_causality(key):
    cfg = presets["tiny"]
    model = GPT2(cfg, rngs=nnx.Rngs(0))
    tokens = jax.random.randint(key, (2, 16), 0, cfg.vocab_size)
    logits = forward(model, tokens)
    assert logits.shape == (2, 16, cfg.vocab_size) and logits.dtype == jnp.float32
    changed = tokens.at[:, 10].set((tokens[:, 10] + 1) % cfg.vocab_size)
    logits2 = forward(model, changed)
    np.testing.assert_array_equal(np.asarray(logits[:, :10]), np.asarray(logits2[:, :10]))
    assert not np.allclose(np.asarray(logits[:, 10:]), np.asarray(logits2[:, 10:]))


def test_init_statistics_and_tied_head():
    cfg = GPT2Config(vocab_size=300, n_layer=8, n_head=4, d_model=128, context=64, bias=True)
    model = GPT2(cfg, rngs=nnx.Rngs(1))
    assert np.std(np.asarray(model.wte[...])) == pytest.approx(0.02, rel=0.05)
    resid = np.asarray(model.blocks[0].mlp.proj.kernel[...])
    assert np.std(resid) == pytest.approx(0.02 / np.sqrt(16), rel=0.05)
    assert np.std(np.asarray(model.blocks[0].attn.qkv.kernel[...])) == pytest.approx(0.02, rel=0.05)
    assert np.all(np.asarray(model.blocks[0].attn.qkv.bias[...]) == 0)
    # tied embeddings: the output head is the token table, no separate head parameter
    params = nnx.state(model, nnx.Param)
    shapes = [x.shape for x in jax.tree.leaves(params)]
    assert shapes.count((300, 128)) == 1
    labels = jax.tree_util.tree_map_with_path(lambda p, _: param_label(p), params)
    assert labels["wte"].get_value() == "embedding"
    assert labels["blocks"][3]["mlp"]["fc"]["kernel"].get_value() == "matrix"
    assert labels["blocks"][3]["ln1"]["bias"].get_value() == "vector"
    assert count_params(params) == abstract_param_count(cfg)


def test_bf16_compute_keeps_float32_params(key):
    cfg = dataclasses.replace(presets["tiny"], dtype="bfloat16")
    model = GPT2(cfg, rngs=nnx.Rngs(0))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    tokens = jax.random.randint(key, (2, 8), 0, cfg.vocab_size)
    logits = forward(model, tokens)
    ref = forward(GPT2(presets["tiny"], rngs=nnx.Rngs(0)), tokens)
    assert logits.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(logits), np.asarray(ref), atol=0.05)


def test_dropout_only_with_key(key):
    cfg = dataclasses.replace(presets["tiny"], dropout=0.5)
    model = GPT2(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.arange(8)[None] % 256
    plain = np.asarray(forward(model, tokens))
    np.testing.assert_array_equal(plain, np.asarray(forward(model, tokens)))
    assert not np.allclose(plain, np.asarray(forward(model, tokens, key)))


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
