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
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Integer, UInt32

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


def _digit_parts(acc: list[Array], d: int) -> dict[int, Array]:
    """The level's ``d`` index bits (bit ``d-1-i`` = ``acc[i]``) as ``uint32`` parts per word
    offset ``k`` (bit ``d-1-i`` lands in word ``k = (d-1-i) // 32`` counted from the least
    significant). Bits are first packed in ``acc``'s own (possibly narrower) type, so a level costs
    one conversion per group of ``width`` bits instead of one per bit."""
    width = 8 * np.dtype(acc[0].dtype).itemsize
    groups: dict[tuple[int, int], Array] = {}
    for i, a in enumerate(acc):
        k, s = divmod(d - 1 - i, 32)
        g, t = divmod(s, width)
        part = a << t if t else a
        key = (k, g)
        groups[key] = part if key not in groups else groups[key] | part
    parts: dict[int, Array] = {}
    for (k, g), v in groups.items():
        v = v.astype(jnp.uint32)
        v = v << (g * width) if g else v
        parts[k] = v if k not in parts else parts[k] | v
    return parts


def _hilbert_level(xs, parity, level, d: int):
    """One level of the fused transform on coordinates ``xs`` (``level`` may be traced).

    ``parity`` is 0 or 1 in the coordinates' type. Returns the updated ``xs``, the level's
    ``d``-bit digit as ``uint32`` parts (see :func:`_digit_parts`) and the new parity.
    """
    dtype = xs[0].dtype
    one = jnp.asarray(1, dtype)
    zero = jnp.asarray(0, dtype)
    level_bit = one << level
    ones = jnp.asarray(np.iinfo(dtype).max, dtype)
    sets = [jnp.where((x & level_bit) != 0, ones, zero) for x in xs]  # all ones where bit set
    acc, prefix = parity, []
    for s in sets:  # Gray code: prefix xor of the level's bits, started at the parity
        acc = acc ^ (s & one)
        prefix.append(acc)
    low = level_bit - one
    xs = list(xs)
    for i in range(d):
        _invert_or_swap(xs, i, sets[i], low)
    return xs, _digit_parts(prefix, d), acc


