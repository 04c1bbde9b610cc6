"""The table-driven Hilbert encoder of :func:`geomopt.canon.hilbert_index` for ``d <= 4``: the
finite-state level tables (built, minimised and composed several levels per lookup) and the
encoder that walks them, one small-table gather per group of levels.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from geomopt.canon._curves_bits import _shift_words_left

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
