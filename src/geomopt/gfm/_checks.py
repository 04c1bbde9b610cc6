"""Input checks of the GFM fronts, on the host with NumPy (no device round trips): endpoints,
scalars, initial paths, options, and the errors that name a bad metric or score on the initial
path (the waypoint, and the pair of a batch)."""

from __future__ import annotations

import math
from collections import OrderedDict

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._metrics import Euclidean

__all__ = ["check_endpoints", "default_tol"]

LM_OPTIONS = ("geodesic", "accel_ratio", "slow_factor", "damping")


def default_tol(n_points: int, dtype, scale: float = 1.0) -> float:
    """Default residual tolerance: near the rounding floor of the acceleration stencil.

    ``a_i = (x_{i+1} - 2 x_i + x_{i-1}) / dt^2`` carries a rounding error of about
    ``eps |x| / dt^2``; the default is 100x that (but at least 1e-8).
    """
    eps = float(jnp.finfo(dtype).eps)
    return max(1e-8, 100.0 * eps * (n_points - 1) ** 2 * max(scale, 1.0))


def show(value, limit: int = 80) -> str:
    """``value`` for an error message: one line (arrays as nested lists, elided in the middle
    when large), at most ``limit`` characters."""
    if isinstance(value, (np.ndarray, np.generic, jax.Array)):
        arr = np.asarray(value)
        if arr.size <= 16:
            text = repr(arr.tolist())
        else:
            with np.printoptions(threshold=8, edgeitems=2, linewidth=10**9):
                text = f"array of shape {arr.shape}: " + np.array2string(arr, separator=", ")
    else:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_real(dtype) -> bool:
    """Integer or floating (bfloat16 included); not bool, complex, strings or objects."""
    return jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)


def real_array(name, value, expected: str) -> np.ndarray:
    """``value`` as a NumPy array of real numbers; ``TypeError`` naming it otherwise."""
    arr = np.asarray(value)
    if arr.dtype == object:  # e.g. a list mixing arrays and numbers: fine if it is real
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            pass
    if not is_real(arr.dtype):
        raise TypeError(f"{name}={show(value)} has dtype {arr.dtype}: expected real numbers, "
                        f"{expected}")  # fmt: skip
    return arr


