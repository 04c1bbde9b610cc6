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
from geomopt.lm._loss import chunked_cross_entropy

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


@jax.custom_vjp
def dense(x_NxK, w_KxM):
    """``x @ w`` for ``x`` of shape ``... x K`` and ``w`` of shape ``K x M``, with the weight
    gradient taken as one matmul contracting the token axes of ``x`` and the output cotangent in
    their stored (row-major) layout.

    Same value and gradients as ``x @ w`` under autodiff (up to float rounding); the custom VJP
    exists for speed on the CPU: for ``jnp.dot`` of a 3-D activation, XLA:CPU transposed the
    larger ``B T x M`` cotangent (fused with the GELU backward, so evaluated in a transposed,
    unvectorised loop) before the weight-gradient matmul. Written as below, the weight gradient
    is one dot with both operands contracted on their leading axis, which XLA:CPU computes
    without a copy: the 124M train step at 4 x 1024 is 1.12x faster than with ``jnp.dot``
    (``benchmarks/profile_lm.py --only-ab``, ``benchmarks/results/lm.md``).
    """
    return jnp.dot(x_NxK, w_KxM)


def _dense_fwd(x, w):
    return jnp.dot(x, w), (x, w)


def _dense_bwd(res, g):
    x, w = res
    dx = jnp.dot(g, w.T).astype(x.dtype)
    x_2d = x.reshape(-1, x.shape[-1])
    g_2d = g.reshape(-1, g.shape[-1])
    dw = jax.lax.dot_general(x_2d, g_2d, (((0,), (0,)), ((), ())))
    return dx, dw.astype(w.dtype)


dense.defvjp(_dense_fwd, _dense_bwd)


class Linear(nnx.Module):
    """``dense(x, kernel) + bias`` (``kernel`` ``d_in x d_out``, as ``nnx.Linear`` stores it):
    float32 parameters, compute in ``cfg.compute_dtype``, kernel N(0, std^2), bias zero."""

    def __init__(self, d_in: int, d_out: int, cfg: GPT2Config, std: float, rngs: nnx.Rngs):
        # same random stream as ``nnx.Linear``: one key for the kernel, one for the bias
        self.kernel = nnx.Param(jax.random.normal(rngs.params(), (d_in, d_out), jnp.float32) * std)
        self.bias: nnx.Param | None = nnx.data(None)
        if cfg.bias:
            rngs.params()
            self.bias = nnx.Param(jnp.zeros((d_out,), jnp.float32))
        self.dtype = cfg.compute_dtype

    def __call__(self, x):
        y = dense(x.astype(self.dtype), self.kernel[...].astype(self.dtype))
        if self.bias is not None:
            y = y + self.bias[...].astype(self.dtype).reshape((1,) * (y.ndim - 1) + (-1,))
        return y


