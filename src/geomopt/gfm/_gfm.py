"""``geomopt.gfm.solve``: geodesic force matching between endpoint pairs.

Finds the interior waypoints of a path from ``x0`` to ``x1`` where the discretised
Euler-Lagrange force balance of ``int 1/2 xdot^T G(x) xdot + lam U(x) dt`` holds (see
:mod:`._residuals`), by Levenberg-Marquardt / Gauss-Newton with banded linear algebra (the
default LM; ``method="action"`` first descends the path action, :mod:`._action`) or by the
official code's Adam. One compiled function serves single pairs and batches (vmap over pairs);
``lam``, ``tol``, ``max_iters``, ``lr`` and ``clip`` are passed as arrays, so changing them does
not recompile.

Per-call cost: inputs are checked on the host with NumPy (no device round trips), and the
straight-line start, the solve and the initial-path validity masks run in one ``jax.jit``
executable whose outputs are fetched in one transfer. The jitted function is cached per static
configuration (the non-array parts of ``score`` / ``metric``, residual kind, method, shapes);
the array leaves of ``score`` / ``metric`` (e.g. network weights, ``sigma``) are jit arguments.
This replaces ``eqx.filter_jit``, whose per-call pytree filtering cost more than a whole
Levenberg-Marquardt solve of a small path.
"""

from __future__ import annotations

import math
import time
import types
from collections import OrderedDict
from collections.abc import Callable
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._metrics import Euclidean
from ._residuals import local_residual
from ._solve import CONVERGED_CODES, METHODS, SolveReport, minimise_path

__all__ = ["solve", "straight_line", "check_endpoints", "default_tol", "DEFAULT_MAX_ITERS"]

MATRIX_FREE_MIN_D = 256  # gfm.solve(backend="auto") uses the matrix-free LM from this d on
BATCH_MODES = ("auto", "vmap", "map")
DEFAULT_MAX_ITERS = {"lm": 200, "gauss_newton": 100, "adam": 1501, "action": 200}
GFM_METHODS = (*METHODS, "action")


def straight_line(x0, x1, n_points: int):
    """``n_points`` equally spaced waypoints from ``x0`` to ``x1`` (batched over leading axes)."""
    t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)
    t = t.reshape((1,) * (x0.ndim - 1) + (n_points, 1))
    return x0[..., None, :] * (1.0 - t) + x1[..., None, :] * t


def default_tol(n_points: int, dtype, scale: float = 1.0) -> float:
    """Default residual tolerance: near the rounding floor of the acceleration stencil.

    ``a_i = (x_{i+1} - 2 x_i + x_{i-1}) / dt^2`` carries a rounding error of about
    ``eps |x| / dt^2``; the default is 100x that (but at least 1e-8).
    """
    eps = float(jnp.finfo(dtype).eps)
    return max(1e-8, 100.0 * eps * (n_points - 1) ** 2 * max(scale, 1.0))


def _check_endpoints_host(x0, x1, n_points: int):
    """:func:`check_endpoints` on the host: NumPy arrays of the dtype JAX would use."""
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)):
        raise ValueError(f"n_points must be an int >= 3, got {n_points!r}")
    if n_points < 3:
        raise ValueError(f"n_points={n_points}: need >= 3 (two endpoints and an interior point)")
    x0 = np.asarray(x0)
    x1 = np.asarray(x1)
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
            raise ValueError(f"{name} has non-finite entries: {x}")
    return x0, x1


def check_endpoints(x0, x1, n_points: int):
    """Validate endpoints and waypoint count; return them as float arrays of one dtype."""
    x0, x1 = _check_endpoints_host(x0, x1, n_points)
    return jnp.asarray(x0), jnp.asarray(x1)


def _positive(name, value, *, allow_zero=False, allow_inf=False):
    if type(value) is float or type(value) is int:  # the common case, without NumPy (~10x faster)
        if (value >= 0 if allow_zero else value > 0) and (allow_inf or value < math.inf):
            return np.float64(value)
    arr = np.asarray(value, dtype=float)
    if arr.shape != ():
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    ok = (arr >= 0 if allow_zero else arr > 0) and (allow_inf or np.isfinite(arr)) and arr == arr
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={float(arr)}: expected a finite number {bound}")
    return arr


