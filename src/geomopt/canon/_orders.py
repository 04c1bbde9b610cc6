"""Orders of point clouds: lexicographic, Hilbert, Morton; quantisation; canonical forms.

A point cloud is an array ``(..., P, d)``: ``P`` points in ``R^d``, any leading batch axes.
An *order* is a permutation ``(..., P)`` of the points; :func:`canonize` applies it. Every
function here is jittable and vmappable (batch axes are handled directly too).

Ties: every sort is stable, so points with equal keys keep their input order. Canonical forms
are therefore permutation invariant only for clouds whose keys are distinct (distinct points for
``lex``; distinct grid cells for ``hilbert``/``morton``).

Official conventions (each checked by a test against the official definition): :func:`lex_order`
is the official lex order (stable sorts by z, then y, then x: x primary); :func:`hilbert_order`
with its defaults (``bits=12``, ``normalize="global"``) is the official *covering-experiment*
Hilbert order (``hilbertcurve`` ``HilbertCurve(12, 3)`` on (x, y, z) of ``floor(X * 4095)``
after subtracting the global minimum and dividing by the global maximum). The official
*training-time* Hilbert order (axes (z, x, y), ``floor(X * 4096)`` clamped to 4095) is
``geomopt.canon.official_hilbert_order``. Morton and every order in ``d != 3`` are ours.

Bad input. Clouds are any array-like of real numbers of shape ``(..., P, d)`` with ``d >= 1``
(``d = 0`` raises); an empty cloud (``P = 0``) has the empty permutation. Normalisation rescales
each cloud by a power of two first, so finite coordinates up to the float maximum (+-3e38 in
float32) get the order of the same cloud scaled down. On concrete arrays, a non-finite
coordinate (NaN, +-inf), a float64 coordinate beyond float32's range (without x64) and, for
integer clouds, a coordinate outside ``[0, 2**bits)`` raise a ``ValueError``, and
:func:`canonize` rejects an order that is not a permutation. Under ``jit`` values cannot be
checked eagerly (and a runtime error would reach the user as an opaque ``INTERNAL`` callback
error); the contract there is NaN propagation: :func:`canonize` returns NaN in every
coordinate of a cloud that has a non-finite coordinate or whose order is not a permutation
(float clouds), the order functions return some permutation for such a cloud, and integer
coordinates are reduced modulo ``2**bits``. To raise instead, wrap an order with
:func:`checked` (``jax.experimental.checkify``):
``err, perm = jax.jit(checked(hilbert_order))(x); err.throw()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, Integer, UInt32

from geomopt.canon._curves import _check_coords, _coords_in_range, hilbert_index, morton_index

__all__ = [
    "Normalize",
    "OrderName",
    "ORDERS",
    "normalize_cloud",
    "quantize",
    "sort_by_words",
    "lex_order",
    "hilbert_order",
    "morton_order",
    "identity_order",
    "canonize",
    "checked",
    "get_order",
]

Normalize = Literal["global", "per_axis", "none"]
OrderName = Literal["identity", "lex", "hilbert", "morton"]


def _check_cloud(x, name: str) -> Array:
    """``x`` as a JAX array of shape ``(..., P, d)``, ``d >= 1`` (any array-like; ``P = 0`` is
    allowed). On concrete input: finite real numbers that fit the dtype JAX will use."""
    traced = isinstance(x, jax.core.Tracer)
    if not traced:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}: cloud {type(x).__name__} is not a rectangular array; "
                "expected real numbers of shape (..., P, d)"
            ) from None
        if not jnp.issubdtype(arr.dtype, jnp.number) or jnp.issubdtype(
            arr.dtype, jnp.complexfloating
        ):
            raise ValueError(
                f"{name}: cloud of dtype {arr.dtype}; expected real numbers of shape (..., P, d)"
            )
    shape = tuple(x.shape) if traced else arr.shape
    if len(shape) < 2 or shape[-1] == 0:
        raise ValueError(f"{name}: cloud of shape {shape}; expected (..., P, d) with d >= 1")
    if traced or not jnp.issubdtype(arr.dtype, jnp.floating):
        return jnp.asarray(x)
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i[0]) for i in np.nonzero(bad))
        raise ValueError(
            f"{name}: cloud contains a non-finite coordinate ({arr[where]} at index {where}); "
            "expected finite values (no NaN or inf)"
        )
    target = jax.dtypes.canonicalize_dtype(arr.dtype)
    if target != arr.dtype and arr.size:
        top = float(jnp.finfo(target).max)
        big = np.abs(arr) > top
        if big.any():
            where = tuple(int(i[0]) for i in np.nonzero(big))
            raise ValueError(
                f"{name}: coordinate {arr[where]} at index {where} overflows {target} (JAX "
                f"without x64); expected |x| <= {top:.4g}: rescale the cloud or enable x64"
            )
    return jnp.asarray(x)


def checked(order_fn: Callable[..., Array]) -> Callable[..., tuple]:
    """``order_fn`` under ``jax.experimental.checkify``: returns ``(err, perm)``; ``err.throw()``
    raises if the cloud had a non-finite coordinate, an integer coordinate outside
    ``[0, 2**bits)`` (functions with a ``bits`` argument: the orders, ``hilbert_index``,
    ``morton_index``) or, with ``normalize="none"``, a value outside ``[0, 1]``. Works under
    ``jit`` (the eager checks of the order functions cannot see traced values). Only the cloud
    (first argument) is traced; the other arguments (``bits``, ``normalize``) stay Python
    values, so ``jax.jit(checked(hilbert_index), static_argnums=1)(q, bits)`` works."""
    from jax.experimental import checkify

    fname = getattr(order_fn, "__name__", "order")
    try:
        signature = inspect.signature(order_fn)
    except (TypeError, ValueError):
        signature = None

    def with_checks(x, *args, **kwargs):
        bound = {}
        if signature is not None:
            b = signature.bind_partial(x, *args, **kwargs)
            b.apply_defaults()
            bound = b.arguments
        bits = bound.get("bits")

        def inner(x):
            if jnp.issubdtype(x.dtype, jnp.floating):
                checkify.check(
                    jnp.all(jnp.isfinite(x)),
                    f"{fname}: cloud contains a non-finite coordinate; expected finite values",
                )
                if bound.get("normalize") == "none" and x.size:
                    checkify.check(
                        (jnp.min(x) >= 0) & (jnp.max(x) <= 1),
                        f"{fname}: values in [{{lo}}, {{hi}}] with normalize='none'; "
                        "expected [0, 1]",
                        lo=jnp.min(x),
                        hi=jnp.max(x),
                    )
            elif isinstance(bits, (int, np.integer)) and x.size:
                checkify.check(
                    _coords_in_range(x, int(bits)),
                    f"{fname}: coordinates in [{{lo}}, {{hi}}]; expected integers in "
                    f"[0, 2**{bits})",
                    lo=jnp.min(x),
                    hi=jnp.max(x),
                )
            return order_fn(x, *args, **kwargs)

        return checkify.checkify(inner)(jnp.asarray(x))

    return with_checks


def normalize_cloud(x: Float[Array, "... P d"], normalize: Normalize = "global") -> Array:
    """Map each cloud into ``[0, 1]^d`` as the official code does.

    - ``"global"``: subtract the cloud's global minimum (over all points and axes) and divide by
      the global maximum of the shifted cloud (the official covering / Hilbert-order setting).
    - ``"per_axis"``: subtract the per-axis minimum and divide by one global scale, the maximum of
      the shifted cloud (the official classification setting; keeps the aspect ratio).
    - ``"none"``: no change (the caller guarantees ``[0, 1]``).

    A constant cloud (zero scale) maps to zeros rather than dividing by zero; an empty one
    (``P = 0``) stays empty. Integer clouds are converted to floats first. Each cloud is first
    multiplied by the power of two that brings its largest magnitude into ``[1/2, 1)``: exact,
    so the result is unchanged for ordinary clouds, but the shift cannot overflow (float32
    coordinates of -3e38 and 3e38) and the division by the scale cannot flush to zero (XLA on
    CPU divides by multiplying with the reciprocal, which is flushed to zero below ``2**-126``,
    i.e. for a scale above about 8.5e37).
    """
    if normalize not in ("global", "per_axis", "none"):
        raise ValueError(f"normalize {normalize!r}: expected 'global', 'per_axis' or 'none'")
    x = _check_cloud(x, "normalize_cloud")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    if normalize == "none" or x.size == 0:
        return x
    whole = (-2, -1)
    lo = jnp.min(x, axis=whole if normalize == "global" else -2, keepdims=True)
    hi = jnp.max(x, axis=whole, keepdims=True)
    magnitude = jnp.maximum(jnp.abs(jnp.min(lo, axis=-1, keepdims=True)), jnp.abs(hi))
    exponent = jnp.frexp(magnitude)[1]  # magnitude = m 2**exponent, m in [1/2, 1)
    half = exponent // 2  # two factors, each a normal float for every finite magnitude
    shifted = x
    for k in (half, exponent - half):
        shifted, lo = shifted * _pow2(-k, x.dtype), lo * _pow2(-k, x.dtype)
    shifted = shifted - lo
    scale = jnp.max(shifted, axis=whole, keepdims=True)
    return shifted / jnp.where(scale > 0, scale, jnp.ones_like(scale))


def _pow2(k: Integer[Array, "..."], dtype) -> Array:
    """``2.0**k`` in the float type ``dtype``, exactly, from its bits (``k`` within the normal
    exponent range; ``jnp.ldexp`` goes through ``pow``)."""
    info = jnp.finfo(dtype)
    word = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(dtype).itemsize]
    biased = (k + (info.maxexp - 1)).astype(word)
    return jax.lax.bitcast_convert_type(biased << info.nmant, dtype)


def quantize(
    x: Float[Array, "... P d"], bits: int, *, normalize: Normalize = "global"
) -> UInt32[Array, "... P d"]:
    """Grid coordinates ``floor(X * (2**bits - 1))`` of the normalised cloud ``X``
    (:func:`normalize_cloud`), as in the official code, as ``uint32`` in ``[0, 2**bits)``.

    ``bits`` must be in ``[1, 32]``. With ``normalize="none"`` the input must lie in ``[0, 1]``
    (checked eagerly on concrete input). The product is computed in the cloud's float type (at
    least float32). Above 24 bits float32 cannot resolve every grid value: the factor
    ``2**bits - 1`` rounds to ``2**bits`` and the product is capped at the largest float not
    above ``2**bits - 1`` (a rounding guard, not a clip of bad input), so at 32 bits the grid
    values are multiples of 256 up to ``2**32 - 256`` for points in the upper half of the cloud.
    """
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 32:
        raise ValueError(f"bits {bits!r}: expected an integer in [1, 32]")
    x = _check_cloud(x, "quantize")
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    if normalize == "none" and not isinstance(x, jax.core.Tracer):
        arr = np.asarray(x)
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError(
                f"quantize: values in [{arr.min()}, {arr.max()}] with normalize='none'; "
                "expected [0, 1]"
            )
    unit = normalize_cloud(x, normalize)
    factor = np.asarray(2**bits - 1, dtype=np.float64).astype(x.dtype)
    top = factor if float(factor) <= 2**bits - 1 else np.nextafter(factor, factor.dtype.type(0))
    grid = jnp.minimum(jnp.floor(unit * factor), top)
    return grid.astype(jnp.uint32)


def _argsort_keys(keys: list[Array]) -> Int[Array, "... P"]:
    """Stable argsort along the last axis by ``keys`` (first key primary)."""
    iota = jax.lax.broadcasted_iota(jnp.int32, keys[0].shape, keys[0].ndim - 1)
    out = jax.lax.sort(
        (*keys, iota), dimension=keys[0].ndim - 1, is_stable=True, num_keys=len(keys)
    )
    return out[-1]


def sort_by_words(words: UInt32[Array, "... P W"]) -> Int[Array, "... P"]:
    """Stable permutation sorting multi-word keys ``(..., P, W)`` (most significant word first)."""
    return _argsort_keys([words[..., k] for k in range(words.shape[-1])])


def identity_order(x: Array) -> Int[Array, "... P"]:
    """The sampler's order ``0..P-1`` (the non-invariant baseline)."""
    x = _check_cloud(x, "identity_order")
    return jnp.broadcast_to(jnp.arange(x.shape[-2], dtype=jnp.int32), x.shape[:-1])


