"""QK-clip (MuonClip, Kimi K2): the logit GPT-2 reports is the brute-force causal max, a clipped
head's largest logit on the same input is the threshold, other heads and the values are
untouched, and each layer's kernel gets its own row of logits."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from geomopt import optim
from geomopt.lm._config import GPT2Config
from geomopt.lm._model import GPT2, attention_logit_max

CFG = GPT2Config(vocab_size=64, n_layer=2, n_head=2, d_model=16, context=16, bias=True)


def brute_logit_max(q, k):
    """``max_{b, j <= i} q[b, i, h] . k[b, j, h] / sqrt(H)`` by loops, per head."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    B, T, N, H = q.shape
    out = np.full(N, -np.inf)
    for b in range(B):
        for i in range(T):
            for j in range(i + 1):
                out = np.maximum(out, np.einsum("nh,nh->n", q[b, i], k[b, j]) / math.sqrt(H))
    return out


@pytest.mark.parametrize("block", [0, 4, 128])
def test_logit_max_is_the_causal_max(block):
    kq, kk = jax.random.split(jax.random.key(0))
    q = jax.random.normal(kq, (2, 9, 3, 4))
    k = jax.random.normal(kk, (2, 9, 3, 4))
    got = attention_logit_max(q, k, block=block)
    np.testing.assert_allclose(got, brute_logit_max(q, k), rtol=1e-5)


def _inflated(cfg, factor=30.0, seed=0):
    """GPT-2 params with the qkv weights scaled up, so some logits are large."""
    graphdef, params = nnx.split(GPT2(cfg, rngs=nnx.Rngs(seed)), nnx.Param)
    scale = lambda path, x: x * factor if "qkv" in jax.tree_util.keystr(path) else x  # noqa: E731
    return graphdef, jax.tree_util.tree_map_with_path(scale, params)


def _layer0_qk(graphdef, params, tokens):
    """Queries and keys of the first attention layer, computed by hand from its inputs."""
    model = nnx.merge(graphdef, params)
    T = tokens.shape[1]
    x = model.wte[...][tokens] + model.wpe[...][:T][None]
    h = model.blocks[0].ln1(x)
    w, b = model.blocks[0].attn.qkv.kernel[...], model.blocks[0].attn.qkv.bias[...]
    qkv = (h @ w + b[None, None]).reshape(*h.shape[:2], 3, CFG.n_head, CFG.head_dim)
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]


def test_clipped_heads_end_at_the_threshold_on_the_same_input():
    graphdef, params = _inflated(CFG)
    tokens = jax.random.randint(jax.random.key(1), (2, 12), 0, CFG.vocab_size)
    s_LxN = nnx.merge(graphdef, params).loss(tokens, logit_max=True)[2]
    q, k, v = _layer0_qk(graphdef, params, tokens[:, :-1])
    np.testing.assert_allclose(s_LxN[0], brute_logit_max(q, k), rtol=1e-5)
    tau = float(jnp.min(s_LxN[0])) + 0.5 * float(jnp.ptp(s_LxN[0]))  # one head over, one under
    tx = optim.qk_clip(tau)
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, state = tx.update(zeros, tx.init(params), params, attn_logit_max=s_LxN)
    new = optax.apply_updates(params, updates)
    q2, k2, v2 = _layer0_qk(graphdef, new, tokens[:, :-1])
    want = np.minimum(np.asarray(s_LxN[0]), tau)
    np.testing.assert_allclose(brute_logit_max(q2, k2), want, rtol=1e-5)
    np.testing.assert_allclose(v2, v, rtol=1e-6)  # values untouched
    assert int(state.clipped_heads) == int(jnp.sum(s_LxN > tau))
    assert float(state.last_logit_max) == pytest.approx(float(jnp.max(s_LxN)))


def test_each_layer_its_own_row_and_the_update_is_scaled_too():
    """Eleven layers (flatten order 0, 1, ..., 10, not 0, 1, 10, 2, ...): layer l's q and k
    columns of head h become sqrt(min(1, tau / S[l, h])) (W + u); v columns W + u."""
    cfg = dataclasses.replace(CFG, n_layer=11)
    graphdef, params = _inflated(cfg, factor=1.0)
    n, H = cfg.n_head, cfg.head_dim
    s = 1.0 + jnp.arange(11 * n, dtype=jnp.float32).reshape(11, n)  # distinct per layer / head
    tau = 7.5
    u = jax.tree.map(lambda x: 0.01 * jnp.ones_like(x), params)
    out, _ = optim.qk_clip(tau).update(u, optim.qk_clip(tau).init(params), params,
                                       attn_logit_max=s)  # fmt: skip
    for layer in range(11):
        for name in ("kernel", "bias"):
            w = params["blocks"][layer]["attn"]["qkv"][name][...]
            got = w + out["blocks"][layer]["attn"]["qkv"][name][...]
            g = np.sqrt(np.minimum(1.0, tau / np.asarray(s[layer])))  # (N,)
            factor = np.concatenate([np.repeat(g, H), np.repeat(g, H), np.ones(n * H)])
            np.testing.assert_allclose(got, (np.asarray(w) + 0.01) * factor, rtol=1e-6, atol=1e-8)
    mlp = out["blocks"][3]["mlp"]["fc"]["kernel"][...]
    np.testing.assert_array_equal(mlp, np.float32(0.01))  # other leaves pass through


def test_refusals():
    graphdef, params = _inflated(CFG, factor=1.0)
    tx = optim.qk_clip(10.0)
    state = tx.init(params)
    with pytest.raises(ValueError, match="needs params and attn_logit_max"):
        tx.update(params, state, params)
    with pytest.raises(ValueError, match="2 layers of 'qkv' weights, but attn_logit_max has 3"):
        tx.update(params, state, params, attn_logit_max=jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="expected \\(n_layer, n_head\\)"):
        tx.update(params, state, params, attn_logit_max=jnp.ones(2))
    with pytest.raises(ValueError, match="no parameter path contains 'qkv'"):
        tx.update({"w": jnp.ones((2, 2))}, state, {"w": jnp.ones((2, 2))},
                  attn_logit_max=jnp.ones((1, 1)))  # fmt: skip
    for bad in (0.0, -1.0, True):
        with pytest.raises(ValueError, match="qk_clip threshold"):
            optim.qk_clip(bad)


def test_muon_clip_is_muon_then_the_clip():
    graphdef, params = _inflated(CFG)
    tokens = jax.random.randint(jax.random.key(2), (2, 12), 0, CFG.vocab_size)
    s = nnx.merge(graphdef, params).loss(tokens, logit_max=True)[2]
    grads = jax.grad(lambda p: nnx.merge(graphdef, p).loss(tokens)[0])(params)
    mc = optim.make_optimizer("muon_clip", 0.01, qk_threshold=5.0)
    got, _ = mc.update(grads, mc.init(params), params, attn_logit_max=s)
    mu = optim.muon(0.01)
    u, _ = mu.update(grads, mu.init(params), params)
    clip = optim.qk_clip(5.0)
    want, _ = clip.update(u, clip.init(params), params, attn_logit_max=s)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8), got, want)
    with pytest.raises(ValueError, match=r"optimizer 'muon_clip': no option \['beta'\]"):
        optim.make_optimizer("muon_clip", 0.01, beta=0.9)
