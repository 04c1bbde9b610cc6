"""Multi-word unsigned integers and the bit helpers every curve encoder shares.

An index is a list of ``uint32`` words, most significant first (the layout of
:mod:`geomopt.canon._curves`); here: bit interleaving and its inverse (Morton order, and the
last step of decoding a Hilbert index), the left shift of a multi-word integer, Skilling's
per-bit invert-or-exchange step, and small list/stack utilities.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, UInt32


def _split(q, dtype) -> list[Array]:
    q = q.astype(dtype)
    return [q[..., i] for i in range(q.shape[-1])]


def _interleave(xs: list[Array], b: int, n_out: int) -> UInt32[Array, "... W"]:
    """Words of the integer whose bit ``l*d + (d-1-i)`` is bit ``l`` of ``xs[i]`` (l < b)."""
    d = len(xs)
    words: list[Array | None] = [None] * n_out
    for i, x in enumerate(xs):
        for level in range(b):
            pos = level * d + (d - 1 - i)
            k, s = divmod(pos, 32)
            shift = s - level
            part = (x << shift) if shift >= 0 else (x >> (-shift))
            part = (part & jnp.asarray(1 << s, x.dtype)).astype(jnp.uint32)
            slot = n_out - 1 - k
            words[slot] = part if words[slot] is None else words[slot] | part
    shape = xs[0].shape
    filled = [jnp.zeros(shape, jnp.uint32) if w is None else w for w in words]
    return _stack_last(filled)


def _deinterleave(words: Array, d: int, b: int, dtype) -> list[Array]:
    """Inverse of :func:`_interleave` for the low ``d * b`` bits of ``words``."""
    n_in = words.shape[-1]
    ws = [words[..., j].astype(dtype) for j in range(n_in)]
    xs = []
    for i in range(d):
        x = None
        for level in range(b):
            pos = level * d + (d - 1 - i)
            k, s = divmod(pos, 32)
            w = ws[n_in - 1 - k]
            shift = level - s
            part = (w << shift) if shift >= 0 else (w >> (-shift))
            part = part & jnp.asarray(1 << level, dtype)
            x = part if x is None else x | part
        xs.append(x)
    return xs


def _shift_words_left(words: list[Array], s: int) -> list[Array]:
    """Shift a multi-word integer (list of uint32, most significant first) left by ``s`` bits."""
    whole, s = divmod(s, 32)
    if whole:
        zero = jnp.zeros_like(words[0])
        words = (words[whole:] + [zero] * whole)[: len(words)]
    if s == 0:
        return list(words)
    out = []
    for k in range(len(words)):
        v = words[k] << s
        if k + 1 < len(words):
            v = v | (words[k + 1] >> (32 - s))
        out.append(v)
    return out


def _invert_or_swap(xs: list[Array], i: int, set_mask: Array, low: Array) -> None:
    """Skilling's per-bit step, in place on ``xs``: where bit ``i`` is set (``set_mask`` all
    ones) invert the ``low`` bits of ``xs[0]``, else exchange the ``low`` bits of ``xs[0]`` and
    ``xs[i]``. The step is its own inverse, so encoding and decoding share it."""
    invert = set_mask & low
    if i == 0:
        xs[0] = xs[0] ^ invert
    else:
        swap = (xs[0] ^ xs[i]) & (low & ~set_mask)
        xs[0] = xs[0] ^ (invert | swap)
        xs[i] = xs[i] ^ swap


def _narrow_dtype(b: int) -> np.dtype:
    """The narrowest unsigned type holding ``b`` bits (``uint8`` .. ``uint64``)."""
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if b <= 8 * np.dtype(dt).itemsize:
            return np.dtype(dt)
    raise ValueError(f"{b} bits per coordinate: at most 64 are supported")


def _stack_last(words: list[Array]) -> Array:
    """``stack(words, axis=-1)``, built as a stack on axis 0 and a transpose: XLA CPU compiles a
    minor-axis concatenate of long fused chains pathologically slowly (measured: ~10^4x)."""
    return jnp.moveaxis(jnp.stack(words, axis=0), 0, -1)


def _roll(xs: list[Array], shift: int) -> list[Array]:
    """``new[i] = old[i - shift]`` (cyclic), as ``jnp.roll(x, shift, axis=-1)``."""
    d = len(xs)
    s = shift % d
    return xs[d - s :] + xs[: d - s] if s else list(xs)
