"""Blocked causal attention: the same values and gradients as jax.nn.dot_product_attention,
with ragged last blocks and in bfloat16; the model's logits do not depend on the block."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._model import causal_attention


@pytest.mark.parametrize("T, block", [(40, 16), (48, 16), (9, 16)])
def test_blocked_matches_library_values_and_grads(T, block):
    q, k, v = jax.random.normal(jax.random.key(0), (3, 2, T, 3, 8))

    def loss(fn, q, k, v):
        y = fn(q, k, v)
        return jnp.sum(y * jnp.cos(jnp.arange(y.size).reshape(y.shape)))

    def lib(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    # jitted: op-by-op execution of the blocked loop and its gradient took 15-30 s per case
    ours = jax.jit(jax.value_and_grad(lambda *a: loss(lambda *b: causal_attention(*b, block), *a),
                                      argnums=(0, 1, 2)))(q, k, v)  # fmt: skip
    ref = jax.jit(jax.value_and_grad(lambda *a: loss(lib, *a), argnums=(0, 1, 2)))(q, k, v)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-5)
    for a, b in zip(ours[1], ref[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    bf = [x.astype(jnp.bfloat16) for x in (q, k, v)]
    y = jax.jit(causal_attention, static_argnums=3)(*bf, block)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y, np.float32), jax.jit(lib)(q, k, v), atol=5e-2)


def test_model_logits_do_not_depend_on_the_block():
    cfg = GPT2Config(vocab_size=61, n_layer=1, n_head=2, d_model=16, context=32, dtype="float32")
    tokens = jax.random.randint(jax.random.key(1), (2, 32), 0, 61)
    full = nnx.jit(lambda m, t: m(t))(
        GPT2(dataclasses.replace(cfg, attn_block=0), rngs=nnx.Rngs(0)), tokens
    )
    blocked = nnx.jit(lambda m, t: m(t))(
        GPT2(dataclasses.replace(cfg, attn_block=8), rngs=nnx.Rngs(0)), tokens
    )
    np.testing.assert_allclose(blocked, full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="attn_block"):
        dataclasses.replace(cfg, attn_block=-1)
