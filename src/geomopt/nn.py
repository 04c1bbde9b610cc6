"""Shared Equinox layers that ``equinox.nn`` does not have.

Only the sinusoidal embedding of a scalar (the diffusion noise level) is left here; MLPs are
``equinox.nn.MLP`` and GPT-2 uses ``flax.nnx`` layers. Every module acts on a single example and
is vmapped by the caller, as is usual in Equinox. Non-array fields are static.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["SinusoidalEmbedding"]


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} {value!r}: expected a positive integer")


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
