"""The layers and helpers the point-cloud classifiers share: input checks, dropout (whole points
or units), the official quantisation and Hilbert order of the training code, the canonical-order
dispatch, the fixed random Fourier map, the residual block, and the default dropout rates. The
models (:mod:`._models`, :mod:`._rotations`, :mod:`._transformer`) build on these; the factory
(:mod:`._factory`) builds the models."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.canon._curves import hilbert_index, morton_index
from geomopt.canon._model_config import ModelConfig
from geomopt.canon._orders import lex_order, sort_by_words

__all__ = [
    "CANON_ORDERS",
    "FourierMap",
    "ResidualBlock",
    "check_cloud",
    "check_rate",
    "default_rates",
    "dropout",
    "model_order",
    "official_hilbert_order",
    "official_quantize",
    "point_dropout",
]

CANON_ORDERS = ("identity", "lex", "hilbert", "morton")


def check_cloud(x, n_points: int, d: int, who: str) -> None:
    if x.ndim != 2 or x.shape != (n_points, d):
        raise ValueError(
            f"{who}: cloud of shape {x.shape}; expected one cloud ({n_points}, {d}) "
            "(vmap over a batch)"
        )


def check_rate(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} {p!r}: expected a probability in [0, 1)")


def dropout(h: Array, rate, key: PRNGKeyArray | None) -> Array:
    """Inverted elementwise dropout with a possibly traced ``rate``; identity without ``key``."""
    if key is None:
        return h
    keep = jax.random.bernoulli(key, 1.0 - rate, h.shape)
    return jnp.where(keep, h / (1.0 - rate), jnp.zeros_like(h))


def point_dropout(h: Float[Array, "P F"], rate, key: PRNGKeyArray | None) -> Float[Array, "P F"]:
    """Drop whole points (``torch.nn.Dropout1d`` over the point axis, as the official model):
    zero each point's features with probability ``rate``, scale the kept ones by
    ``1 / (1 - rate)``. Identity when ``key`` is None."""
    if key is None:
        return h
    keep = jax.random.bernoulli(key, 1.0 - rate, (h.shape[0], 1))
    return jnp.where(keep, h / (1.0 - rate), jnp.zeros_like(h))


def official_quantize(x: Float[Array, "P d"], bits: int) -> Array:
    """Grid cells of the official training-time Hilbert order: ``floor(X * 2**bits)`` clamped to
    ``2**bits - 1`` (``space_filling_pytorch`` with ``space_size = 2**bits``) on ``X`` in
    ``[0, 1]``."""
    cells = jnp.maximum(jnp.floor(x * 2.0**bits), 0.0)
    # the clamp is a select, not a clip to the float 2**bits - 1: at bits = 32 that bound is not
    # a float32 and not a jitted int32 argument
    full = cells >= 2.0**bits
    return jnp.where(full, np.uint32(2**bits - 1), cells.astype(jnp.uint32))


def official_hilbert_order(x: Float[Array, "P d"], bits: int = 12) -> Array:
    """The official training-time Hilbert order of a normalised cloud.

    ``space_filling_pytorch``'s Hilbert code equals ``hilbertcurve``'s ``HilbertCurve(bits, 3)``
    on the axes taken in the order (z, x, y) (canon.md); in ``d`` dimensions the last axis is
    moved first likewise. Cells from :func:`official_quantize`; ties keep the input order.
    Official in 3-D only (tested against ``hilbertcurve`` there).
    """
    q = official_quantize(x, bits)
    q = jnp.concatenate([q[..., -1:], q[..., :-1]], axis=-1)
    return sort_by_words(hilbert_index(q, bits))


def model_order(name: str, xn: Float[Array, "P d"], bits: int) -> Array:
    """The permutation of the normalised cloud ``xn`` used by the MLPs for order ``name``."""
    if name == "identity":
        return jnp.arange(xn.shape[-2], dtype=jnp.int32)
    if name == "lex":
        return lex_order(xn)
    if name == "hilbert":
        return official_hilbert_order(xn, bits)
    if name == "morton":
        q = official_quantize(xn, bits)
        return sort_by_words(morton_index(q, bits))
    raise ValueError(f"order {name!r}: expected one of {CANON_ORDERS}")


class FourierMap(eqx.Module):
    """The official ``FourierFeatureMap``: ``[sin(2 pi x B), cos(2 pi x B)]`` with a fixed
    ``B ~ N(0, scale^2)`` of shape ``d x (n_bands d)`` (a buffer: never trained, see
    :func:`trainable_filter`)."""

    B: Float[Array, "d F"]

    def __init__(self, d: int, n_bands: int, scale: float, *, key):
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"fourier_scale {scale!r}: expected a finite positive number")
        if not isinstance(n_bands, int) or n_bands < 1:
            raise ValueError(f"n_bands {n_bands!r}: expected a positive integer")
        self.B = scale * jax.random.normal(key, (d, n_bands * d))

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " F2"]:
        proj = (2 * jnp.pi * x) @ jax.lax.stop_gradient(self.B)
        return jnp.concatenate([jnp.sin(proj), jnp.cos(proj)])


class ResidualBlock(eqx.Module):
    """The official ``MLPResidualBlock``: ``skip(h) + dropout(GELU(Linear(LayerNorm(h))))``,
    ``skip`` linear when the width changes, the identity otherwise. GELU is the exact (erf) one,
    as ``torch.nn.GELU``."""

    norm: eqx.nn.LayerNorm
    linear: eqx.nn.Linear
    skip: eqx.nn.Linear | None

    def __init__(self, n_in: int, n_out: int, *, key):
        k1, k2 = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(n_in)
        self.linear = eqx.nn.Linear(n_in, n_out, key=k1)
        self.skip = eqx.nn.Linear(n_in, n_out, key=k2) if n_in != n_out else None

    def __call__(self, h: Array, rate, key: PRNGKeyArray | None) -> Array:
        out = dropout(jax.nn.gelu(self.linear(self.norm(h)), approximate=False), rate, key)
        return (h if self.skip is None else self.skip(h)) + out


def default_rates(cfg: ModelConfig) -> dict[str, float]:
    """The dropout probabilities of ``cfg`` as the ``rates`` mapping of ``apply``."""
    for n in ("dropout", "point_dropout", "input_dropout"):
        check_rate(n, getattr(cfg, n))
    return {
        "dropout": cfg.dropout,
        "point_dropout": cfg.point_dropout,
        "input_dropout": cfg.input_dropout,
    }
