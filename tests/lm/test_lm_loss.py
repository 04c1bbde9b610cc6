"""Chunked output-head cross-entropy: same loss, accuracy and gradients as the full logits,
and less compiled temporary memory."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._loss import chunked_cross_entropy, dense_cross_entropy

CFG = GPT2Config(vocab_size=97, n_layer=1, n_head=2, d_model=16, context=16, bias=True)


@pytest.mark.parametrize(
    "chunk",
    [7, pytest.param(16, marks=pytest.mark.slow), 1000],  # 16: one more ragged case
)
def test_model_loss_and_grads_match_full_logits(chunk, key):
    cfg = dataclasses.replace(CFG, loss_chunk=chunk, dtype="float32")
    graphdef, params = nnx.split(GPT2(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tokens = jax.random.randint(key, (3, 11), 0, cfg.vocab_size)  # 30 targets: ragged chunks

    def chunked(p):
        return nnx.merge(graphdef, p).loss(tokens)

    def reference(p):
        logits = nnx.merge(graphdef, p)(tokens[:, :-1])
        targets = tokens[:, 1:]
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
        return loss, jnp.mean((jnp.argmax(logits, -1) == targets).astype(jnp.float32))

    (l1, a1), g1 = jax.jit(jax.value_and_grad(chunked, has_aux=True))(params)
    (l2, a2), g2 = jax.jit(jax.value_and_grad(reference, has_aux=True))(params)
    np.testing.assert_allclose(l1, l2, rtol=1e-5, atol=1e-6)
    assert float(a1) == float(a2)
    for x, y in zip(jax.tree.leaves(g1), jax.tree.leaves(g2), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-5, rtol=1e-5)


def test_gradient_scales_with_cotangent_and_bf16_inputs(key):
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (50, 8))
    w = jax.random.normal(k2, (33, 8))
    t = jax.random.randint(k3, (50,), 0, 33)
    g_chunk = jax.grad(lambda x: 3.0 * chunked_cross_entropy(x, w, t, chunk=8)[0])(x)
    g_dense = jax.grad(lambda x: 3.0 * dense_cross_entropy(x, w, t)[0])(x)
    np.testing.assert_allclose(g_chunk, g_dense, atol=1e-5)
    lb, _ = chunked_cross_entropy(x.astype(jnp.bfloat16), w, t, chunk=8)
    assert lb.dtype == jnp.float32
    np.testing.assert_allclose(lb, dense_cross_entropy(x, w, t)[0], rtol=2e-2)


def test_chunked_needs_less_compiled_memory():
    n, d, v = 1024, 32, 4096
    x = jax.ShapeDtypeStruct((n, d), jnp.float32)
    w = jax.ShapeDtypeStruct((v, d), jnp.float32)
    t = jax.ShapeDtypeStruct((n,), jnp.int32)

    def temp_bytes(chunk):
        f = jax.grad(lambda x, w, t: chunked_cross_entropy(x, w, t, chunk=chunk)[0], (0, 1))
        stats = jax.jit(f).lower(x, w, t).compile().memory_analysis()
        if stats is None:
            pytest.skip("this backend reports no memory analysis")
        return stats.temp_size_in_bytes

    full, chunked = temp_bytes(0), temp_bytes(64)
    assert full >= n * v * 4  # at least the float32 logits
    assert chunked < full / 4


def test_rejects_bad_shapes():
    with pytest.raises(ValueError, match="expected \\(B, T, D\\)"):
        chunked_cross_entropy(
            jnp.zeros((2, 3, 4)), jnp.zeros((5, 4)), jnp.zeros((2,), int), chunk=2
        )


def test_sharded_batch_gives_the_same_loss_and_grads(key, n_devices):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((n_devices,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (2 * n_devices, 9, 8))
    w = jax.random.normal(k2, (40, 8))
    t = jax.random.randint(k3, (2 * n_devices, 9), 0, 40)
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    ts = jax.device_put(t, NamedSharding(mesh, P("data")))

    def f(x, w, t):
        return chunked_cross_entropy(x, w, t, chunk=12)[0]

    g_sharded = jax.jit(jax.value_and_grad(f, (0, 1)))(xs, w, ts)
    g_dense = jax.value_and_grad(
        lambda x, w: dense_cross_entropy(x.reshape(-1, 8), w, t.reshape(-1))[0], (0, 1)
    )(x, w)
    np.testing.assert_allclose(g_sharded[0], g_dense[0], rtol=1e-5)
    for a, b in zip(g_sharded[1], g_dense[1], strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)
    assert g_sharded[1][0].sharding.spec[0] == "data"  # dx keeps the batch sharding