def lex_order(x: Float[Array, "... P d"]) -> Int[Array, "... P"]:
    """Lexicographic order: stable sort with the first coordinate primary, then the second, ..."""
    x = _check_cloud(x, "lex_order")
    return _argsort_keys([x[..., i] for i in range(x.shape[-1])])


def _grid(x, bits: int, normalize: Normalize, name: str) -> Integer[Array, "... P d"]:
    """Integer clouds as grid coordinates (checked eagerly against ``[0, 2**bits)``), float
    clouds quantised."""
    if jnp.issubdtype(x.dtype, jnp.integer):
        return _check_coords(x, bits, name)
    return quantize(x, bits, normalize=normalize)


def hilbert_order(
    x: Array, bits: int = 12, *, normalize: Normalize = "global"
) -> Int[Array, "... P"]:
    """Order points along the Hilbert curve (Skilling / ``hilbertcurve`` convention).

    Float clouds are first quantised with :func:`quantize` (``bits`` per axis; the official
    setting is ``bits=12``, ``normalize="global"``); integer clouds are taken as grid
    coordinates in ``[0, 2**bits)``. Ties (same cell) keep the input order.
    """
    x = _check_cloud(x, "hilbert_order")
    return sort_by_words(hilbert_index(_grid(x, bits, normalize, "hilbert_order"), bits))


