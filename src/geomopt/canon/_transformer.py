"""A serialized point transformer (the Point Transformer V3 idea, in Equinox; ours).

Points are serialized by a curve (lex, Hilbert, Morton, or a random order), cut into windows of
``W`` consecutive points, and attention runs within each window. Consecutive blocks alternate
between two serializations of the same curve -- on the axes ``(x_0, ..., x_{d-1})`` and on the
reversed axes ``(x_{d-1}, ..., x_0)``, as PTv3 alternates "z" / "z-trans" and "hilbert" /
"hilbert-trans" -- and every other pair of blocks shifts its windows by ``W / 2`` so that
information crosses window borders. The head max-pools the points (as the official repository's
unused ``PointTransformerClassifier``), then LayerNorm and a linear layer.

What differs from PTv3 (stated, not hidden): no sparse-convolution positional encoding and no
pooling hierarchy -- point features come from a per-point MLP of the normalised coordinates
(``d -> 64 -> dim``, as the official transformer's embedding); a fixed number of points per cloud
that the window size must divide. Serialization ``random``: two random orders per cloud, drawn
once from ``seed`` (not re-drawn per epoch), i.e. windows of random points.

Quantisation for Hilbert / Morton is the canonized MLP's (``floor(X * 2**bits)`` clamped).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from geomopt.canon._layers import check_cloud, check_rate, dropout, model_order
from geomopt.canon._model_config import ModelConfig
from geomopt.canon._orders import normalize_cloud

__all__ = ["SERIALIZATIONS", "serializations", "WindowBlock", "SerializedTransformer"]

SERIALIZATIONS = ("lex", "hilbert", "morton", "random")


@functools.partial(jax.jit, static_argnames=("name", "bits"))
def _both(c, *, name: str, bits: int):
    fwd = model_order(name, c, bits)
    rev = model_order(name, c[..., ::-1], bits)
    return jnp.stack([fwd, rev]).astype(jnp.int32)


def serializations(
    name: str, xn: Float[Array, "... P d"], bits: int = 12, *, seed: int = 0
) -> Int[Array, "... 2 P"]:
    """The two serializations ``(..., 2, P)`` of normalised clouds: the curve on the axes as they
    are and on the reversed axes (``random``: two random orders per cloud from ``seed``)."""
    if name not in SERIALIZATIONS:
        raise ValueError(f"serialization {name!r}: expected one of {SERIALIZATIONS}")
    xn = jnp.asarray(xn)
    batch = xn.shape[:-2]
    flat = xn.reshape((-1, *xn.shape[-2:]))
    p = xn.shape[-2]
    if name == "random":
        keys = jax.random.split(jax.random.key(seed), flat.shape[0] * 2)
        perms = jax.vmap(lambda k: jax.random.permutation(k, p))(keys).astype(jnp.int32)
        return perms.reshape((*batch, 2, p))

    f = jax.vmap(functools.partial(_both, name=name, bits=bits))
    out = jnp.concatenate([f(flat[i : i + 4096]) for i in range(0, len(flat), 4096)])
    return out.reshape((*batch, 2, p))


class WindowBlock(eqx.Module):
    """Pre-norm block: attention within windows of the serialized points, then a point MLP."""

    norm1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, dim: int, heads: int, *, key):
        ka, km = jax.random.split(key)
        self.norm1 = eqx.nn.LayerNorm(dim)
        self.attn = eqx.nn.MultiheadAttention(heads, dim, key=ka)
        self.norm2 = eqx.nn.LayerNorm(dim)
        self.mlp = eqx.nn.MLP(dim, dim, 2 * dim, 1, activation=jax.nn.gelu, key=km)

    def __call__(self, h, perm, *, window: int, shift: int, rate, key=None):
        p, dim = h.shape
        g = jax.vmap(self.norm1)(h)[perm]
        g = jnp.roll(g, -shift, axis=0).reshape(p // window, window, dim)
        a = jax.vmap(lambda w: self.attn(w, w, w))(g).reshape(p, dim)
        a = jnp.zeros_like(h).at[perm].set(jnp.roll(a, shift, axis=0))
        k1, k2 = (None, None) if key is None else jax.random.split(key)
        h = h + dropout(a, rate, k1)
        return h + dropout(jax.vmap(self.mlp)(jax.vmap(self.norm2)(h)), rate, k2)


class SerializedTransformer(eqx.Module):
    """Serialize, embed, window-attention blocks with alternating curves, max-pool, head."""

    embed: eqx.nn.MLP
    blocks: tuple[WindowBlock, ...]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    serialization: str = eqx.field(static=True)
    window: int = eqx.field(static=True)
    bits: int = eqx.field(static=True)
    rate: float = eqx.field(static=True)
    n_points: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(
        self,
        n_points: int,
        d: int,
        n_classes: int,
        cfg: ModelConfig,
        *,
        serialization: str,
        key: PRNGKeyArray,
    ):
        if serialization not in SERIALIZATIONS:
            raise ValueError(f"serialization {serialization!r}: expected one of {SERIALIZATIONS}")
        w = cfg.tf_window
        if not isinstance(w, int) or w < 1 or n_points % w:
            raise ValueError(f"tf_window {w!r}: expected a positive divisor of n_points {n_points}")
        if cfg.tf_dim % cfg.tf_heads:
            raise ValueError(f"tf_dim {cfg.tf_dim} is not divisible by tf_heads {cfg.tf_heads}")
        check_rate("dropout", cfg.dropout)
        ke, kh, *kb = jax.random.split(key, cfg.tf_depth + 2)
        self.embed = eqx.nn.MLP(d, cfg.tf_dim, 64, 1, activation=jax.nn.gelu, key=ke)
        self.blocks = tuple(WindowBlock(cfg.tf_dim, cfg.tf_heads, key=k) for k in kb)
        self.norm = eqx.nn.LayerNorm(cfg.tf_dim)
        self.head = eqx.nn.Linear(cfg.tf_dim, n_classes, key=kh)
        self.serialization, self.window, self.bits = serialization, w, cfg.bits
        self.rate, self.n_points, self.d = float(cfg.dropout), n_points, d

    def apply(self, inputs, *, key=None, rates=None) -> Array:
        """Logits from ``(normalised cloud (P, d), serializations (2, P))``."""
        xn, perms = inputs
        rate = self.rate if rates is None else rates["dropout"]
        keys = [None] * len(self.blocks) if key is None else jax.random.split(key, len(self.blocks))
        h = jax.vmap(self.embed)(xn)
        for i, (block, k) in enumerate(zip(self.blocks, keys, strict=True)):
            shift = (self.window // 2) * ((i // 2) % 2)
            h = block(h, perms[i % 2], window=self.window, shift=shift, rate=rate, key=k)
        return self.head(self.norm(jnp.max(h, axis=0)))

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        check_cloud(x, self.n_points, self.d, "SerializedTransformer")
        xn = normalize_cloud(x, "per_axis")
        return self.apply((xn, serializations(self.serialization, xn, self.bits)), key=key)