def check_endpoints_host(x0, x1, n_points: int):
    """:func:`check_endpoints` on the host: NumPy arrays of the dtype JAX would use."""
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)):
        raise ValueError(f"n_points must be an int >= 3, got {n_points!r}")
    if n_points < 3:
        raise ValueError(f"n_points={n_points}: need >= 3 (two endpoints and an interior point)")
    x0 = real_array("x0", x0, "an array of shape (d,) or (batch, d)")
    x1 = real_array("x1", x1, "an array of shape (d,) or (batch, d)")
    dtype = jax.dtypes.canonicalize_dtype(x0.dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jax.dtypes.canonicalize_dtype(float)
    if x0.dtype != dtype:
        x0 = x0.astype(dtype)
    if x1.dtype != dtype:
        x1 = x1.astype(dtype)
    if x0.shape != x1.shape:
        raise ValueError(f"endpoints have shapes {x0.shape} and {x1.shape}; expected equal shapes")
    if x0.ndim not in (1, 2) or x0.shape[-1] < 1:
        raise ValueError(f"endpoints of shape {x0.shape}: expected (d,) or (batch, d) with d >= 1")
    for name, x in (("x0", x0), ("x1", x1)):
        if not np.isfinite(x).all():
            raise ValueError(f"{name} has non-finite entries: {show(x)}")
    return x0, x1


def check_endpoints(x0, x1, n_points: int):
    """Validate endpoints and waypoint count; return them as float arrays of one dtype."""
    x0, x1 = check_endpoints_host(x0, x1, n_points)
    return jnp.asarray(x0), jnp.asarray(x1)


def positive(name, value, *, allow_zero=False, allow_inf=False):
    """``value`` as a NumPy scalar, checked to be a number ``> 0`` (``>= 0``), finite unless
    ``allow_inf``."""
    if type(value) is float or type(value) is int:  # the common case, without NumPy (~10x faster)
        if (value >= 0 if allow_zero else value > 0) and (allow_inf or value < math.inf):
            return np.float64(value)
    bound = ">= 0" if allow_zero else "> 0"
    arr = np.asarray(value)
    if not is_real(arr.dtype):  # bool, str, complex, None, ...
        raise TypeError(f"{name}={show(value)}: expected a real number {bound}")
    if arr.shape != ():
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    arr = arr.astype(float)
    ok = (arr >= 0 if allow_zero else arr > 0) and (allow_inf or np.isfinite(arr)) and arr == arr
    if not ok:
        raise ValueError(f"{name}={float(arr)}: expected a finite number {bound}")
    return arr


def check_count(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r}: expected an int >= 1")
    return value


def check_callables(score, metric):
    if score is not None and not callable(score):
        raise TypeError(f"score must be a callable x -> s(x), got {type(score).__name__}")
    if metric is not None and not callable(metric):
        raise TypeError(f"metric must be a callable x -> G(x), got {type(metric).__name__}")


# The (structure of score / metric, d, dtype) whose output shapes passed check_output_shapes. A
# key holds plain functions themselves, and an entry keyed by ids holds (score, metric), so no
# id is reused while the entry lives; array leaves are keyed by shape and not held. Bounded.
_SHAPES_OK: OrderedDict = OrderedDict()
_MAX_SHAPES_OK = 256


def _shapes_key(score, metric, d, dtype):
    leaves, treedef = jax.tree.flatten((score, metric))
    static = tuple((x.shape, x.dtype) if eqx.is_array(x) else x for x in leaves)
    key = (treedef, static, d, np.dtype(dtype))
    try:
        hash(key)
    except TypeError:  # an unhashable non-array leaf: key on the objects' identity
        key = ("id", id(score), id(metric), d, np.dtype(dtype))
    return key


def check_output_shapes(score, metric, d: int, dtype) -> None:
    """Raise when ``score`` does not map one point ``(d,)`` to ``(d,)`` real numbers, or
    ``metric`` does not map it to a ``(d, d)`` matrix; by :func:`jax.eval_shape` on one
    abstract point (a trace of the callables, no compilation), once per structure of the
    callables (the array leaves' shapes, not their values), ``d`` and ``dtype``."""
    if score is None and (metric is None or isinstance(metric, Euclidean)):
        return
    key = _shapes_key(score, metric, d, dtype)
    entry = _SHAPES_OK.get(key)
    by_id = isinstance(key[0], str)
    if entry is not None and (not by_id or (entry[0] is score and entry[1] is metric)):
        _SHAPES_OK.move_to_end(key)
        return
    point = jax.ShapeDtypeStruct((d,), dtype)
    for name, fn, want, what in (("score", score, (d,), "s(x)"),
                                 ("metric", metric, (d, d), "G(x)")):  # fmt: skip
        if fn is None:
            continue
        out = jax.eval_shape(fn, point)
        got = f"shape {out.shape}" if isinstance(out, jax.ShapeDtypeStruct) else show(out)
        if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != want:
            raise ValueError(f"{name} returned {got} for a point of shape ({d},): expected "
                             f"{what} of shape {want}")  # fmt: skip
        if not is_real(out.dtype):
            raise TypeError(f"{name} returned dtype {out.dtype} for a point of shape ({d},): "
                            "expected real numbers")  # fmt: skip
    _SHAPES_OK[key] = (score, metric) if by_id else ()
    if len(_SHAPES_OK) > _MAX_SHAPES_OK:
        _SHAPES_OK.popitem(last=False)


def resolve_kind(residual: str, metric) -> str:
    """The residual kind of ``residual=`` (``"auto"``: Euclidean without a metric)."""
    if residual == "auto":
        return "euclidean" if metric is None or isinstance(metric, Euclidean) else "metric"
    if residual not in ("euclidean", "hypersphere", "metric"):
        raise ValueError(
            f"residual {residual!r}: expected 'auto', 'euclidean', 'hypersphere' or 'metric'"
        )
    if residual == "metric" and metric is None:
        raise ValueError("residual='metric' needs a metric")
    return residual


def check_init(init, x0, x1, n_points: int):
    """``(init as an array of x0's dtype or None, the path's largest entry)``; the endpoints of
    ``init`` must be ``x0`` / ``x1``."""
    if init is None:  # the straight line's largest entry is at an endpoint
        return None, float(max(np.max(np.abs(x0)), np.max(np.abs(x1))))
    batched = x0.ndim == 2
    want = (n_points, x0.shape[-1]) if not batched else (x0.shape[0], n_points, x0.shape[-1])
    arr = real_array("init", init, f"a path of shape {want}").astype(x0.dtype, copy=False)
    if arr.shape != want:
        raise ValueError(f"init has shape {arr.shape}, expected {want}")
    p = arr if batched else arr[None]
    scale = float(np.max(np.abs(p)))  # NaN or inf if any entry is
    if not math.isfinite(scale):
        raise ValueError("init has non-finite entries")
    b0, b1 = (x0, x1) if batched else (x0[None], x1[None])
    gap = float(np.max(np.abs(p[:, 0] - b0))) + float(np.max(np.abs(p[:, -1] - b1)))
    if gap > 1e-6 * (1.0 + scale):
        raise ValueError(f"init's endpoints differ from x0/x1 by {gap:.3g}")
    return arr, scale


def check_lm_options(lm_options) -> tuple:
    """``lm_options`` as a sorted tuple of items (a static, hashable configuration)."""
    opts = tuple(sorted((lm_options or {}).items()))
    unknown = {k for k, _ in opts} - set(LM_OPTIONS)
    if unknown:
        raise ValueError(f"lm_options {sorted(unknown)}: expected keys {', '.join(LM_OPTIONS)}")
    return opts


def check_metric_domain(metric, x0, x1, init):
    """Host-side domain checks of the shipped metrics (e.g. the half-plane needs x_d > 0)."""
    check = getattr(metric, "check_points", None)
    if check is None:
        return
    check(x0, "x0")
    check(x1, "x1")
    if init is not None:
        check(init, "init")


def _where(pair, point, n_points, batched) -> str:
    end = {0: " (the endpoint x0)", n_points - 1: " (the endpoint x1)"}.get(point, "")
    return (f"pair {pair}, " if batched else "") + f"waypoint {point}{end}"


def raise_on_bad_metric(asym, scale, ok_chol, path0, metric, batched):
    """Raise at the first waypoint (pair by pair) of the initial path ``path0()`` (a function:
    built only on failure) where the metric is not finite, not symmetric (``max |G - G^T| >
    rtol max |G|``) or not positive-definite (the Cholesky factor of its symmetric part is not
    finite); ``asym``, ``scale``, ``ok_chol`` ``(B, K)`` are those measures from the jitted
    solve. The message names the waypoint and the value (the metric evaluated there again)."""
    rtol = 1e-5 if scale.dtype == np.float32 else 1e-10
    bad = ~np.isfinite(scale) | ~(asym <= rtol * np.maximum(scale, np.finfo(float).tiny))
    bad |= ~ok_chol
    if not bad.any():
        return
    pair, point = np.unravel_index(int(np.argmax(bad)), bad.shape)
    x = np.asarray(path0()).reshape(bad.shape + (-1,))[pair, point]
    where = f"{_where(pair, point, bad.shape[1], batched)} of the initial path, x = {x.tolist()}"
    g = np.asarray(metric(jnp.asarray(x)), dtype=float)
    if not np.isfinite(g).all():
        raise ValueError(f"metric at {where} has non-finite entries: {g.tolist()}")
    what = "expected a symmetric positive-definite matrix"
    asym, top = float(np.max(np.abs(g - g.T))), max(float(np.max(np.abs(g))), 1e-300)
    if asym > rtol * top:
        raise ValueError(
            f"metric at {where} is not symmetric: max |G - G^T| = {asym:.3g} "
            f"(max |G| = {top:.3g}); {what}"
        )
    lo = float(np.min(np.linalg.eigvalsh(0.5 * (g + g.T))))
    raise ValueError(f"metric at {where} is not positive-definite: smallest eigenvalue {lo:.3g}; "
                     f"{what}")  # fmt: skip


def raise_on_bad_ends(ok_ends, batched):
    """Raise when the score is not finite at an endpoint (``ok_ends`` ``(B, 2)``: x0, x1)."""
    for j, name in enumerate(("x0", "x1")):
        if not ok_ends[:, j].all():
            pair = int(np.argmin(ok_ends[:, j]))
            raise ValueError(
                f"score is not finite at the endpoint {name}"
                + (f" of pair {pair}" if batched else "")
                + "; fix the score there or move the endpoint"
            )


def raise_on_bad_score(ok_score, batched):
    """Raise when the score is not finite on the initial path (``ok_score`` ``(B, K)``): at an
    endpoint first (:func:`raise_on_bad_ends`), then at the first interior waypoint."""
    raise_on_bad_ends(ok_score[:, [0, -1]], batched)
    if not ok_score.all():
        pair, point = (int(v[0]) for v in np.nonzero(~ok_score))
        where = f"pair {pair}, waypoint {point}" if batched else f"waypoint {point}"
        raise ValueError(
            f"score is not finite at {where} of the initial path; pass an `init` path that "
            "avoids it or fix the score"
        )