def morton_order(
    x: Array, bits: int = 12, *, normalize: Normalize = "global"
) -> Int[Array, "... P"]:
    """Order points along the Morton (z-order) curve; quantisation as in :func:`hilbert_order`."""
    x = _check_cloud(x, "morton_order")
    return sort_by_words(morton_index(_grid(x, bits, normalize, "morton_order"), bits))


ORDERS: dict[str, Callable[..., Array]] = {
    "identity": identity_order,
    "lex": lex_order,
    "hilbert": hilbert_order,
    "morton": morton_order,
}


def get_order(name: str) -> Callable[[Array], Array]:
    """The order function called ``name`` (``identity``, ``lex``, ``hilbert``, ``morton``)."""
    if name not in ORDERS:
        raise ValueError(f"order {name!r}: expected one of {sorted(ORDERS)}")
    return ORDERS[name]


def canonize(x: Float[Array, "... P d"], order: Array | str) -> Float[Array, "... P d"]:
    """Reorder the points of ``x`` by ``order``: a permutation ``(..., P)`` or an order name
    (computed with its defaults, e.g. Hilbert with 12 bits and global normalisation).

    Raises ``ValueError`` on concrete input with a non-finite coordinate or an ``order`` that is
    not a permutation of ``0..P-1`` per cloud. Under ``jit`` such a (float) cloud's canonical
    form is all NaN instead (see the module doc).
    """
    x = _check_cloud(x, "canonize")
    perm = get_order(order)(x) if isinstance(order, str) else jnp.asarray(order)
    if perm.shape != x.shape[:-1]:
        raise ValueError(f"canonize: order of shape {perm.shape}; expected {x.shape[:-1]}")
    if not jnp.issubdtype(perm.dtype, jnp.integer):
        raise ValueError(f"canonize: order of dtype {perm.dtype}; expected integer indices")
    p = x.shape[-2]
    traced = isinstance(perm, jax.core.Tracer) or isinstance(x, jax.core.Tracer)
    if not traced:
        arr = np.asarray(perm)
        ok = (np.sort(arr, axis=-1) == np.arange(p)).all(axis=-1)
        if not np.all(ok):
            bad = tuple(int(i[0]) for i in np.nonzero(~ok)) if arr.ndim > 1 else ()
            raise ValueError(
                f"canonize: order {arr[bad].tolist() if arr.ndim > 1 else arr.tolist()} "
                f"(cloud {bad}) is not a permutation of 0..{p - 1}"
            )
    out = jnp.take_along_axis(x, perm[..., None], axis=-2)
    if traced and jnp.issubdtype(x.dtype, jnp.floating):
        iota = jax.lax.broadcasted_iota(perm.dtype, perm.shape, perm.ndim - 1)
        valid = jnp.all(jnp.sort(perm, axis=-1) == iota, axis=-1)
        valid = valid & jnp.all(jnp.isfinite(x), axis=(-2, -1))
        out = jnp.where(valid[..., None, None], out, jnp.asarray(jnp.nan, x.dtype))
    return out
