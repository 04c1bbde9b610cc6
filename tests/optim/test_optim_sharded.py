"""Muon on 8 devices with each matrix orthogonalised once, on one device: the update equals the
one-device update, and the Newton-Schulz work per device falls about 8x (XLA's own flop count
of the compiled programs). In a fresh process: 8 CPU devices must be set before JAX starts."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json
import jax, jax.numpy as jnp, numpy as np, optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from geomopt.optim import muon, orthogonalize, orthogonalize_sharded

assert jax.device_count() == 8
mesh = Mesh(np.array(jax.devices()), ("data",))
key = jax.random.key(0)
ks = jax.random.split(key, 8)
# GPT-2-like hidden matrices at small width: 12 layers of qkv / fc / proj / attn out
params = {f"h{i}": {"qkv": jax.random.normal(ks[0 + i % 2], (32, 96)) * (1 + i),
                    "fc": jax.random.normal(ks[2 + i % 2], (32, 128)),
                    "proj": jax.random.normal(ks[4 + i % 2], (128, 32)),
                    "out": jax.random.normal(ks[6 + i % 2], (32, 32))} for i in range(12)}
grads = jax.tree.map(lambda p: jnp.sin(3.0 * p), params)
one, many = muon(0.02), muon(0.02, mesh=mesh)
u1, _ = jax.jit(one.update)(grads, one.init(params), params)
# FSDP-style: the inputs sharded over the devices
shard = lambda x: jax.device_put(x, NamedSharding(mesh, P(None, "data")))
sp, sg = jax.tree.map(shard, params), jax.tree.map(shard, grads)
u8, _ = jax.jit(many.update)(sg, many.init(sp), sp)
err = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(u1), jax.tree.leaves(u8)))

stack = jax.random.normal(key, (24, 128, 512))
def flops(f):
    c = jax.jit(f).lower(stack).compile().cost_analysis()
    c = c[0] if isinstance(c, list) else c
    return float(c["flops"])
f1 = flops(lambda x: orthogonalize(x, method="auto"))
f8 = flops(lambda x: orthogonalize_sharded(x, mesh, method="auto"))
same = float(jnp.max(jnp.abs(orthogonalize(stack, method="auto")
                             - orthogonalize_sharded(stack, mesh, method="auto"))))
print(json.dumps({"err": err, "flops_one": f1, "flops_per_device": f8, "same": same}))
"""


@pytest.mark.slow
def test_sharded_muon_equals_one_device_with_an_eighth_of_the_work():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")  # fmt: skip
    env.pop("JAX_NUM_CPU_DEVICES", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["err"] < 1e-5, got
    assert got["same"] < 1e-5, got
    ratio = got["flops_one"] / got["flops_per_device"]
    assert 6.0 < ratio < 9.0, got  # 24 matrices: 3 per device instead of 24
