"""The exact encoders behind :func:`geomopt.canon.hilbert_index`, by name, for comparing them
(``benchmarks/bench_hilbert.py`` times them side by side): which exist
(:data:`HILBERT_ENCODERS`), which apply to a ``(d, bits)`` (:func:`hilbert_encoders`), which one
``hilbert_index`` picks (:func:`hilbert_encoder`), the index computed by a given one
(:func:`hilbert_index_with`), and the per-bit step they all share (:func:`invert_or_swap`).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Array, Integer, UInt32

from geomopt.canon import _curves, _curves_bits

__all__ = [
    "HILBERT_ENCODERS",
    "hilbert_encoder",
    "hilbert_encoders",
    "hilbert_index_with",
    "invert_or_swap",
]

HILBERT_ENCODERS = _curves._MODES
"""The exact encoders: ``"unrolled"`` (every level inlined, one loop per output word),
``"table"`` (finite-state table lookups, ``d <= 4``) and ``"loop"`` (a level loop)."""


def hilbert_encoder(d: int, bits: int, dtype=np.uint32) -> str:
    """The encoder :func:`geomopt.canon.hilbert_index` uses for ``d`` coordinates of ``bits``
    bits held in ``dtype`` (the working bits are ``min(bits, bit width of dtype)``, 32 or 64)."""
    return _curves._encoder_mode(d, min(bits, 8 * _curves._work_dtype(dtype).itemsize))


def hilbert_encoders(d: int, bits: int) -> list[str]:
    """The exact encoders that apply to ``d`` coordinates of ``bits`` bits (32-bit coordinates):
    ``"table"`` for ``d <= 4``, ``"unrolled"`` up to 64 index bits (beyond, it compiles slowly
    and is never chosen), ``"loop"`` always."""
    b = min(bits, 32)
    modes = ["table"] if d <= _curves._TABLE_MAX_D else []
    if d * b <= _curves._UNROLL_MAX_BITS:
        modes.append("unrolled")
    return modes + ["loop"]


def hilbert_index_with(
    q: Integer[Array, "... d"], bits: int, encoder: str
) -> UInt32[Array, "... W"]:
    """:func:`geomopt.canon.hilbert_index` computed by ``encoder`` (one of
    :data:`HILBERT_ENCODERS`; static, as ``bits`` is), without its checks of ``bits`` and the
    coordinates: every encoder gives the same words, only the speed differs."""
    return _curves._hilbert_kernel(q, bits, encoder)


def invert_or_swap(xs: list[Array], i: int, set_mask: Array, low: Array) -> None:
    """Skilling's per-bit step every encoder runs, in place on the coordinate list ``xs``: where
    bit ``i`` is set (``set_mask`` all ones) invert the ``low`` bits of ``xs[0]``, else exchange
    the ``low`` bits of ``xs[0]`` and ``xs[i]``. Its own inverse."""
    _curves_bits._invert_or_swap(xs, i, set_mask, low)
