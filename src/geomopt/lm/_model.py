"""GPT-2 in Flax NNX: learned positions, pre-LayerNorm blocks, causal attention, tied embeddings.

Shapes are in names: ``B`` batch, ``T`` sequence, ``D`` width, ``N`` heads, ``H`` head size,
``V`` vocabulary. Parameters are stored in ``param_dtype`` (float32) and cast to the compute
``dtype`` (float32 or bfloat16) where they are used, so optimiser state stays in float32 while the
matmuls run in bf16 on accelerators (what PyTorch's autocast does in the paper's code).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from geomopt.lm._config import GPT2Config, presets

__all__ = [
    "GPT2Config",
    "GPT2",
    "presets",
    "count_params",
    "abstract_param_count",
    "flops_per_token",
    "param_label",
    "param_labels",
]


def _expand(v, ndim: int):
    """A feature vector reshaped to broadcast against an ``ndim``-D activation explicitly."""
    return v.reshape((1,) * (ndim - 1) + v.shape)


class Linear(nnx.Module):
    """``y = x W (+ b)`` with ``W`` stored in float32 and cast to the compute dtype."""

    def __init__(self, d_in: int, d_out: int, *, bias: bool, std: float, dtype, rngs: nnx.Rngs):
        self.kernel = nnx.Param(std * jax.random.normal(rngs.params(), (d_in, d_out), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((d_out,), jnp.float32)) if bias else None
        self.dtype = dtype

    def __call__(self, x):
        y = jnp.dot(x.astype(self.dtype), self.kernel[...].astype(self.dtype))
        if self.bias is not None:
            y = y + _expand(self.bias[...].astype(self.dtype), y.ndim)
        return y


class LayerNorm(nnx.Module):
    """LayerNorm over the last axis, statistics in float32, optional bias (eps 1e-5)."""

    def __init__(self, d: int, *, bias: bool, dtype):
        self.scale = nnx.Param(jnp.ones((d,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((d,), jnp.float32)) if bias else None
        self.dtype = dtype

    def __call__(self, x):
        x32 = x.astype(jnp.float32)
        mean = jnp.mean(x32, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
        y = (x32 - mean) * jax.lax.rsqrt(var + 1e-5) * _expand(self.scale[...], x.ndim)
        if self.bias is not None:
            y = y + _expand(self.bias[...], x.ndim)
        return y.astype(self.dtype)


class CausalSelfAttention(nnx.Module):
    """Multi-head causal self-attention through ``jax.nn.dot_product_attention``."""

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        dt = cfg.compute_dtype
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        d = cfg.d_model
        self.qkv = Linear(d, 3 * d, bias=cfg.bias, std=0.02, dtype=dt, rngs=rngs)
        self.proj = Linear(d, d, bias=cfg.bias, std=resid_std, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.dropout)
        self.n_head = cfg.n_head

    def __call__(self, x_BxTxD, key=None):
        B, T, D = x_BxTxD.shape
        qkv = self.qkv(x_BxTxD).reshape(B, T, 3, self.n_head, D // self.n_head)
        q_BxTxNxH, k_BxTxNxH, v_BxTxNxH = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        y = jax.nn.dot_product_attention(q_BxTxNxH, k_BxTxNxH, v_BxTxNxH, is_causal=True)
        y_BxTxD = self.proj(y.reshape(B, T, D))
        return self.dropout(y_BxTxD, deterministic=key is None, rngs=key)


class MLP(nnx.Module):
    """``proj(gelu(fc(x)))`` with hidden width 4 D (tanh-approximated GELU, as GPT-2)."""

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        dt = cfg.compute_dtype
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        self.fc = Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias, std=0.02, dtype=dt, rngs=rngs)
        self.proj = Linear(
            4 * cfg.d_model, cfg.d_model, bias=cfg.bias, std=resid_std, dtype=dt, rngs=rngs
        )
        self.dropout = nnx.Dropout(cfg.dropout)

    def __call__(self, x_BxTxD, key=None):
        y = self.proj(jax.nn.gelu(self.fc(x_BxTxD), approximate=True))
        return self.dropout(y, deterministic=key is None, rngs=key)


class Block(nnx.Module):
    """Pre-LN transformer block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        dt = cfg.compute_dtype
        self.ln1 = LayerNorm(cfg.d_model, bias=cfg.bias, dtype=dt)
        self.attn = CausalSelfAttention(cfg, rngs=rngs)
        self.ln2 = LayerNorm(cfg.d_model, bias=cfg.bias, dtype=dt)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, x_BxTxD, key=None):
        k1, k2 = (None, None) if key is None else tuple(jax.random.split(key))
        x_BxTxD = x_BxTxD + self.attn(self.ln1(x_BxTxD), k1)
        return x_BxTxD + self.mlp(self.ln2(x_BxTxD), k2)