def _layernorm(cfg: GPT2Config, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """``nnx.LayerNorm`` as PyTorch's (eps 1e-5, two-pass variance, float32 statistics)."""
    return nnx.LayerNorm(
        cfg.d_model,
        epsilon=1e-5,
        use_bias=cfg.bias,
        use_fast_variance=False,
        dtype=cfg.compute_dtype,
        param_dtype=jnp.float32,
        rngs=rngs,
    )


KVCache = tuple[jax.Array, jax.Array]
"""Keys and values of one attention layer, ``B x S x N x H`` each (``S`` = model context)."""


def _causal_scores(q_BxTxNxH, k_BxTxNxH, start: int, stop: int):
    """Float32 logits ``q_i . k_j / sqrt(H)`` of the queries ``start .. stop - 1`` against the
    keys ``0 .. stop - 1``, ``-inf`` above the causal diagonal: ``B x N x Q x S``."""
    scale = 1.0 / math.sqrt(q_BxTxNxH.shape[-1])
    s_BxNxQxS = jnp.einsum(
        "bqnh,bsnh->bnqs",
        q_BxTxNxH[:, start:stop],
        k_BxTxNxH[:, :stop],
        preferred_element_type=jnp.float32,
    )
    mask_QxS = jnp.arange(stop)[None, :] <= jnp.arange(start, stop)[:, None]
    return jnp.where(mask_QxS, s_BxNxQxS * scale, -jnp.inf)


def causal_attention(q_BxTxNxH, k_BxTxNxH, v_BxTxNxH, block: int, implementation=None):
    """Exact causal softmax attention, ``B x T x N x H`` in and out.

    With ``0 < block < T`` the queries go in blocks of ``block`` (the last may be shorter), and
    block ``i`` attends only to keys ``0 .. end of block i``: the key blocks above the diagonal,
    which the mask would zero anyway, are never computed, so at ``T = 1024`` and ``block = 128``
    the score and value products do 56 % of the full ``T x T`` work (measured on the CPU: fwd+bwd
    of one 4 x 1024 x 12 x 64 layer 3.5x faster than ``jax.nn.dot_product_attention``). Scores
    and softmax are in float32, the probabilities cast to the value dtype. Otherwise (``block``
    0 or ``T <= block``, or an ``implementation`` ``"xla"`` / ``"cudnn"`` is named) it is
    ``jax.nn.dot_product_attention(..., is_causal=True, implementation=implementation)``.
    """
    T = q_BxTxNxH.shape[1]
    if block <= 0 or T <= block or implementation is not None:
        return jax.nn.dot_product_attention(
            q_BxTxNxH, k_BxTxNxH, v_BxTxNxH, is_causal=True, implementation=implementation
        )
    outs = []
    for start in range(0, T, block):
        stop = min(start + block, T)
        s_BxNxQxS = _causal_scores(q_BxTxNxH, k_BxTxNxH, start, stop)
        p_BxNxQxS = jax.nn.softmax(s_BxNxQxS, axis=-1).astype(v_BxTxNxH.dtype)
        outs.append(jnp.einsum("bnqs,bsnh->bqnh", p_BxNxQxS, v_BxTxNxH[:, :stop]))
    return jnp.concatenate(outs, axis=1)


def attention_logit_max(q_BxTxNxH, k_BxTxNxH, block: int = 128):
    """The largest causal attention logit ``q_i . k_j / sqrt(H)`` (``j <= i``) of each head,
    over the batch and the positions: ``(N,)`` float32, not differentiated (QK-clip's ``S_h``,
    :func:`geomopt.optim.qk_clip`). Computed on its own, in query blocks of ``block``, so every
    attention implementation gives the same number; it costs one more forward score product."""
    q_BxTxNxH = jax.lax.stop_gradient(q_BxTxNxH)
    k_BxTxNxH = jax.lax.stop_gradient(k_BxTxNxH)
    T = q_BxTxNxH.shape[1]
    block = T if block <= 0 else block
    best_N = jnp.full(q_BxTxNxH.shape[2], -jnp.inf, jnp.float32)
    for start in range(0, T, block):
        s_BxNxQxS = _causal_scores(q_BxTxNxH, k_BxTxNxH, start, min(start + block, T))
        best_N = jnp.maximum(best_N, jnp.max(s_BxNxQxS, axis=(0, 2, 3)))
    return best_N


class AttnLogitMax(nnx.Intermediate):
    """The per-head largest attention logit of the last call, sown by
    :class:`CausalSelfAttention` when asked (``GPT2.loss(..., logit_max=True)``)."""


class CausalSelfAttention(nnx.Module):
    """Multi-head causal self-attention (:func:`causal_attention`, blocked or the library's
    ``config.attention`` implementation; with a cache, ``jax.nn.dot_product_attention`` with the
    cache mask and the backend's default implementation).

    With a ``cache`` (keys/values of the earlier positions) and the position ``pos`` of the first
    of the ``T`` new tokens, the new keys/values are written at ``pos .. pos+T-1`` and the queries
    attend to the cache positions ``<=`` their own; the updated cache is returned too.
    """

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        d = cfg.d_model
        self.qkv = Linear(d, 3 * d, cfg, 0.02, rngs)
        self.proj = Linear(d, d, cfg, resid_std, rngs)
        self.dropout = nnx.Dropout(cfg.dropout)
        self.n_head = cfg.n_head
        self.attn_block = cfg.attn_block
        self.implementation = None if cfg.attention == "blocked" else cfg.attention

    def __call__(
        self, x_BxTxD, key=None, cache: KVCache | None = None, pos=None, logit_max=False
    ):
        B, T, D = x_BxTxD.shape
        qkv = self.qkv(x_BxTxD).reshape(B, T, 3, self.n_head, D // self.n_head)
        q_BxTxNxH, k_BxTxNxH, v_BxTxNxH = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if logit_max:
            self.sow(
                AttnLogitMax, "logit_max", attention_logit_max(q_BxTxNxH, k_BxTxNxH),
                reduce_fn=lambda _, x: x, init_fn=lambda: None,
            )  # fmt: skip
        if cache is None:
            y = causal_attention(
                q_BxTxNxH, k_BxTxNxH, v_BxTxNxH, self.attn_block, self.implementation
            )
        else:
            k_BxSxNxH, v_BxSxNxH = cache
            start = (0, pos, 0, 0)
            k_BxSxNxH = jax.lax.dynamic_update_slice(
                k_BxSxNxH, k_BxTxNxH.astype(k_BxSxNxH.dtype), start
            )
            v_BxSxNxH = jax.lax.dynamic_update_slice(
                v_BxSxNxH, v_BxTxNxH.astype(v_BxSxNxH.dtype), start
            )
            S = k_BxSxNxH.shape[1]
            mask_TxS = jnp.arange(S)[None, :] <= (pos + jnp.arange(T))[:, None]
            y = jax.nn.dot_product_attention(
                q_BxTxNxH, k_BxSxNxH, v_BxSxNxH, mask=mask_TxS[None, None]
            )
            cache = (k_BxSxNxH, v_BxSxNxH)
        y_BxTxD = self.proj(y.reshape(B, T, D))
        return self.dropout(y_BxTxD, deterministic=key is None, rngs=key), cache


class MLP(nnx.Module):
    """``proj(gelu(fc(x)))`` with hidden width 4 D; GELU is the tanh approximation (released
    GPT-2) or the exact erf form (PyTorch's default, the paper), per ``cfg.activation``."""

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        self.fc = Linear(cfg.d_model, 4 * cfg.d_model, cfg, 0.02, rngs)
        self.proj = Linear(4 * cfg.d_model, cfg.d_model, cfg, resid_std, rngs)
        self.dropout = nnx.Dropout(cfg.dropout)
        self.approximate = cfg.activation == "gelu_tanh"

    def __call__(self, x_BxTxD, key=None):
        y = self.proj(jax.nn.gelu(self.fc(x_BxTxD), approximate=self.approximate))
        return self.dropout(y, deterministic=key is None, rngs=key)


class Block(nnx.Module):
    """Pre-LN transformer block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
        self.ln1 = _layernorm(cfg, rngs)
        self.attn = CausalSelfAttention(cfg, rngs=rngs)
        self.ln2 = _layernorm(cfg, rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(
        self, x_BxTxD, key=None, cache: KVCache | None = None, pos=None, logit_max=False
    ):
        k1, k2 = (None, None) if key is None else tuple(jax.random.split(key))
        y_BxTxD, cache = self.attn(self.ln1(x_BxTxD), k1, cache, pos, logit_max)
        x_BxTxD = x_BxTxD + y_BxTxD
        return x_BxTxD + self.mlp(self.ln2(x_BxTxD), k2), cache


class GPT2(nnx.Module):
    """GPT-2: token + learned position embeddings, ``n_layer`` pre-LN blocks, final LayerNorm,
    and logits through the transposed token embedding (tied input/output embeddings).

    Layers are :class:`Linear` (``nnx.Linear``'s layout, a CPU-friendly weight gradient) /
    ``nnx.LayerNorm`` (float32 parameters, compute in
    ``config.compute_dtype``). Initialisation: every weight N(0, 0.02^2), the two residual
    projections of each block N(0, (0.02/sqrt(2 n_layer))^2), biases zero, LayerNorm scales one.

    - ``model(tokens_BxT, key=None)``: float32 logits ``BxTxV``; dropout only when a ``key`` is
      given.
    - ``model.loss(tokens_BxT1, key=None)``: ``(mean next-token cross-entropy, accuracy)`` of
      ``tokens[:, 1:]`` given ``tokens[:, :-1]``, through :func:`geomopt.lm._loss.
      chunked_cross_entropy` with ``config.loss_chunk`` tokens per chunk (the full logits are
      never formed when ``loss_chunk > 0``). This is the training and validation loss.
    - ``model.init_cache(batch)`` / ``model.decode(tokens_BxT, cache, pos)``: incremental
      decoding with a key/value cache (``geomopt.lm.sample`` uses it).
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
        self.ln_f = _layernorm(cfg, rngs)
        self.dropout = nnx.Dropout(cfg.dropout)

    def hidden(self, tokens_BxT, *, key=None, cache=None, pos=None, logit_max=False):
        """Final-LayerNorm hidden states ``BxTxD`` (compute dtype) and the updated cache (a
        list of per-layer :data:`KVCache`, or ``None`` without one). ``pos``: position of the
        first token (0 without a cache). ``logit_max``: every attention layer sows its
        per-head largest logit (:class:`AttnLogitMax`)."""
        cfg = self.config
        T = tokens_BxT.shape[-1]
        if T > cfg.context:
            raise ValueError(f"sequence length {T} exceeds the model context {cfg.context}")
        keys = [None] * (cfg.n_layer + 1)
        if key is not None:
            keys = list(jax.random.split(key, cfg.n_layer + 1))
        if cache is None:
            pos_TxD = self.wpe[...][:T]
        else:
            pos_TxD = jax.lax.dynamic_slice_in_dim(self.wpe[...], pos, T, axis=0)
        x_BxTxD = (self.wte[...][tokens_BxT] + pos_TxD[None]).astype(cfg.compute_dtype)
        x_BxTxD = self.dropout(x_BxTxD, deterministic=key is None, rngs=keys[0])
        new_cache = None if cache is None else []
        for i, (block, k) in enumerate(zip(self.blocks, keys[1:], strict=True)):
            x_BxTxD, c = block(x_BxTxD, k, None if cache is None else cache[i], pos, logit_max)
            if cache is not None:
                new_cache.append(c)
        return self.ln_f(x_BxTxD), new_cache

    def logits(self, x_BxTxD):
        """Float32 logits of hidden states through the tied token table."""
        w_VxD = self.wte[...].astype(x_BxTxD.dtype)
        return jnp.dot(x_BxTxD, w_VxD.T, preferred_element_type=jnp.float32).astype(jnp.float32)

    def __call__(self, tokens_BxT, *, key=None):
        return self.logits(self.hidden(tokens_BxT, key=key)[0])

    def loss(self, tokens_BxT1, *, key=None, logit_max=False):
        """Mean cross-entropy and next-token accuracy of ``tokens[:, 1:]`` (see class doc);
        with ``logit_max`` also the largest attention logit of every layer and head,
        ``(n_layer, n_head)`` (:func:`attention_logit_max`, for QK-clip)."""
        x_BxTxD, _ = self.hidden(tokens_BxT1[:, :-1], key=key, logit_max=logit_max)
        out = chunked_cross_entropy(
            x_BxTxD, self.wte[...], tokens_BxT1[:, 1:], chunk=self.config.loss_chunk
        )
        if not logit_max:
            return out
        sown = nnx.pop(self, AttnLogitMax)
        s_LxN = jnp.stack([sown["blocks"][i]["attn"]["logit_max"][...] for i in
                           range(self.config.n_layer)])  # fmt: skip
        return (*out, s_LxN)

    def init_cache(self, batch: int) -> list[KVCache]:
        """An empty (zero) key/value cache for ``batch`` sequences of up to ``context`` tokens."""
        cfg = self.config
        shape = (batch, cfg.context, cfg.n_head, cfg.head_dim)
        return [
            (jnp.zeros(shape, cfg.compute_dtype), jnp.zeros(shape, cfg.compute_dtype))
            for _ in range(cfg.n_layer)
        ]

    def decode(self, tokens_BxT, cache: list[KVCache], pos):
        """Logits ``BxTxV`` of ``T`` new tokens at positions ``pos .. pos+T-1`` given the cached
        earlier positions, and the updated cache (no dropout). ``pos`` may be traced."""
        x_BxTxD, cache = self.hidden(tokens_BxT, cache=cache, pos=pos)
        return self.logits(x_BxTxD), cache


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
