"""Accelerator tests (marker ``gpu``): bf16 against float32 numerics of the GPT-2 forward and
backward pass, the attention implementation that is actually compiled, and sharding over every
device. They skip on a CPU backend, so in the default suite (which forces the CPU) they always
skip; ``benchmarks/device_check.py`` runs them on the device with ``pytest -m gpu`` and without
``tests/conftest.py`` (``--confcutdir tests/lm``), and its dry run sets
``GEOMOPT_GPU_TESTS_ON_CPU=1`` to run them on the CPU, so they cannot rot."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding

from geomopt.lm import GPT2, GPT2Config
from geomopt.lm._sharding import make_mesh, state_shardings

ON_CPU = os.environ.get("GEOMOPT_GPU_TESTS_ON_CPU") == "1"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        jax.default_backend() == "cpu" and not ON_CPU,
        reason="accelerator test (GEOMOPT_GPU_TESTS_ON_CPU=1 runs it on the CPU)",
    ),
]

CFG = GPT2Config(vocab_size=512, n_layer=2, n_head=4, d_model=128, context=256, dtype="float32")


def _tokens(batch=4, T=256):
    return jax.random.randint(jax.random.key(1), (batch, T + 1), 0, CFG.vocab_size)


def _loss_and_grads(cfg, tokens):
    model = GPT2(cfg, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)

    def loss(p):
        return nnx.merge(graphdef, p).loss(tokens)[0]

    return jax.jit(jax.value_and_grad(loss))(params)


def test_bf16_forward_backward_close_to_float32():
    tokens = _tokens()
    l32, g32 = _loss_and_grads(CFG, tokens)
    l16, g16 = _loss_and_grads(dataclasses.replace(CFG, dtype="bfloat16"), tokens)
    assert abs(float(l16) - float(l32)) / float(l32) < 1e-2, (float(l16), float(l32))
    a = np.concatenate([np.ravel(x) for x in jax.tree.leaves(g32)])
    b = np.concatenate([np.ravel(x) for x in jax.tree.leaves(g16)])
    cosine = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert cosine > 0.99, cosine
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(g16))  # fp32 parameters


def _hlo(cfg, tokens) -> str:
    model = GPT2(cfg, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)

    def loss(p):
        return nnx.merge(graphdef, p).loss(tokens)[0]

    return jax.jit(jax.grad(loss)).lower(params).compile().as_text()


def test_attention_implementation_actually_compiled():
    """cuDNN's fused kernel (a ``__cudnn$fmha...`` custom call) appears in the compiled step
    when asked for (on a GPU), and every implementation gives the blocked one's loss."""
    tokens = _tokens(2)
    cfg = dataclasses.replace(CFG, dtype="bfloat16")
    blocked = float(_loss_and_grads(cfg, tokens)[0])
    xla = float(_loss_and_grads(dataclasses.replace(cfg, attention="xla"), tokens)[0])
    assert abs(xla - blocked) / blocked < 1e-2
    if jax.default_backend() == "gpu":
        fused = dataclasses.replace(cfg, attention="cudnn")
        assert "fmha" in _hlo(fused, tokens).lower()  # cuDNN's fused attention custom call
        assert "fmha" not in _hlo(cfg, tokens).lower()  # the blocked default is plain XLA
        got = float(_loss_and_grads(fused, tokens)[0])
        assert abs(got - blocked) / blocked < 1e-2
    else:
        with pytest.raises(Exception, match="(?i)cudnn|gpu|cuda"):
            _loss_and_grads(dataclasses.replace(cfg, attention="cudnn"), tokens)


def test_fsdp_sharding_over_every_device_keeps_the_loss():
    mesh = make_mesh()
    n = mesh.shape["data"]
    tokens = _tokens(2 * n, 64)
    model = GPT2(CFG, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)

    def loss(p, t):
        return nnx.merge(graphdef, p).loss(t)[0]

    ref = float(jax.jit(loss)(params, tokens))
    sharded = jax.device_put(params, state_shardings(params, mesh, fsdp=True))
    batch = jax.device_put(tokens, NamedSharding(mesh, jax.sharding.PartitionSpec("data")))
    got = float(jax.jit(loss)(sharded, batch))
    np.testing.assert_allclose(got, ref, rtol=1e-5)
