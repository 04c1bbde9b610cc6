"""Skilling's level transform as whole-array operations: the "unrolled" and "loop" Hilbert
encoders behind :func:`geomopt.canon.hilbert_index` (for ``d > 4``, and few bits at ``d <= 4``)
and the inverse transform :func:`_transpose_to_axes` that :func:`geomopt.canon.hilbert_point`
uses. The table encoder for small ``d`` is :mod:`geomopt.canon._curves_table`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, UInt32

from geomopt.canon._curves_bits import _invert_or_swap, _narrow_dtype, _shift_words_left


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
