"""Shared Equinox layers: MLPs, residual MLP blocks, sinusoidal and random Fourier embeddings.

Every module acts on a single example (a vector) and is vmapped by the caller, as is usual in
Equinox. Non-array fields are static.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

__all__ = [
    "MLP",
    "ResidualBlock",
    "ResidualMLP",
    "SinusoidalEmbedding",
    "FourierFeatures",
]

Activation = Callable[[Array], Array]


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} {value!r}: expected a positive integer")


class MLP(eqx.Module):
    """A plain MLP: ``depth`` hidden layers of ``width`` units, activation between layers.

    ``in_size -> width -> ... -> width -> out_size``; ``depth = 0`` is a single linear layer.
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: Activation = eqx.field(static=True)

    def __init__(
        self,
        in_size: int,
        out_size: int,
        width: int,
        depth: int,
        *,
        activation: Activation = jax.nn.silu,
        key: PRNGKeyArray,
    ):
        for name, v in (("in_size", in_size), ("out_size", out_size), ("width", width)):
            _check_positive(name, v)
        if not isinstance(depth, int) or depth < 0:
            raise ValueError(f"depth {depth!r}: expected an integer >= 0")
        sizes = [in_size] + [width] * depth + [out_size]
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )
        self.activation = activation

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)


class ResidualBlock(eqx.Module):
    """Pre-norm residual MLP block: ``x + W2 act(W1 norm(x))`` with optional dropout.

    ``W2`` starts at zero so a fresh block is the identity (a common choice for deep residual
    MLPs; it keeps the initial function of a deep stack well-behaved).
    """

    norm: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear
    dropout: eqx.nn.Dropout
    activation: Activation = eqx.field(static=True)

    def __init__(
        self,
        width: int,
        *,
        expansion: int = 2,
        dropout: float = 0.0,
        activation: Activation = jax.nn.silu,
        key: PRNGKeyArray,
    ):
        _check_positive("width", width)
        _check_positive("expansion", expansion)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout {dropout!r}: expected a probability in [0, 1)")
        k1, k2 = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(width)
        self.fc1 = eqx.nn.Linear(width, expansion * width, key=k1)
        fc2 = eqx.nn.Linear(expansion * width, width, key=k2)
        self.fc2 = eqx.tree_at(
            lambda lin: (lin.weight, lin.bias), fc2, (jnp.zeros_like(fc2.weight), jnp.zeros(width))
        )
        self.dropout = eqx.nn.Dropout(dropout)
        self.activation = activation

    def __call__(
        self, x: Float[Array, " width"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, " width"]:
        h = self.activation(self.fc1(self.norm(x)))
        h = self.dropout(h, key=key, inference=key is None)
        return x + self.fc2(h)


class ResidualMLP(eqx.Module):
    """``Linear(in -> width)``, ``n_blocks`` :class:`ResidualBlock`, final norm, ``Linear(-> out)``.

    Dropout is active only when a ``key`` is passed to ``__call__``.
    """

    embed: eqx.nn.Linear
    blocks: tuple[ResidualBlock, ...]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(
        self,
        in_size: int,
        out_size: int,
        width: int,
        n_blocks: int,
        *,
        expansion: int = 2,
        dropout: float = 0.0,
        activation: Activation = jax.nn.silu,
        key: PRNGKeyArray,
    ):
        _check_positive("in_size", in_size)
        _check_positive("out_size", out_size)
        _check_positive("width", width)
        if not isinstance(n_blocks, int) or n_blocks < 0:
            raise ValueError(f"n_blocks {n_blocks!r}: expected an integer >= 0")
        ke, kh, *kb = jax.random.split(key, n_blocks + 2)
        self.embed = eqx.nn.Linear(in_size, width, key=ke)
        self.blocks = tuple(
            ResidualBlock(width, expansion=expansion, dropout=dropout, activation=activation, key=k)
            for k in kb
        )
        self.norm = eqx.nn.LayerNorm(width)
        self.head = eqx.nn.Linear(width, out_size, key=kh)

    def __call__(
        self, x: Float[Array, " in_size"], *, key: PRNGKeyArray | None = None
    ) -> Float[Array, " out_size"]:
        h = self.embed(x)
        keys = [None] * len(self.blocks) if key is None else jax.random.split(key, len(self.blocks))
        for block, k in zip(self.blocks, keys, strict=True):
            h = block(h, key=k)
        return self.head(self.norm(h))


class SinusoidalEmbedding(eqx.Module):
    """Transformer-style sinusoidal embedding of a scalar ``t`` into ``dim`` features.

    ``[sin(t w_k), cos(t w_k)]`` with ``w_k = max_period^(-k/(dim/2))``, ``k = 0..dim/2-1``
    (Vaswani et al. 2017; used for diffusion noise levels). Has no parameters.
    """

    dim: int = eqx.field(static=True)
    max_period: float = eqx.field(static=True)

    def __init__(self, dim: int, *, max_period: float = 10_000.0):
        _check_positive("dim", dim)
        if dim % 2:
            raise ValueError(f"dim {dim}: expected an even number of features")
        if not max_period > 1.0:
            raise ValueError(f"max_period {max_period!r}: expected > 1")
        self.dim = dim
        self.max_period = float(max_period)

    def __call__(self, t: Float[Array, ""]) -> Float[Array, " dim"]:
        t = jnp.asarray(t)
        if t.ndim != 0:
            raise ValueError(f"SinusoidalEmbedding takes a scalar; got shape {t.shape}")
        half = self.dim // 2
        freqs = jnp.exp(-math.log(self.max_period) * jnp.arange(half) / half)
        angles = t * freqs
        return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)])


class FourierFeatures(eqx.Module):
    """Fixed random Fourier features ``[cos(2 pi B x), sin(2 pi B x)]``, ``B ~ N(0, scale^2)``.

    ``B`` (``n_features x in_size``) is drawn once and never trained: the call applies
    ``stop_gradient`` to it, and :func:`trainable` style filters should treat it as frozen
    (Tancik et al. 2020). Output size is ``2 * n_features``.
    """

    B: Float[Array, "n_features in_size"]

    def __init__(self, in_size: int, n_features: int, *, scale: float = 1.0, key: PRNGKeyArray):
        _check_positive("in_size", in_size)
        _check_positive("n_features", n_features)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale {scale!r}: expected a finite positive number")
        self.B = scale * jax.random.normal(key, (n_features, in_size))

    @property
    def out_size(self) -> int:
        return 2 * self.B.shape[0]

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out"]:
        if x.shape != (self.B.shape[1],):
            raise ValueError(
                f"FourierFeatures: input shape {x.shape}, expected ({self.B.shape[1]},)"
            )
        proj = 2 * jnp.pi * (jax.lax.stop_gradient(self.B) @ x)
        return jnp.concatenate([jnp.cos(proj), jnp.sin(proj)])