def _hilbert_words(xs: list[Array], b: int, n_out: int) -> list[Array]:
    """Skilling's AxestoTranspose + Gray code + bit interleave, fused level by level.

    Level ``k`` (from the top) of the transpose is final once the levels above it are done (a
    level only rewrites the bits below it), and both the Gray code ``x_i ^= x_{i-1}`` and the
    correction ``t`` (bit ``k`` of ``t`` is the parity of the Gray-coded ``x_{d-1}`` above ``k``)
    act level-wise. So each level: read the ``d`` bits, emit the ``d``-bit digit (prefix xor of the
    bits, xor the running parity) into the index, then invert-or-exchange the lower bits of every
    point at once, exactly as ``hilbertcurve.distance_from_point`` does bit by bit.

    ``xs`` are the ``d`` coordinate arrays (one unsigned type holding ``b`` bits). Since a level
    only reads and writes bits at and below it, the levels run in phases of shrinking width:
    levels 16.. in the input type, 8..15 in ``uint16``, 0..7 in ``uint8`` (narrower types give
    more SIMD lanes). Each phase is a ``fori_loop`` over its levels with the coordinates stacked on
    axis 0. XLA CPU fuses each coordinate's update with the chain of exchanges before it (no
    multi-output fusion), so a level costs about ``d^2/2`` exchange steps of arithmetic but only a
    few passes over memory; a sequential ``lax.scan`` over the coordinates, an associative scan
    of the exchange chain and grouped scans were measured and were no faster.
    """
    d = len(xs)
    shape = xs[0].shape
    n_parts = -(-d // 32)  # uint32 parts of one level's digit
    digits = jnp.zeros((b, n_parts, *shape), jnp.uint32)  # written once per level
    parity = jnp.zeros(shape, jnp.uint8)
    stacked = jnp.stack(xs)
    top = b
    for floor in (32, 16, 8, 0):
        if top <= floor:
            continue
        dtype = _narrow_dtype(top)
        stacked, parity = stacked.astype(dtype), parity.astype(dtype)

        def body(j, carry, top=top, dtype=dtype):
            stacked, digits, parity = carry
            level = jnp.asarray(top - 1, dtype) - j.astype(dtype)
            ys = [stacked[i] for i in range(d)]
            ys, parts, parity = _hilbert_level(ys, parity, level, d)
            row = jnp.stack([parts.get(k, jnp.zeros(shape, jnp.uint32)) for k in range(n_parts)])
            digits = jax.lax.dynamic_update_index_in_dim(digits, row, b - 1 - level, 0)
            return jnp.stack(ys), digits, parity

        stacked, digits, parity = jax.lax.fori_loop(0, top - floor, body, (stacked, digits, parity))
        top = floor
    # Concatenate the b digits (most significant level first) into the index words.
    words = [jnp.zeros(shape, jnp.uint32) for _ in range(n_out)]
    for level in range(b - 1, -1, -1):
        words = _shift_words_left(words, d)
        for k in range(n_parts):
            words[n_out - 1 - k] = words[n_out - 1 - k] | digits[b - 1 - level, k]
    return words


def _stack_last(words: list[Array]) -> Array:
    """``stack(words, axis=-1)``, built as a stack on axis 0 and a transpose: XLA CPU compiles a
    minor-axis concatenate of long fused chains pathologically slowly (measured: ~10^4x)."""
    return jnp.moveaxis(jnp.stack(words, axis=0), 0, -1)


def _transpose_to_axes(xs: list[Array], b: int) -> list[Array]:
    """Skilling's TransposetoAxes: the inverse of the level transform of :func:`_hilbert_level`."""
    d = len(xs)
    xs = list(xs)
    dtype = xs[0].dtype
    t = xs[d - 1] >> 1
    for i in range(d - 1, 0, -1):
        xs[i] = xs[i] ^ xs[i - 1]
    xs[0] = xs[0] ^ t
    for level in range(1, b):
        low = jnp.asarray((1 << level) - 1, dtype)
        for i in range(d - 1, -1, -1):
            set_mask = jnp.asarray(0, dtype) - ((xs[i] >> level) & jnp.asarray(1, dtype))
            _invert_or_swap(xs, i, set_mask, low)
    return xs


def _roll(xs: list[Array], shift: int) -> list[Array]:
    """``new[i] = old[i - shift]`` (cyclic), as ``jnp.roll(x, shift, axis=-1)``."""
    d = len(xs)
    s = shift % d
    return xs[d - s :] + xs[: d - s] if s else list(xs)


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


def _hilbert_words_unrolled(q, b: int, n_out: int) -> UInt32[Array, "... W"]:
    """:func:`_hilbert_words` with every level unrolled, over ``q (..., d)`` (entries below
    ``2**b``), in ``uint32`` (``uint64`` for ``b > 32``).

    With no loop carry, XLA CPU compiles each output word into ONE elementwise loop over the
    points (the whole level chain inlined, shared values computed once per point), instead of
    one fusion per coordinate per level that re-reads memory and repeats the exchange chain
    (see :func:`_hilbert_words`). A word needs only the levels down to its lowest digit, so
    leading words cost less. Each word is written into the output by its own in-place update:
    stacking the words in one fusion instead made LLVM take 10-100 s on the branchy loop body.
    Compile time grows with ``d * b`` (0.3-0.5 s at ``d * b = 64`` in the benchmark, more under
    load); with three or more words XLA turned one update into a select over the whole output
    (measured 2x slower than the loop encoder at d = 8, b = 10), so this path is used up to
    ``_UNROLL_MAX_BITS = 64`` bits.

    Unlike the loop encoder, narrow types do not pay here: the loop also holds the ``uint32``
    words, so LLVM vectorises 8 points at a time whatever the coordinates' type, and x86 has no
    8-bit vector shifts; ``uint32`` coordinates were measured as fast as ``uint16`` and up to
    1.5x faster than ``uint8`` (d = 16, b = 4).
    """
    lead, d = q.shape[:-1], q.shape[-1]
    dtype = _narrow_dtype(max(b, 32))
    flat = q.reshape(-1, d).astype(dtype)
    xs = [flat[:, i] for i in range(d)]
    parity = jnp.zeros(xs[0].shape, dtype)
    words = [jnp.zeros(xs[0].shape, jnp.uint32) for _ in range(n_out)]
    for level in range(b - 1, -1, -1):
        xs, parts, parity = _hilbert_level(xs, parity, jnp.asarray(level, dtype), d)
        words = _shift_words_left(words, d)
        for k, v in parts.items():
            words[n_out - 1 - k] = words[n_out - 1 - k] | v
    # The first update becomes a plain loop fusion, which XLA CPU splits over the cores; the
    # later ones update in place on one thread. So the last word (every level) goes first.
    out = jnp.zeros((flat.shape[0], n_out), jnp.uint32)
    for k in range(n_out - 1, -1, -1):
        out = out.at[:, k].set(words[k])
    return out.reshape(*lead, n_out)


# Points per step of the loop encoder (a multiple of _LANE): the level loop then works on
# cache-resident arrays. Points are laid out in blocks of _LANE along the minor axis.
_LOOP_CHUNK = 65536
_LANE = 128


def _hilbert_words_loop(q, b: int, n_out: int) -> UInt32[Array, "... W"]:
    """:func:`_hilbert_words` over ``q (..., d)`` (entries below ``2**b``): in the narrowest
    unsigned type holding ``b`` bits, in ``lax.map`` chunks of ``_LOOP_CHUNK`` points, each chunk
    ``(blocks, d, _LANE)`` so a coordinate is a contiguous ``(blocks, _LANE)`` slab. The layout
    change costs two small-block transposes (a plain ``(n, d) -> (d, n)`` transpose is several
    times slower on XLA CPU)."""
    lead, d = q.shape[:-1], q.shape[-1]
    flat = q.reshape(-1, d).astype(_narrow_dtype(b))
    n = flat.shape[0]
    chunk = min(_LOOP_CHUNK, -(-n // _LANE) * _LANE)
    n_chunks = -(-n // chunk)
    flat = jnp.pad(flat, ((0, n_chunks * chunk - n), (0, 0)))  # zeros are valid points
    blocks = flat.reshape(n_chunks, chunk // _LANE, _LANE, d).transpose(0, 1, 3, 2)

    def encode(x):  # (blocks, d, LANE) -> (blocks, W, LANE)
        return jnp.stack(_hilbert_words([x[:, i] for i in range(d)], b, n_out), axis=1)

    out = jax.lax.map(encode, blocks) if n_chunks > 1 else encode(blocks[0])[None]
    out = out.transpose(0, 1, 3, 2).reshape(n_chunks * chunk, n_out)[:n]
    return out.reshape(*lead, n_out)


# Table-driven encoder (small d). Skilling's per-level step acts on the bits below the level as
# a signed permutation of the coordinates (x_j <- x_{p(j)} xor f_j), and the Gray-code correction
# carries one parity bit; so (p, f, parity) is a finite state, and one level maps (state, the d
# raw bits of the level) to (the d index bits, next state). The states reachable from the
# identity are enumerated by breadth-first search (2, 8, 48, 384 states for d = 1..4), then
# states that emit the same digits for every input are merged (1, 4, 24, 192 states; 24 in 3-D
# as in hilbertsfc's 3-D tables). The tables grow like d! 2^d, so the loop encoder is used for
# d > 4. ``k`` levels are composed into one table so one gather emits ``k * d`` index bits; ``k``
# is the largest whose entries fit 16 bits (16, 7, 3, 2 levels for d = 1..4; see
# :func:`_levels_per_gather`).
_TABLE_MAX_D = 4
_TABLE_MAX_ENTRIES = 1 << 18


@functools.cache
def _level_table(d: int) -> np.ndarray:
    """``(S, 2**d)`` table: entry = digit | next_state << d, for raw level bits
    ``m = sum_i bit_i << (d-1-i)``; state 0 is the identity transform with parity 0."""
    start = (tuple(range(d)), (0,) * d, 0)
    index = {start: 0}
    states = [start]
    rows = []
    while len(rows) < len(states):
        perm, flip, parity = states[len(rows)]
        row = np.zeros(2**d, np.int64)
        for m in range(2**d):
            raw = [(m >> (d - 1 - i)) & 1 for i in range(d)]
            seen = [raw[perm[j]] ^ flip[j] for j in range(d)]  # this level's transformed bits
            acc, digit = 0, 0
            for i in range(d):  # Gray code (prefix xor) and the parity correction
                acc ^= seen[i]
                digit |= (acc ^ parity) << (d - 1 - i)
            p, f = list(perm), list(flip)
            for i in range(d):  # Skilling: invert x_0 or exchange x_0 and x_i below the level
                if seen[i]:
                    f[0] ^= 1
                elif i:
                    p[0], p[i] = p[i], p[0]
                    f[0], f[i] = f[i], f[0]
            nxt = (tuple(p), tuple(f), parity ^ acc)
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
            row[m] = digit | (index[nxt] << d)
        rows.append(row)
    return np.stack(rows)


@functools.cache
def _minimal_level_table(d: int) -> np.ndarray:
    """:func:`_level_table` with equivalent states merged (Moore's partition refinement: states
    are equivalent when they emit the same digit for every input and their successors are
    equivalent); same layout, state 0 is still the start."""
    table = _level_table(d)
    digits, nxt = table & ((1 << d) - 1), table >> d
    cls = np.unique(digits, axis=0, return_inverse=True)[1].reshape(-1)
    while True:
        signature = np.concatenate([cls[:, None], cls[nxt]], axis=1)
        new = np.unique(signature, axis=0, return_inverse=True)[1].reshape(-1)
        if new.max() == cls.max():
            break
        cls = new
    _, first = np.unique(cls, return_index=True)
    label = np.argsort(np.argsort(first))[cls]  # numbered by first appearance: start stays 0
    out = np.zeros((label.max() + 1, 2**d), np.int64)
    out[label] = digits | (label[nxt] << d)
    return out


@functools.cache
def _first_group_table(d: int, k: int) -> np.ndarray:
    """The rows of :func:`_group_table` for the start state (the first lookup of a point, whose
    index is ``m`` alone), in the narrowest of ``uint16`` / ``uint32`` that holds them."""
    table = _group_table(d, k)[: 2 ** (d * k)].astype(np.int64)
    return table.astype(np.uint16 if table.max() < 2**16 else np.uint32)


@functools.cache
def _group_table(d: int, k: int) -> np.ndarray:
    """``k`` levels composed: flat table indexed by ``state << (k d) | m`` where ``m``
    holds the ``k`` bits of coordinate ``i`` (first level most significant) at bit
    ``(d - 1 - i) k`` (so ``m`` is built by one shift and mask per coordinate); entry = the
    ``k d`` index bits | next_state << (k d)."""
    one = _minimal_level_table(d)
    m = np.arange(2 ** (d * k), dtype=np.int64)
    fields = [(m >> ((d - 1 - i) * k)) & ((1 << k) - 1) for i in range(d)]
    state = np.broadcast_to(np.arange(one.shape[0])[:, None], (one.shape[0], m.size))
    digits = np.zeros(state.shape, np.int64)
    for j in range(k):
        raw = sum(((f >> (k - 1 - j)) & 1) << (d - 1 - i) for i, f in enumerate(fields))
        e = one[state, raw[None, :]]
        digits = (digits << d) | (e & ((1 << d) - 1))
        state = e >> d
    table = (digits | (state << (k * d))).reshape(-1)
    return table.astype(np.uint16 if table.max() < 2**16 else np.uint32)


def _levels_per_gather(d: int) -> int:
    """The largest ``k`` whose table has at most ``_TABLE_MAX_ENTRIES`` entries of 16 bits
    (``k d`` digit bits and the state): ``uint16`` tables measured 1.1-1.8x faster than ``uint32``
    ones with one level more per gather (3-D at 16 bits 4.9 vs 5.4 ns, 4-D at 12 bits 5.9 vs
    10.9 ns, 2-D at 32 bits 5.1 vs 6.4 ns); they are 24-128 KB."""
    n_states = _minimal_level_table(d).shape[0]
    state_bits = (n_states - 1).bit_length()
    k = 1
    while n_states * 2 ** ((k + 1) * d) <= _TABLE_MAX_ENTRIES and (k + 1) * d + state_bits <= 16:
        k += 1
    return k


def _hilbert_words_table(xs: list[Array], b: int, n_out: int) -> list[Array]:
    """Same words as :func:`_hilbert_words`, by ``ceil(b / k)`` table lookups per point (levels
    unrolled; per group a shift and mask per coordinate and one small-table gather, so it
    compiles fast). XLA CPU runs each gather as its own loop over the points with scalar loads;
    3-D at 16 bits takes 5-7 ns per point there (6 gathers), 2-D at 32 bits about 6 ns."""
    d = len(xs)
    k = _levels_per_gather(d)
    groups = ([b % k] if b % k else []) + [k] * (b // k)
    if len(groups) > 1 and groups[0] < k and 2 ** ((groups[0] + k) * d) <= _TABLE_MAX_ENTRIES:
        groups = [groups[0] + k] + groups[2:]  # the first lookup needs only the start state's rows
    one_state = _minimal_level_table(d).shape[0] == 1
    words = [jnp.zeros(xs[0].shape, jnp.uint32) for _ in range(n_out)]
    entry, top, prev = None, b, 0
    for g in groups:
        low = top - g
        m = None
        for i, x in enumerate(xs):
            field = ((x >> low) if low else x) & jnp.asarray((1 << g) - 1, x.dtype)
            field = field.astype(jnp.uint32)
            field = field << ((d - 1 - i) * g) if i < d - 1 else field
            m = field if m is None else m | field
        if entry is None or one_state:
            index = m
        else:  # the state, in the table's own type (converting it measured 1.4x slower)
            index = ((entry >> (prev * d)) << (g * d)) | m
        table = _first_group_table(d, g) if entry is None else _group_table(d, g)
        entry = jnp.asarray(table).at[index].get(mode="promise_in_bounds")
        words = _shift_words_left(words, g * d)
        words[-1] = words[-1] | (entry & jnp.uint32((1 << (g * d)) - 1))
        top, prev = low, g
    return words


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