def _resolve_kind(residual: str, metric) -> str:
    if residual == "auto":
        return "euclidean" if metric is None or isinstance(metric, Euclidean) else "metric"
    if residual not in ("euclidean", "hypersphere", "metric"):
        raise ValueError(
            f"residual {residual!r}: expected 'auto', 'euclidean', 'hypersphere' or 'metric'"
        )
    if residual == "metric" and metric is None:
        raise ValueError("residual='metric' needs a metric")
    return residual


_BATCH_AXIS = "pairs"  # vmap axis name of a batched solve


def _gfm_core(path0, lam, tol, max_iters, adam, score, metric, kind, method, score_grad, lm_opts,
              batch="vmap"):  # fmt: skip
    """Batched GFM solve (traceable): ``path0`` is (B, K, d); ``batch`` is ``"vmap"`` or
    ``"map"`` (see :func:`solve`). Also returns per-waypoint validity of the initial path
    (metric Cholesky finite, score finite) for error messages."""
    k = path0.shape[1]
    single = path0.shape[0] == 1
    unbatched = single or batch == "map"  # each pair in its own loop, conds not vmapped
    dt = 1.0 / (k - 1)
    lam = lam.astype(path0.dtype)
    lr, clip, eps = adam
    local = partial(
        local_residual,
        dt=dt,
        lam=lam,
        score=score,
        metric=metric,
        kind=kind,
        score_grad=score_grad,
    )

    def one(p):
        if method == "action":
            # Descend the action (half the budget at most), then polish with LM (see _action).
            from ._action import descend_action

            s = score if score is not None else jnp.zeros_like
            budget = jnp.maximum(max_iters // 2, 1)
            g = metric if kind == "metric" else None
            p, _, it1, _ = descend_action(p, s, lam, tol.astype(p.dtype), budget, metric=g)
            # The descent hands over near a solution (Newton region): LM starts almost
            # undamped there (1e-9 max diag(J^T J) instead of 1e-3: 1 polishing iteration
            # instead of ~7 on the torus pairs), unless lm_options sets the damping.
            out = polish(p, jnp.maximum(max_iters - it1, 1), defaults={"damping": 1e-9})
            return (out[0], out[1], out[2] + it1, *out[3:])
        return polish(p, max_iters, method)

    def polish(p, max_iters, method="lm", defaults=None):
        return minimise_path(
            p,
            local,
            window=3,
            method=method,
            tol=tol.astype(p.dtype),
            gtol=jnp.zeros((), p.dtype),
            max_iters=max_iters,
            lr=lr.astype(p.dtype),
            clip=clip.astype(p.dtype),
            eps=eps.astype(p.dtype),
            reduce="mean",
            diagnostics=True,
            lm_options={**(defaults or {}), **dict(lm_opts)},
            batch_axis=None if unbatched else _BATCH_AXIS,
        )

    def valid(p):
        ok_metric = jnp.ones(p.shape[0], bool)
        if kind == "metric":
            chol = jax.vmap(lambda x: jnp.linalg.cholesky(metric(x)))(p)
            ok_metric = jnp.all(jnp.isfinite(chol), axis=(1, 2))
        ok_score = jnp.ones(p.shape[0], bool)
        if score is not None:
            ok_score = jnp.all(jnp.isfinite(jax.vmap(score)(p)), axis=-1)
        return ok_metric, ok_score

    # A single pair is solved unbatched, so the solver's lax.conds skip work (under vmap, even
    # of one pair, a cond on a per-pair predicate runs both branches); a batch is either mapped
    # (each pair unbatched in turn) or vmapped with an axis name, which LM uses to skip a part
    # of a pass that no active pair needs.
    if single:
        out = jax.tree.map(lambda a: a[None], one(path0[0]))
    elif batch == "map":  # one pair after another, each stopping at its own iteration
        out = jax.lax.map(one, path0)
    else:
        out = jax.vmap(one, axis_name=_BATCH_AXIS)(path0)

    # The residual evaluates the score and the metric at every interior waypoint, so a bad
    # interior waypoint makes its pair stop with code 2; only then are the interior waypoints
    # checked one by one (a whole-path check costs a third of an LM iteration). The endpoints,
    # which the residual does not evaluate, are always checked.
    def only_endpoints():
        ends = jax.vmap(valid)(path0[:, jnp.array([0, k - 1])])
        return tuple(
            jnp.ones(path0.shape[:2], bool).at[:, 0].set(e[:, 0]).at[:, -1].set(e[:, 1])
            for e in ends
        )

    checks = jax.lax.cond(jnp.any(out[3] == 2), lambda: jax.vmap(valid)(path0), only_endpoints)
    return out, checks


# Jitted solvers by static configuration, least recently used first. A key holds the static
# parts of score / metric (plain functions by identity, so a cached key keeps its function alive
# and its id cannot be reused); the cache is bounded so that fresh closures do not pile up.
_SOLVERS: OrderedDict = OrderedDict()
_MAX_SOLVERS = 64
_DYNAMIC = object()  # marks an array leaf among a key's static leaves


def _split_callables(score, metric):
    """Array leaves of ``(score, metric)``, their tree structure and static leaves, and a
    hashable key for everything that is not an array leaf."""
    leaves, treedef = jax.tree.flatten((score, metric))
    dynamic = tuple(x for x in leaves if eqx.is_array(x))
    static = tuple(_DYNAMIC if eqx.is_array(x) else x for x in leaves)
    key = (treedef, static)
    try:
        hash(key)
    except TypeError:
        # An unhashable non-array leaf: key on the objects' identity instead (the cache entry
        # holds them, so the ids stay theirs while the entry lives).
        key = ("id", id(score), id(metric))
    return dynamic, treedef, static, key


def _solver(treedef, static, cfg):
    """The jitted solve for one static configuration ``cfg``."""
    kind, method, score_grad, n_points, batched, has_init, lm_opts, _dtype, batch = cfg

    def run(x0, x1, init, dynamic, hyper, max_iters):
        it = iter(dynamic)
        score, metric = jax.tree.unflatten(
            treedef, [next(it) if s is _DYNAMIC else s for s in static]
        )
        path0 = init if has_init else straight_line(x0, x1, n_points)
        if not batched:
            path0 = path0[None]
        lam, tol, lr, clip, eps = hyper
        (path, res, its, code, (bad_it, bad_wp)), (ok_metric, ok_score) = _gfm_core(
            path0, lam, tol, max_iters, (lr, clip, eps), score, metric, kind, method, score_grad,
            lm_opts, batch,
        )  # fmt: skip
        converged = jnp.any(code[:, None] == jnp.asarray(CONVERGED_CODES)[None], axis=1)
        # The metric at one sample point (pair 0's first endpoint), checked on the host for
        # symmetry and positive definiteness (the residual's Cholesky would symmetrise it).
        g0 = metric(path0[0, 0]) if kind == "metric" else jnp.zeros((0, 0), path0.dtype)
        stats = (res, its, code, converged, ok_metric, ok_score, bad_it, bad_wp, g0)
        return (path if batched else path[0]), stats

    return jax.jit(run)


# (score, metric) -> _split_callables(score, metric), by identity, for Equinox modules and plain
# functions (whose leaves cannot be rebound after construction: Equinox modules are frozen), so
# a repeated solve does not flatten a network's parameters again (a tenth of a small solve's
# time). An entry holds its objects, so their ids are not reused while it lives.
_SPLITS: OrderedDict = OrderedDict()


def _cacheable(obj) -> bool:
    return obj is None or isinstance(obj, (eqx.Module, types.FunctionType))


def _split_cached(score, metric):
    if not (_cacheable(score) and _cacheable(metric)):
        return _split_callables(score, metric)
    ident = (id(score), id(metric))
    entry = _SPLITS.get(ident)
    if entry is not None and entry[0] is score and entry[1] is metric:
        _SPLITS.move_to_end(ident)
        return entry[2]
    split = _split_callables(score, metric)
    _SPLITS[ident] = (score, metric, split)
    while len(_SPLITS) > _MAX_SOLVERS:
        _SPLITS.popitem(last=False)
    return split


def _get_solver(score, metric, cfg):
    """The cached jitted solve for this configuration and the array leaves to pass it."""
    dynamic, treedef, static, key = _split_cached(score, metric)
    key = (key, cfg)
    entry = _SOLVERS.get(key)
    if entry is None:
        entry = (_solver(treedef, static, cfg), (score, metric))
        _SOLVERS[key] = entry
        while len(_SOLVERS) > _MAX_SOLVERS:
            _SOLVERS.popitem(last=False)
    else:
        _SOLVERS.move_to_end(key)
    return entry[0], dynamic


def solve(
    x0,
    x1,
    *,
    score: Callable | None = None,
    metric: Callable | None = None,
    lam=1.0,
    n_points: int = 32,
    method: str = "lm",
    tol=None,
    max_iters: int | None = None,
    init=None,
    residual: str = "auto",
    score_grad: bool | None = None,
    lr=0.05,
    clip=10.0,
    eps=1e-8,
    lm_options: dict | None = None,
    backend: str = "auto",
    batch: str = "auto",
):
    """Solve the GFM collocation problem between ``x0`` and ``x1``; return ``(path, report)``.

    Args:
        x0, x1: endpoints, shape ``(d,)``, or ``(B, d)`` for a batch of ``B`` pairs solved by one
            jitted call (``batch`` says how).
        score: ``s(x) = grad log p(x)`` for one point ``(d,) -> (d,)`` (the force is
            ``-lam grad U = lam s``); ``None`` means no potential (pure prior geodesic). A plain
            function or an Equinox module; the module's array leaves are traced, so new weights
            or a new ``sigma`` array do not recompile.
        metric: prior metric ``x -> G(x)`` (SPD, ``d x d``); ``None`` is Euclidean.
        lam: weight of the potential (``>= 0``), passed as an array (no recompilation).
        n_points: waypoints including both endpoints (``>= 3``).
        method: ``"lm"`` (Levenberg-Marquardt, banded), ``"gauss_newton"`` (Newton on the square
            system, block-tridiagonal Jacobian, line search), ``"action"`` (Euclidean or metric
            residual: trust-region Newton descent of the path action, then LM to polish; it
            reaches minima of the action, where LM also accepts saddles such as paths through a
            torus's hole, see :mod:`geomopt.gfm._action`) or ``"adam"`` (official settings).
        tol: stop when ``sqrt(mean_i r_i^T G r_i) <= tol``; default :func:`default_tol`.
        max_iters: iteration cap; default 200 (lm, action: at most half for the descent), 100
            (gauss_newton), 1501 (adam, the official torus setting).
        init: initial path ``(n_points, d)`` / ``(B, n_points, d)`` with the given endpoints,
            or a name: ``"chord"`` (the straight line, the default), ``"slerp"``
            (:func:`geomopt.gfm.slerp`) or ``"sequential"`` (the official sequential warm
            start, :func:`geomopt.gfm.sequential_init`, with this solve's ``score``, ``lam``,
            ``lr`` and a tenth of ``max_iters`` per waypoint). Other starts (on the manifold,
            projected with the denoiser) are built by the functions of :mod:`geomopt.gfm._init`
            and passed as arrays.
        residual: ``"auto"`` (Euclidean residual for ``metric=None``/:class:`Euclidean`, the
            metric residual otherwise), ``"euclidean"``, ``"hypersphere"`` or ``"metric"``.
        score_grad: differentiate through the score. Default True for lm/gauss_newton (exact
            Jacobian, quadratic convergence) and False for adam (the official code's constant
            force). The residual, and therefore the solution, is the same.
        lr, clip, eps: Adam's learning rate, global-norm gradient clip and epsilon. The official
            settings differ per problem (torus metric runs A/B/C: lr 1e-3 / 5e-3 / 5e-4, clip
            10, eps 1e-8 (PyTorch's default), 1501 iterations; 3-D shape latents: lr 0.01, no
            clip, eps 1e-5, 500 iterations); pass them. Arrays: changing them does not recompile.
        lm_options: Levenberg-Marquardt options (static: a new value compiles once):
            ``geodesic`` (geodesic acceleration, default True), ``accel_ratio`` (0.75: largest
            accepted ``2|a|/|v|``), ``slow_factor`` (10: the "too slow" stop, code 7),
            ``damping`` (1e-3: initial damping relative to ``max diag(J^T J)``).
        backend: ``"banded"`` (the solvers above), ``"matrix_free"`` (Levenberg-Marquardt with
            conjugate gradients on JVPs/VJPs, memory O(K d), :func:`geomopt.gfm.solve_matrix_free`;
            Euclidean / hypersphere residual, method ``"lm"``/``"gauss_newton"``; ``score_grad``,
            ``lr``, ``clip``, ``eps``, ``lm_options`` do not apply) or ``"auto"``: matrix-free
            for those residuals and methods when ``d >= MATRIX_FREE_MIN_D`` (256), banded
            otherwise. The threshold is from the cost per LM iteration (the banded LM pushes
            ``d`` tangents through the score and factors ``d x d`` blocks; the matrix-free one
            takes ~2 JVP/VJPs per CG step, 5-30 CG steps measured), not a measured crossover.
        batch: how a batch of pairs runs inside its one jitted call: ``"vmap"`` (the pairs
            advance together through one loop, so every pass costs the whole batch until its
            slowest pair stops, and a skip in an LM pass needs every running pair to skip it),
            ``"map"`` (one pair after another, each in its own loop, stopping at its own
            iteration count; the same numbers) or ``"auto"``: ``"map"`` for the Newton-type
            methods (lm, action, gauss_newton) on the CPU, ``"vmap"`` for adam (a fixed
            iteration count, where batching pays) and on accelerators (parallel hardware).
            Measured on the CPU, 16 torus pairs with a trained denoiser, map vs vmap: LM to
            convergence 71 vs 291 ms, LM-flat to a loose tolerance 7.0 vs 10.8 ms, action
            37 vs 35 ms; Adam, 375 iterations, 287 vs 218 ms.

    Returns:
        ``path`` of shape ``(n_points, d)`` (or ``(B, n_points, d)``) with the endpoints, and a
        :class:`SolveReport`. A solve that does not reach ``tol`` returns the best finite path with
        ``converged=False`` and the reason; the path is never NaN.

    Raises:
        ValueError: bad shapes, non-finite endpoints, ``n_points < 3``, bad ``lam``/``tol``, an
            unknown method, or an initial path on which the metric is not SPD or the score is
            not finite (the message names the pair and waypoint).
    """
    x0n, x1n = _check_endpoints_host(x0, x1, n_points)
    if method not in GFM_METHODS:
        raise ValueError(f"method {method!r}: expected one of {GFM_METHODS}")
    if score is not None and not callable(score):
        raise TypeError(f"score must be a callable x -> s(x), got {type(score).__name__}")
    if metric is not None and not callable(metric):
        raise TypeError(f"metric must be a callable x -> G(x), got {type(metric).__name__}")
    kind = _resolve_kind(residual, metric)
    if method == "action" and kind == "hypersphere":
        raise ValueError(
            "method='action' with residual 'hypersphere': the projected residual is not the "
            "gradient of an action; use method='lm' or residual 'euclidean' / 'metric'"
        )
    lam = _positive("lam", lam, allow_zero=True)
    dtype = x0n.dtype
    batched = x0n.ndim == 2
    if isinstance(init, str):
        init = _named_init(init, x0n, x1n, n_points, score, lam, lr, method, max_iters)
    if init is None:
        # The straight line's largest entry is at an endpoint (it is a convex combination).
        scale = float(max(np.max(np.abs(x0n)), np.max(np.abs(x1n))))
        init_arg = None
    else:
        init_arg = np.asarray(init).astype(dtype, copy=False)
        want = (n_points, x0n.shape[-1]) if not batched else (x0n.shape[0], n_points, x0n.shape[-1])
        if init_arg.shape != want:
            raise ValueError(f"init has shape {init_arg.shape}, expected {want}")
        p = init_arg if batched else init_arg[None]
        scale = float(np.max(np.abs(p)))  # NaN or inf if any entry is
        if not math.isfinite(scale):
            raise ValueError("init has non-finite entries")
        gap = float(np.max(np.abs(p[:, 0] - (x0n if batched else x0n[None])))) + float(
            np.max(np.abs(p[:, -1] - (x1n if batched else x1n[None])))
        )
        if gap > 1e-6 * (1.0 + scale):
            raise ValueError(f"init's endpoints differ from x0/x1 by {gap:.3g}")
    _check_metric_domain(metric, x0n, x1n, init_arg)
    tol = default_tol(n_points, dtype, scale) if tol is None else tol
    tol = _positive("tol", tol)
    max_iters = DEFAULT_MAX_ITERS[method] if max_iters is None else max_iters
    if isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)) or max_iters < 1:
        raise ValueError(f"max_iters={max_iters!r}: expected an int >= 1")
    lr = _positive("lr", lr)
    clip = _positive("clip", clip, allow_inf=True)
    eps = _positive("eps", eps)
    lm_opts = tuple(sorted((lm_options or {}).items()))
    unknown = {k for k, _ in lm_opts} - {"geodesic", "accel_ratio", "slow_factor", "damping"}
    if unknown:
        raise ValueError(
            f"lm_options {sorted(unknown)}: expected keys geodesic, accel_ratio, slow_factor, "
            "damping"
        )
    # Other backends (e.g. the matrix-free LM of ._matrix_free) dispatch here: every input has
    # been checked and ``init_arg`` / ``tol`` / ``max_iters`` resolved; the banded solve below
    # is the default backend.
    free_ok = kind in ("euclidean", "hypersphere") and method in ("lm", "gauss_newton")
    if batch not in BATCH_MODES:
        raise ValueError(f"batch {batch!r}: expected one of {BATCH_MODES}")
    if backend not in ("auto", "banded", "matrix_free"):
        raise ValueError(f"backend {backend!r}: expected 'auto', 'banded' or 'matrix_free'")
    if backend == "matrix_free" and not free_ok:
        raise ValueError(
            f"backend='matrix_free' with residual {kind!r} and method {method!r}: expected the "
            "'euclidean' or 'hypersphere' residual and method 'lm' or 'gauss_newton'"
        )
    if backend == "matrix_free" or (
        backend == "auto" and free_ok and x0n.shape[-1] >= MATRIX_FREE_MIN_D
    ):
        from ._matrix_free import solve_matrix_free

        return solve_matrix_free(
            x0n, x1n, score=score, lam=float(lam), n_points=n_points, residual=kind,
            init="linear" if init_arg is None else init_arg, tol=float(tol), max_iters=max_iters,
        )  # fmt: skip
    if score_grad is None:
        score_grad = method != "adam"
    cfg = (kind, method, bool(score_grad), n_points, batched, init is not None, lm_opts,
           _dtype_name(dtype), _batch_mode(batch, method) if batched else "single")  # fmt: skip
    fn, dynamic = _get_solver(score, metric, cfg)
    # Pass device arrays through untouched (no copy); convert anything else once.
    a0 = x0 if isinstance(x0, jax.Array) and x0.dtype == dtype else x0n
    a1 = x1 if isinstance(x1, jax.Array) and x1.dtype == dtype else x1n
    hyper = np.array([lam, tol, lr, clip, eps], dtype=dtype)
    t0 = time.perf_counter()
    path, stats = fn(a0, a1, init_arg, dynamic, hyper, np.asarray(max_iters))
    path.block_until_ready()
    res, its, code, converged, ok_metric, ok_score, bad_it, bad_wp, g0 = _to_host(stats)
    wall = time.perf_counter() - t0
    if kind == "metric":
        _check_metric_value(g0, x0n[0] if batched else x0n)
    _raise_on_bad_init(ok_metric, ok_score, batched)
    if not batched:
        res, its, code, converged, bad_it, bad_wp = (a[0] for a in (res, its, code, converged,
                                                                    bad_it, bad_wp))  # fmt: skip
    report = SolveReport(
        iterations=its,
        residual=res,
        converged=converged,
        code=code,
        wall_time=wall,
        method=method,
        bad_iteration=bad_it,
        bad_waypoint=bad_wp,
    )
    return path, report