class GPT2(nnx.Module):
    """GPT-2: token + learned position embeddings, ``n_layer`` pre-LN blocks, final LayerNorm,
    and logits through the transposed token embedding (tied input/output embeddings).

    Initialisation: every weight N(0, 0.02^2), the two residual projections of each block
    N(0, (0.02/sqrt(2 n_layer))^2), biases zero, LayerNorm scales one.

    Call ``model(tokens_BxT, key=None)`` for float32 logits ``BxTxV``; dropout is active only
    when a ``key`` is given.
    """

    def __init__(self, config: GPT2Config, *, rngs: nnx.Rngs):
        cfg = config
        self.config = cfg
        self.wte = nnx.Param(
            0.02 * jax.random.normal(rngs.params(), (cfg.vocab_size, cfg.d_model), jnp.float32)
        )
        self.wpe = nnx.Param(
            0.02 * jax.random.normal(rngs.params(), (cfg.context, cfg.d_model), jnp.float32)
        )
        self.blocks = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.n_layer)])
        self.ln_f = LayerNorm(cfg.d_model, bias=cfg.bias, dtype=cfg.compute_dtype)
        self.dropout = nnx.Dropout(cfg.dropout)

    def __call__(self, tokens_BxT, *, key=None):
        cfg = self.config
        T = tokens_BxT.shape[-1]
        if T > cfg.context:
            raise ValueError(f"sequence length {T} exceeds the model context {cfg.context}")
        dt = cfg.compute_dtype
        keys = [None] * (cfg.n_layer + 1)
        if key is not None:
            keys = list(jax.random.split(key, cfg.n_layer + 1))
        wte_VxD = self.wte[...]
        x_BxTxD = (wte_VxD[tokens_BxT] + self.wpe[...][:T][None]).astype(dt)
        x_BxTxD = self.dropout(x_BxTxD, deterministic=key is None, rngs=keys[0])
        for block, k in zip(self.blocks, keys[1:], strict=True):
            x_BxTxD = block(x_BxTxD, k)
        x_BxTxD = self.ln_f(x_BxTxD)
        logits_BxTxV = jnp.dot(x_BxTxD, wte_VxD.astype(dt).T, preferred_element_type=jnp.float32)
        return logits_BxTxV.astype(jnp.float32)


def count_params(tree) -> int:
    """Number of scalars in a pytree of arrays (or ``ShapeDtypeStruct``s)."""
    return int(sum(math.prod(x.shape) for x in jax.tree.leaves(tree)))


def abstract_param_count(config: GPT2Config) -> int:
    """Parameter count of ``GPT2(config)`` from an abstract model (``nnx.eval_shape``): no
    memory is allocated and no random numbers are drawn, so this is cheap even for 124M."""
    abstract = nnx.eval_shape(lambda: GPT2(config, rngs=nnx.Rngs(0)))
    return count_params(nnx.state(abstract, nnx.Param))


def flops_per_token(config: GPT2Config, seq_len: int | None = None) -> float:
    """Training FLOPs per token: ``6 N + 12 L D T`` (the PaLM appendix-B estimate).

    ``N`` counts the parameters that take part in matmuls (all but the position embeddings; the
    tied token embedding counts once, for the output head); ``6 N`` is forward + backward of the
    dense layers, and ``12 L D T`` is forward + backward of the attention scores and values at
    sequence length ``T`` (the full ``T x T`` product, as is conventional, not the causal half).
    """
    cfg = config
    T = cfg.context if seq_len is None else seq_len
    n = abstract_param_count(cfg) - cfg.context * cfg.d_model
    return 6.0 * n + 12.0 * cfg.n_layer * cfg.d_model * T


def _path_names(path) -> tuple[str, ...]:
    out = []
    for p in path:
        name = getattr(p, "key", getattr(p, "name", getattr(p, "idx", p)))
        out.append(str(name))
    return tuple(out)


def param_label(path) -> str:
    """Parameter group of a parameter from its path in the model state.

    ``"embedding"`` (token/position tables; the token table is also the output head),
    ``"matrix"`` (hidden 2-D kernels of attention and MLP), ``"vector"`` (LayerNorm gains and
    biases). Muon and decoupled weight decay act on ``"matrix"`` only.
    """
    names = _path_names(path)
    if names and names[0] in ("wte", "wpe"):
        return "embedding"
    if "kernel" in names:
        return "matrix"
    return "vector"


def param_labels(params):
    """A pytree like ``params`` holding :func:`param_label` of each leaf."""
    return jax.tree_util.tree_map_with_path(lambda p, _: param_label(p), params)
