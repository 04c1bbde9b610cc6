"""Hoelder regularity of a space-filling curve, measured directly on its decoder.

For a curve with decoder ``H: [0, 1] -> [0, 1]^d`` the Hoelder exponent ``alpha`` is the largest
with ``|H(t) - H(s)| <= C |t - s|^alpha`` for all ``t, s``. The Hilbert curve has
``alpha = 1/d``; the Morton (z-order) curve is not continuous at all (consecutive cells at the
boundary of two top-level blocks lie about ``sqrt(d - 1)`` apart), so its worst-case modulus does
not shrink with ``|t - s|``: exponent 0.

What is measured (:func:`curve_modulus`), at ``bits`` per axis (index ``t`` an integer in
``[0, 2**(d*bits))``, normalised by ``2**(d*bits)``; grid point ``q`` normalised by ``2**bits``):
for each scale ``delta = 2**e`` the pairs ``(t, t + D)`` with ``D`` uniform in
``[delta/2, delta]`` are sampled two ways,

- ``random``: ``t`` uniform (the typical pair),
- ``straddle``: ``t = B - r`` with ``B = c * 2**k`` an odd multiple of ``2**k`` (a block
  boundary of level ``k``, ``k`` uniform in ``[e, d*bits)``) and ``r`` uniform in ``[1, D]``, so
  the pair crosses the boundary of a block of every size: the search for the worst case of any
  curve built from nested blocks,

and ``sup`` is the largest ``|H(t) - H(t + D)|`` found (a lower bound of the true supremum; for
the Hilbert curve the straddling pairs reach it up to a constant). The exponent is the
least-squares slope of ``log sup`` against ``log delta`` over the scales from one level
(``delta = 2**d``) to ``d`` levels below the top; ``median`` is the same fit of the median
distance (the typical modulus, ``1/d`` for both curves).

Indices wider than 64 bits are handled as ``uint32`` words (most significant first, the layout
of :func:`geomopt.canon.hilbert_point`), with carries done in NumPy ``uint64``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CURVES", "curve_modulus", "fit_holder", "sample_pairs", "default_bits"]

CURVES: tuple[str, ...] = ("hilbert", "morton")


def default_bits(d: int, index_bits: int = 96, max_bits: int = 16) -> int:
    """Bits per axis for ``d`` dimensions: ``min(max_bits, index_bits // d)``, at least 2."""
    if d < 1:
        raise ValueError(f"d={d}: expected >= 1")
    return max(2, min(max_bits, index_bits // d))


def _n_words(n: int) -> int:
    return -(-n // 32)


def _random_words(rng, shape, nbits: int, n_words: int) -> np.ndarray:
    """Uniform integers in ``[0, 2**nbits)`` as ``uint64`` words holding 32 bits each."""
    w = rng.integers(0, 2**32, size=(*shape, n_words), dtype=np.uint64)
    for k in range(n_words):  # word k (from the most significant) holds bits [32 (W-1-k), ...)
        lo = 32 * (n_words - 1 - k)
        keep = min(32, max(0, nbits - lo))
        w[..., k] &= np.uint64((1 << keep) - 1)
    return w


def _power_words(e: int, shape, n_words: int) -> np.ndarray:
    """``2**e`` as words."""
    w = np.zeros((*shape, n_words), np.uint64)
    w[..., n_words - 1 - e // 32] = np.uint64(1 << (e % 32))
    return w


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    carry = np.zeros(a.shape[:-1], np.uint64)
    for k in range(a.shape[-1] - 1, -1, -1):
        s = a[..., k] + b[..., k] + carry
        out[..., k] = s & np.uint64(0xFFFFFFFF)
        carry = s >> np.uint64(32)
    if np.any(carry):
        raise OverflowError("index addition overflowed its words")
    return out


def _sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a - b`` for ``a >= b`` (checked)."""
    out = np.empty_like(a)
    borrow = np.zeros(a.shape[:-1], np.int64)
    for k in range(a.shape[-1] - 1, -1, -1):
        s = a[..., k].astype(np.int64) - b[..., k].astype(np.int64) - borrow
        borrow = (s < 0).astype(np.int64)
        out[..., k] = (s + (borrow << 32)).astype(np.uint64)
    if np.any(borrow):
        raise OverflowError("index subtraction went below zero")
    return out


def sample_pairs(d: int, bits: int, e: int, n: int, kind: str, rng) -> tuple:
    """``(t, s)`` words ``(n, W)`` with ``s - t`` uniform in ``[2**e / 2, 2**e]`` (see module doc).

    ``kind`` is ``"random"`` or ``"straddle"``; ``e`` must be in ``[1, d*bits - 1]``.
    """
    nbits = d * bits
    if not 1 <= e < nbits:
        raise ValueError(f"scale exponent e={e}: expected 1 <= e < d*bits = {nbits}")
    w = _n_words(nbits)
    # D = 2**(e-1) + uniform [0, 2**(e-1)]  (inclusive top via + 1 on a random e-1 bit number)
    half = _power_words(e - 1, (n,), w)
    step = _add(half, _random_words(rng, (n,), e - 1, w))
    top = _power_words(e, (n,), w)
    at_top = rng.random(n) < 2.0 ** -(e - 1)  # the one value 2**e of the 2**(e-1) + 1 choices
    step[at_top] = top[at_top]
    if kind == "random":
        limit = _add(_sub(_full(nbits, n, w), step), _power_words(0, (n,), w))  # 2**nbits - D
        t = _uniform_below(rng, limit, nbits, w)
    elif kind == "straddle":
        levels = rng.integers(e, nbits, size=n)
        t = np.zeros((n, w), np.uint64)
        for k in np.unique(levels):
            sel = levels == k
            m = int(sel.sum())
            c = _random_words(rng, (m,), nbits - k, w)  # c < 2**(nbits-k), then made odd
            c[:, w - 1] |= np.uint64(1)
            boundary = _shift_left(c, int(k))
            r = _add(_uniform_below(rng, step[sel], e + 1, w), _power_words(0, (m,), w))
            t[sel] = _sub(boundary, r)
    else:
        raise ValueError(f"kind {kind!r}: expected 'random' or 'straddle'")
    return t, _add(t, step)


def _full(nbits: int, n: int, w: int) -> np.ndarray:
    """``2**nbits - 1`` as words."""
    out = np.zeros((n, w), np.uint64)
    for k in range(w):
        lo = 32 * (w - 1 - k)
        keep = min(32, max(0, nbits - lo))
        out[:, k] = np.uint64((1 << keep) - 1)
    return out


def _shift_left(a: np.ndarray, s: int) -> np.ndarray:
    w = a.shape[-1]
    whole, s = divmod(s, 32)
    out = np.zeros_like(a)
    for k in range(w):
        src = k + whole
        if src < w:
            v = (a[..., src] << np.uint64(s)) & np.uint64(0xFFFFFFFF)
            if s and src + 1 < w:
                v |= a[..., src + 1] >> np.uint64(32 - s)
            out[..., k] = v
    return out


def _less(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``a < b`` for word arrays."""
    lt = np.zeros(a.shape[:-1], bool)
    eq = np.ones(a.shape[:-1], bool)
    for k in range(a.shape[-1]):
        lt |= eq & (a[..., k] < b[..., k])
        eq &= a[..., k] == b[..., k]
    return lt


def _uniform_below(rng, limit: np.ndarray, nbits: int, w: int) -> np.ndarray:
    """Uniform integers in ``[0, limit)`` (rows of ``limit`` < ``2**nbits``) by rejection."""
    out = _random_words(rng, limit.shape[:-1], nbits, w)
    bad = ~_less(out, limit)
    while bad.any():
        out[bad] = _random_words(rng, (int(bad.sum()),), nbits, w)
        bad = ~_less(out, limit)
    return out


def _decode(curve: str, words: np.ndarray, d: int, bits: int) -> np.ndarray:
    import jax.numpy as jnp

    from geomopt.canon._curves import hilbert_point, morton_point

    fn = {"hilbert": hilbert_point, "morton": morton_point}.get(curve)
    if fn is None:
        raise ValueError(f"curve {curve!r}: expected one of {CURVES}")
    return np.asarray(fn(jnp.asarray(words.astype(np.uint32)), d, bits)).astype(np.float64)


def fit_holder(delta, values) -> float:
    """Least-squares slope of ``log values`` against ``log delta`` (positive entries only)."""
    delta, values = np.asarray(delta, float), np.asarray(values, float)
    keep = (delta > 0) & (values > 0)
    if keep.sum() < 2:
        raise ValueError("fit_holder: need at least two positive (delta, value) pairs")
    return float(np.polyfit(np.log(delta[keep]), np.log(values[keep]), 1)[0])


def curve_modulus(
    curve: str,
    d: int,
    bits: int,
    *,
    n_pairs: int = 512,
    scale_step: int = 1,
    seed: int = 0,
) -> dict:
    """Sampled modulus of continuity of ``curve`` in ``d`` dimensions at ``bits`` per axis.

    Returns ``rows`` (one per scale ``e``: ``delta = 2**e / 2**(d*bits)``, ``sup`` and
    ``median`` of ``|H(t) - H(s)|`` over ``n_pairs`` random and ``n_pairs`` straddling pairs,
    ``sup_random`` over the random ones alone), the fitted ``exponent`` (of ``sup``),
    ``exponent_median`` and ``exponent_random`` over scales ``e`` in ``[d, d*(bits-1)]``, and
    ``constant`` = max over those scales of ``sup / delta**(1/d)`` (the Hoelder-1/d constant
    the samples imply; bounded for Hilbert, growing like ``delta**(-1/d)`` for Morton).
    """
    if curve not in CURVES:
        raise ValueError(f"curve {curve!r}: expected one of {CURVES}")
    if bits < 2:
        raise ValueError(f"bits={bits}: expected >= 2 (at least two levels)")
    nbits = d * bits
    rng = np.random.default_rng([seed, d, bits, CURVES.index(curve)])
    scales = list(range(1, nbits, scale_step))
    ts, ss, tags = [], [], []
    for e in scales:
        for kind in ("random", "straddle"):
            t, s = sample_pairs(d, bits, e, n_pairs, kind, rng)
            ts.append(t)
            ss.append(s)
            tags.append((e, kind))
    pt = _decode(curve, np.concatenate(ts), d, bits)
    ps = _decode(curve, np.concatenate(ss), d, bits)
    dist = np.sqrt(((pt - ps) ** 2).sum(-1)) / 2.0**bits
    dist = dist.reshape(len(scales), 2, n_pairs)
    rows = []
    for i, e in enumerate(scales):
        both = dist[i].reshape(-1)
        rows.append(
            {
                "e": e,
                "delta": 2.0 ** (e - nbits),
                "sup": float(both.max()),
                "median": float(np.median(both)),
                "sup_random": float(dist[i, 0].max()),
                "sup_straddle": float(dist[i, 1].max()),
            }
        )
    fit = [r for r in rows if d <= r["e"] <= d * (bits - 1)]
    if len(fit) < 2:
        raise ValueError(f"d={d}, bits={bits}: fewer than two scales to fit; use more bits")
    deltas = [r["delta"] for r in fit]
    return {
        "curve": curve,
        "d": d,
        "bits": bits,
        "rows": rows,
        "exponent": fit_holder(deltas, [r["sup"] for r in fit]),
        "exponent_median": fit_holder(deltas, [r["median"] for r in fit]),
        "exponent_random": fit_holder(deltas, [r["sup_random"] for r in fit]),
        "constant": float(max(r["sup"] / r["delta"] ** (1 / d) for r in fit)),
    }
