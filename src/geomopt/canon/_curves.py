"""Hilbert and Morton (z-order) indices in any dimension, as multi-word unsigned integers.

Convention: Skilling's "transpose" algorithm (J. Skilling, *Programming the Hilbert curve*, AIP
Conf. Proc. 707, 2004), exactly as in the PyPI package ``hilbertcurve``
(``HilbertCurve(bits, d).distance_from_point``) and ``numpy-hilbert-curve`` (``hilbert.encode``).
Other libraries orient the curve differently, so "Hilbert order" here always means this one.

An index has ``d * bits`` bits and is returned as ``W = ceil(d * bits / 32)`` ``uint32`` words,
most significant word first: ``index = sum_k words[k] * 2**(32 * (W - 1 - k))``. No x64 mode is
needed for any ``d`` or ``bits``.

Why this is fast: Skilling's per-level "invert or exchange the lower bits" step is a handful of
whole-word unsigned-integer operations (a mask from the level's bit, an xor-swap under that mask),
so one level over all points is a short, static, branch-free chain of vectorised integer
operations. Three exact encoders share it, and :func:`hilbert_index` picks the one measured
fastest for ``(d, bits)`` (see ``_encoder_mode``): for ``d <= 4`` (from 3 bits, 5 bits in 4-D) a
precomputed finite-state table (state = the signed permutation accumulated by the
exchanges/inversions, plus the Gray-code parity; equivalent states merged), several levels per
gather (:func:`_hilbert_words_table`); otherwise, up to 64 index bits (every ``d`` at the usual
resolutions), all levels unrolled, so XLA compiles each output word into one vectorised
elementwise loop over the points (:func:`_hilbert_words_unrolled`); and ``d > 4`` beyond 64 bits
the levels in a loop over cache-sized chunks of points (:func:`_hilbert_words_loop`), in the
narrowest integer type that holds ``bits``.

Levels above the coordinates' bit width (``bits > 32`` with 32-bit coordinates) hold only zero
bits; at such a level Skilling's step exchanges ``x_0`` with every ``x_i`` in turn, which rotates
the coordinates by one. So ``H_bits(q) = H_B(roll(q, bits - B))`` padded with leading zero words,
which lets every ``bits`` run with ``B <= 32`` levels of work.

Here: the public functions, the checks and the choice of encoder; the encoders are in
:mod:`geomopt.canon._curves_skilling` (unrolled, loop) and :mod:`geomopt.canon._curves_table`
(table), the shared word and bit helpers in :mod:`geomopt.canon._curves_bits`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Integer, UInt32

from geomopt.canon._curves_bits import _deinterleave, _interleave, _roll, _split, _stack_last
from geomopt.canon._curves_skilling import (
    _hilbert_words_loop,
    _hilbert_words_unrolled,
    _transpose_to_axes,
)
from geomopt.canon._curves_table import _TABLE_MAX_D, _hilbert_words_table

__all__ = [
    "hilbert_index",
    "hilbert_point",
    "morton_index",
    "morton_point",
    "n_words",
    "words_to_int",
    "int_to_words",
]


def n_words(d: int, bits: int) -> int:
    """Number of ``uint32`` words, ``ceil(d * bits / 32)``, of a ``d``-dimensional index."""
    _check_static(d, bits)
    return -(-d * bits // 32)


def words_to_int(words) -> int | np.ndarray:
    """Python integer(s) from index words ``(..., W)`` (most significant first); for tests/users.

    Returns a Python ``int`` for a single index, else a NumPy object array of ints.
    """
    w = np.asarray(words)
    if w.ndim == 0:
        raise ValueError("words_to_int: expected an array of shape (..., W)")
    flat = w.reshape(-1, w.shape[-1]).astype(np.uint64)
    out = np.empty(flat.shape[0], dtype=object)
    for n, row in enumerate(flat):
        value = 0
        for word in row:
            value = (value << 32) | int(word)
        out[n] = value
    out = out.reshape(w.shape[:-1])
    return out.item() if out.ndim == 0 else out


def int_to_words(values, d: int, bits: int) -> np.ndarray:
    """Inverse of :func:`words_to_int`: ``uint32`` words ``(..., W)`` of Python integers."""
    w = n_words(d, bits)
    vals = np.asarray(values, dtype=object)
    out = np.zeros((*vals.shape, w), dtype=np.uint32)
    for idx in np.ndindex(vals.shape):
        v = int(vals[idx])
        if not 0 <= v < 2 ** (d * bits):
            raise ValueError(f"index {v}: expected an integer in [0, 2**{d * bits})")
        for k in range(w):
            out[(*idx, w - 1 - k)] = (v >> (32 * k)) & 0xFFFFFFFF
    return out


def _check_static(d: int, bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits < 1:
        raise ValueError(f"bits {bits!r}: expected an integer >= 1")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"dimension {d!r}: expected an integer >= 1")


def _work_dtype(dtype) -> np.dtype:
    return np.dtype(np.uint64) if np.dtype(dtype).itemsize == 8 else np.dtype(np.uint32)


def _check_coords(q, bits: int, name: str) -> Array:
    """Integer coordinates, checked on concrete input to lie in ``[0, 2**bits)`` (a
    ``ValueError``/``TypeError`` naming the bad value).

    Traced values are not checked: a runtime error under ``jit`` reaches the user only as an
    opaque ``INTERNAL: CpuCallback error``, so the contract there is that an out-of-range
    coordinate is reduced modulo ``2**bits`` (the encoders read only its low ``bits`` bits, two's
    complement for negative values); ``geomopt.canon.checked`` raises instead.
    """
    dtype = np.dtype(q.dtype) if hasattr(q, "dtype") else None
    if dtype is None or not (np.issubdtype(dtype, np.integer)):
        arr = np.asarray(q) if not isinstance(q, jax.core.Tracer) else None
        if arr is not None and np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
            raise ValueError(
                f"{name}: coordinates contain NaN; expected integers in [0, 2**{bits})"
            )
        raise TypeError(
            f"{name}: coordinates of dtype {dtype or type(q).__name__}; expected an integer "
            f"array with entries in [0, 2**{bits}) (quantise floats with geomopt.canon.quantize)"
        )
    q = jnp.asarray(q)
    if q.ndim < 1:
        raise ValueError(f"{name}: coordinates of shape {q.shape}; expected (..., d)")
    if isinstance(q, jax.core.Tracer):
        return q
    arr = np.asarray(q)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= 2**bits:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{name}: coordinate {bad} out of range; expected [0, 2**{bits})")
    return q


def _coords_in_range(q, bits: int) -> Array:
    """Traced scalar: every entry of the integer array ``q`` lies in ``[0, 2**bits)``.

    One bitwise-or reduction: a value is out of range iff it has a bit at or above ``bits``
    (negative values have the sign bit, which the arithmetic shift keeps); measured 2.5x faster
    than max/min reductions on XLA CPU."""
    dtype = np.dtype(q.dtype)
    signed = np.issubdtype(dtype, np.signedinteger)
    width = 8 * dtype.itemsize - (1 if signed else 0)
    if q.size == 0 or (bits >= width and not signed):
        return jnp.asarray(True)
    ored = jax.lax.reduce(q, jnp.asarray(0, dtype), jax.lax.bitwise_or, tuple(range(q.ndim)))
    return (ored >> bits) == 0 if bits < width else ored >= 0


def hilbert_index(q: Integer[Array, "... d"], bits: int) -> UInt32[Array, "... W"]:
    """Hilbert index of integer points ``q`` in ``[0, 2**bits)^d``, as ``uint32`` words.

    Equals ``HilbertCurve(bits, d).distance_from_point(q)`` of the PyPI ``hilbertcurve``
    package for every ``d >= 1`` and ``bits >= 1`` (Skilling's transpose convention), written as
    ``W = ceil(d*bits/32)`` words, most significant first. Jittable and vmappable; ``bits`` is
    static. The encoder is the one measured fastest for ``(d, bits)``: a table-driven state machine
    (one small-table gather per 2-16 levels) for ``d <= 4`` from 3 bits (5 bits in 4-D; d = 1
    always); otherwise, up to 64 index bits, Skilling's levels unrolled into one elementwise loop
    per output word; ``d > 4`` beyond 64 bits a level loop over cache-sized chunks of points. All
    compile in under a second (0.1-0.6 s measured at the benchmark's sizes).

    Performance note (XLA CPU): the unrolled encoder (``d >= 5``, and few bits at ``d <= 4``)
    computes each word in its own loop over the points. Inside a larger ``jit``, ops that
    combine a point's words (e.g. ``h.sum(-1)``) or write the result into a ``lax.map``/``scan``
    output get fused with those loops into one branchy scalar loop, measured 4-18x slower (3-D,
    12 and 16 bits, unrolled forced); elementwise ops, slices (``h[..., k]``, as
    :func:`geomopt.canon.sort_by_words` uses) and sorting keep the fast loops. The table encoder
    (3-D, 4-D at the usual bits) is not affected (3-D, 16 bits: 5.7 ns per point with
    ``h.sum(-1)``, 7.9 under ``lax.map``).

    Errors: ``bits < 1``, a non-integer ``bits`` or ``d = 0`` (``ValueError``); a float/NaN
    input (``TypeError``/``ValueError``); coordinates outside ``[0, 2**bits)`` (``ValueError``
    on concrete input). Under ``jit`` coordinates are not checked (a runtime error there would
    reach the user as an opaque ``INTERNAL`` callback error): an out-of-range coordinate is
    reduced modulo ``2**bits`` for ``bits <= 32`` (the encoders read only its low bits, two's
    complement for negative values). To raise under ``jit`` instead, wrap it with
    ``geomopt.canon.checked``: ``err, h = jax.jit(checked(hilbert_index),
    static_argnums=1)(q, bits); err.throw()``.
    """
    d = q.shape[-1] if hasattr(q, "shape") and len(q.shape) else 0
    _check_static(d, bits)
    return _hilbert_kernel(_check_coords(q, bits, "hilbert_index"), bits)


# Encoders, chosen per (d, b) by a side-by-side measurement of every exact encoder
# (`benchmarks/bench_hilbert.py`, its mode comparison: CPU time per point, 10^6 points, medians;
# the numbers are in benchmarks/results/hilbert.md): "table" (state-machine lookups, d <= 4) for
# b >= _TABLE_FROM_BITS[d] (3-D at 16 bits: 4.2 ns against 10.8 for "unrolled", 2-D at 16 bits
# 2.1 vs 5.6, 4-D at 16 bits 8.4-12.4 vs 16.3-17.1; 4-D from 8 to 11 bits the two are within
# 15% and trade places between runs); else "unrolled" (every level inlined, one loop per output
# word; faster for 1-2 bits in 2-D/3-D and 1-4 bits in 4-D) while the index has at most
# _UNROLL_MAX_BITS bits (compiles in under a second there; 1.5-3x faster than "loop" at
# d = 5..16, about 2x faster than a one-level-per-lookup table at d = 5); else "loop".
_UNROLL_MAX_BITS = 64
_TABLE_FROM_BITS = {1: 1, 2: 3, 3: 3, 4: 5}
_MODES = ("unrolled", "table", "loop")


def _encoder_mode(d: int, b: int) -> str:
    """Which encoder :func:`hilbert_index` uses for ``d`` coordinates of ``b`` working bits."""
    if d <= _TABLE_MAX_D and b >= _TABLE_FROM_BITS[d]:
        return "table"
    if d * b <= _UNROLL_MAX_BITS:
        return "unrolled"
    return "table" if d <= _TABLE_MAX_D else "loop"


@functools.partial(jax.jit, static_argnums=(1, 2))
def _hilbert_kernel(q, bits: int, mode: str | None = None):
    """The index words of ``q``; ``mode`` (static) forces one encoder (tests compare them)."""
    dtype = _work_dtype(q.dtype)
    d = q.shape[-1]
    b = min(bits, 8 * dtype.itemsize)
    n_out = n_words(d, bits)
    mode = _encoder_mode(d, b) if mode is None else mode
    if mode not in _MODES:
        raise ValueError(f"encoder mode {mode!r}: expected one of {_MODES}")
    if q.size == 0:
        return jnp.zeros((*q.shape[:-1], n_out), jnp.uint32)
    if mode == "table":
        xs = _roll(_split(q, dtype), bits - b)
        return _stack_last(_hilbert_words_table(xs, b, n_out))
    q = jnp.roll(q, bits - b, axis=-1)
    if mode == "unrolled":
        return _hilbert_words_unrolled(q, b, n_out)
    return _hilbert_words_loop(q, b, n_out)


def _check_words(h, d: int, bits: int, name: str):
    w = n_words(d, bits)
    if not hasattr(h, "dtype") or not np.issubdtype(np.dtype(h.dtype), np.integer):
        raise TypeError(f"{name}: index of type {type(h).__name__}; expected uint32 words (..., W)")
    h = jnp.asarray(h)
    if h.ndim < 1 or h.shape[-1] != w:
        raise ValueError(
            f"{name}: index shape {h.shape}; expected (..., {w}) for d={d}, bits={bits}"
        )
    top_bits = d * bits - 32 * (w - 1)
    if not isinstance(h, jax.core.Tracer):
        arr = np.asarray(h).astype(np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= 2**32 or arr[..., 0].max() >= 2**top_bits):
            raise ValueError(f"{name}: index words out of range for an index < 2**{d * bits}")
    return h.astype(jnp.uint32)


def _check_fits_uint32(h, d: int, bits: int, name: str):
    """For ``bits > 32``: the point fits ``uint32`` iff all but the last ``d`` words are zero
    (points with coordinates below ``2**32`` fill exactly the indices below ``2**(32 d)``)."""
    if bits <= 32:
        return h
    high = h[..., : h.shape[-1] - d]
    if isinstance(h, jax.core.Tracer):  # not checked under jit (see hilbert_point)
        return h
    if np.any(np.asarray(high) != 0):
        raise ValueError(
            f"{name}: an index with a coordinate >= 2**32 cannot be returned as uint32"
        )
    return h


def hilbert_point(h: UInt32[Array, "... W"], d: int, bits: int) -> UInt32[Array, "... d"]:
    """Inverse of :func:`hilbert_index`: the grid point ``(..., d)`` (``uint32``) of each index.

    Matches ``HilbertCurve(bits, d).point_from_distance``. Coordinates need ``bits <= 32`` to fit
    ``uint32``; for ``bits > 32`` an index whose point has a coordinate ``>= 2**32`` raises on
    concrete input, since it cannot be represented without x64 (under ``jit`` index words are
    not checked and such an index decodes to an unspecified point).
    """
    _check_static(d, bits)
    h = _check_words(h, d, bits, "hilbert_point")
    b = min(bits, 32)
    h = _check_fits_uint32(h, d, bits, "hilbert_point")
    low_words = n_words(d, b)
    xs = _deinterleave(h[..., h.shape[-1] - low_words :], d, b, jnp.uint32)
    xs = _transpose_to_axes(xs, b)
    xs = _roll(xs, -(bits - b))
    return _stack_last(xs)


def morton_index(q: Integer[Array, "... d"], bits: int) -> UInt32[Array, "... W"]:
    """Morton (z-order) index: the bits of ``q`` interleaved, level by level from the top, first
    coordinate most significant within a level (the same layout as the Hilbert transpose).

    Same word layout, checks and jit behaviour as :func:`hilbert_index`.
    """
    d = q.shape[-1] if hasattr(q, "shape") and len(q.shape) else 0
    _check_static(d, bits)
    q = _check_coords(q, bits, "morton_index")
    dtype = _work_dtype(q.dtype)
    b = min(bits, 8 * dtype.itemsize)
    return _interleave(_split(q, dtype), b, n_words(d, bits))


def morton_point(h: UInt32[Array, "... W"], d: int, bits: int) -> UInt32[Array, "... d"]:
    """Inverse of :func:`morton_index` (``uint32`` coordinates; needs them to fit 32 bits)."""
    _check_static(d, bits)
    h = _check_words(h, d, bits, "morton_point")
    b = min(bits, 32)
    h = _check_fits_uint32(h, d, bits, "morton_point")
    low_words = n_words(d, b)
    xs = _deinterleave(h[..., h.shape[-1] - low_words :], d, b, jnp.uint32)
    return _stack_last(xs)