def _batch_mode(batch: str, method: str) -> str:
    """``batch`` of :func:`solve` with ``"auto"`` resolved."""
    if batch != "auto":
        return batch
    return "map" if method != "adam" and jax.default_backend() == "cpu" else "vmap"


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    """``np.dtype(dtype).name``, cached (a few microseconds per solve otherwise)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


INITS = ("chord", "slerp", "sequential")


def _named_init(name, x0, x1, n_points, score, lam, lr, method, max_iters):
    """The initial path named ``name`` (None for the chord, which the jitted solve builds)."""
    from ._init import sequential_init
    from ._matrix_free import slerp

    if name == "chord":
        return None
    if name == "slerp":
        return np.asarray(slerp(x0, x1, n_points))
    if name == "sequential":
        if score is None:
            raise ValueError("init='sequential' needs a score (it balances the force)")
        iters = DEFAULT_MAX_ITERS[method] if max_iters is None else max_iters
        lr = _positive("lr", lr)
        path = sequential_init(
            x0, x1, n_points, score, lam=float(lam), lr=float(lr), iters=max(1, int(iters) // 10)
        )
        return np.asarray(path)
    raise ValueError(f"init {name!r}: expected an array or one of {INITS}")


def _check_metric_domain(metric, x0, x1, init):
    """Host-side domain checks of the shipped metrics (e.g. the half-plane needs x_d > 0)."""
    check = getattr(metric, "check_points", None)
    if check is None:
        return
    check(x0, "x0")
    check(x1, "x1")
    if init is not None:
        check(init, "init")


_METRIC_OK: OrderedDict = OrderedDict()  # metric values already found SPD (bytes, shape)


def _check_metric_value(g, x):
    """Reject a metric that is not symmetric positive-definite at the sample point ``x``."""
    seen = (g.tobytes(), g.shape, g.dtype.str) if isinstance(g, np.ndarray) else None
    if seen is not None and seen in _METRIC_OK:
        return
    _check_metric_array(g, x)
    if seen is not None:
        _METRIC_OK[seen] = None
        while len(_METRIC_OK) > 256:
            _METRIC_OK.popitem(last=False)


def _check_metric_array(g, x):
    g = np.asarray(g, dtype=float)
    if g.shape != (x.shape[-1],) * 2:
        raise ValueError(f"metric returned shape {g.shape} at x0, expected {(x.shape[-1],) * 2}")
    if not np.isfinite(g).all():
        raise ValueError(f"metric at x0 = {x} has non-finite entries: {g.tolist()}")
    scale = max(float(np.max(np.abs(g))), np.finfo(float).tiny)
    asym = float(np.max(np.abs(g - g.T)))
    rtol = 1e-5 if x.dtype == np.float32 else 1e-10
    if asym > rtol * scale:
        raise ValueError(
            f"metric at x0 = {x} is not symmetric: max |G - G^T| = {asym:.3g} "
            f"(max |G| = {scale:.3g}); expected a symmetric positive-definite matrix"
        )
    lo = float(np.min(np.linalg.eigvalsh(0.5 * (g + g.T))))
    if not lo > 0:
        raise ValueError(
            f"metric at x0 = {x} is not positive-definite: smallest eigenvalue {lo:.3g}; "
            "expected a symmetric positive-definite matrix"
        )


def _to_host(arrays):
    """NumPy copies of small outputs: one batched ``jax.device_get`` on an accelerator; on the
    CPU ``np.asarray`` per array, which reads the buffer directly (a few times cheaper)."""
    if next(iter(arrays[0].devices())).platform == "cpu":
        return tuple(np.asarray(a) for a in arrays)
    return jax.device_get(arrays)


def _raise_on_bad_init(ok_metric, ok_score, batched):
    for what, ok in (
        ("metric is not SPD (Cholesky failed)", ok_metric),
        ("score is not finite", ok_score),
    ):
        if not ok.all():
            pair, point = (int(v[0]) for v in np.nonzero(~ok))
            where = f"pair {pair}, waypoint {point}" if batched else f"waypoint {point}"
            raise ValueError(
                f"{what} at {where} of the initial path; pass an `init` path that avoids it or "
                "fix the metric/score"
            )
