"""The banded backend of :func:`geomopt.gfm.solve`: one cached ``jax.jit`` executable per static
configuration that builds the straight-line start, runs the solver (a
:class:`~.solvers.BandedSolver`: its ``minimise``) over every pair, measures the initial
path's validity (the metric at every waypoint, the score where needed) and the solved path's
support check (:mod:`._support`: the score at the waypoints and segment midpoints, ``sigma``
traced), with its outputs fetched in one transfer.

The jitted function is cached per static configuration (the non-array parts of ``score`` /
``metric``, residual kind, the solver with its options, shapes); the array leaves of ``score`` /
``metric`` (e.g. network weights, ``sigma``) and the solver's ``traced`` fields (Adam's ``lr`` /
``clip`` / ``eps``) are jit arguments. This replaces ``eqx.filter_jit``, whose per-call
pytree filtering cost more than a whole Levenberg-Marquardt solve of a small path.
"""

from __future__ import annotations

import dataclasses
import time
import types
from collections import OrderedDict
from functools import lru_cache, partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import raise_on_bad_metric, raise_on_bad_score
from ._init import straight_line
from ._residuals import local_residual
from ._status import CONVERGED_CODES, SolveReport
from ._support import profile_stats, support_profile
from .solvers._interface import PathProblem

__all__ = ["solve_banded"]

_BATCH_AXIS = "pairs"  # vmap axis name of a batched solve


def _gfm_core(path0, lam, tol, max_iters, score, metric, kind, solver, score_grad,
              batch="vmap"):  # fmt: skip
    """Batched GFM solve (traceable): ``path0`` is (B, K, d); ``batch`` is ``"vmap"`` or
    ``"map"`` (see :func:`solve`). Also returns per-waypoint validity of the initial path
    (metric Cholesky finite, score finite) for error messages."""
    k = path0.shape[1]
    single = path0.shape[0] == 1
    unbatched = single or batch == "map"  # each pair in its own loop, conds not vmapped
    dt = 1.0 / (k - 1)
    lam = lam.astype(path0.dtype)
    local = partial(
        local_residual,
        dt=dt,
        lam=lam,
        score=score,
        metric=metric,
        kind=kind,
        score_grad=score_grad,
    )
    problem = PathProblem(local, 3, "mean", score, lam, metric if kind == "metric" else None)

    def one(p):
        return solver.minimise(
            p, problem, tol=tol.astype(p.dtype), gtol=jnp.zeros((), p.dtype), max_iters=max_iters,
            batch_axis=None if unbatched else _BATCH_AXIS,
        )  # fmt: skip

    def valid(p):
        if score is None:
            return jnp.ones(p.shape[0], bool)
        return jnp.all(jnp.isfinite(jax.vmap(score)(p)), axis=-1)

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

    # The residual evaluates the score at every interior waypoint, so a bad interior waypoint
    # makes its pair stop with code 2; only then are the interior waypoints checked one by one
    # (a whole-path check costs a third of an LM iteration). The endpoints, which the residual
    # does not evaluate, are always checked. The metric is checked at every waypoint.
    def only_endpoints():
        e = jax.vmap(valid)(path0[:, jnp.array([0, k - 1])])
        return jnp.ones(path0.shape[:2], bool).at[:, 0].set(e[:, 0]).at[:, -1].set(e[:, 1])

    ok_score = jax.lax.cond(jnp.any(out[3] == 2), lambda: jax.vmap(valid)(path0), only_endpoints)
    return out, ok_score, _metric_measures(metric if kind == "metric" else None, path0)


def _metric_measures(metric, path0):
    """``max |G - G^T|``, ``max |G|`` and whether the symmetric part's Cholesky factor is finite,
    at every waypoint ``(B, K)`` of the initial path (``None``: nothing to check)."""
    if metric is None:
        return tuple(jnp.zeros(path0.shape[:2], t) for t in (path0.dtype, path0.dtype, bool))
    g = jax.vmap(jax.vmap(metric))(path0)
    gt = jnp.swapaxes(g, -1, -2)
    chol = jnp.linalg.cholesky(0.5 * (g + gt))
    return (
        jnp.max(jnp.abs(g - gt), axis=(-2, -1)),
        jnp.max(jnp.abs(g), axis=(-2, -1)),
        jnp.all(jnp.isfinite(chol), axis=(-2, -1)),
    )


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


def _compile(treedef, static, cfg):
    """The jitted solve for one static configuration ``cfg``."""
    kind, key_solver, score_grad, n_points, batched, has_init, _dtype, batch, support = cfg

    def run(x0, x1, init, dynamic, hyper, max_iters):
        it = iter(dynamic)
        score, metric = jax.tree.unflatten(
            treedef, [next(it) if s is _DYNAMIC else s for s in static]
        )
        path0 = init if has_init else straight_line(x0, x1, n_points)
        if not batched:
            path0 = path0[None]
        lam, tol, *traced, support_sigma = hyper
        fields = dict(zip(key_solver.traced, traced, strict=True))
        solver = dataclasses.replace(key_solver, **fields)
        (path, res, its, code, (bad_it, bad_wp)), ok_score, metric_measures = _gfm_core(
            path0, lam, tol, max_iters, score, metric, kind, solver, score_grad, batch
        )
        converged = jnp.any(code[:, None] == jnp.asarray(CONVERGED_CODES)[None], axis=1)
        if support:  # one batched score evaluation at the 2K - 1 waypoints and midpoints
            peak, where = profile_stats(support_profile(path, score, support_sigma))
        else:
            peak = where = jnp.zeros(path.shape[:1], path.dtype)
        stats = (res, its, code, converged, ok_score, bad_it, bad_wp, peak, where,
                 *metric_measures)  # fmt: skip
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
        entry = (_compile(treedef, static, cfg), (score, metric))
        _SOLVERS[key] = entry
        while len(_SOLVERS) > _MAX_SOLVERS:
            _SOLVERS.popitem(last=False)
    else:
        _SOLVERS.move_to_end(key)
    return entry[0], dynamic


def solve_banded(x0, x1, x0n, x1n, init, *, score, metric, kind, solver, score_grad,
                 n_points, batch, lam, tol, max_iters, support_sigma=None):  # fmt: skip
    """Run the cached jitted solve of this configuration (inputs checked by the front:
    ``x0n`` / ``x1n`` / ``init`` are NumPy, ``x0`` / ``x1`` the caller's arrays, passed through
    untouched when they are device arrays of the right dtype; ``solver`` a
    :class:`~.solvers.BandedSolver`); returns ``(path, report, support)`` with
    ``support = (max, argmax)`` of the support profile per pair at ``support_sigma`` (``None``
    when ``support_sigma`` is ``None``)."""
    dtype = x0n.dtype
    batched = x0n.ndim == 2
    if score_grad is None:
        score_grad = solver.score_grad
    # The solver without its traced fields keys the executable; those are passed as arrays.
    key_solver = _key_of(solver) if solver.traced else solver
    cfg = (kind, key_solver, bool(score_grad), n_points, batched, init is not None,
           _dtype_name(dtype), _batch_mode(batch, solver) if batched else "single",
           support_sigma is not None)  # fmt: skip
    fn, dynamic = _get_solver(score, metric, cfg)
    traced = tuple(getattr(solver, f) for f in solver.traced)
    hyper = (lam, tol, *traced, 1.0 if support_sigma is None else support_sigma)
    a0 = x0 if isinstance(x0, jax.Array) and x0.dtype == dtype else x0n
    a1 = x1 if isinstance(x1, jax.Array) and x1.dtype == dtype else x1n
    t0 = time.perf_counter()
    path, stats = fn(a0, a1, init, dynamic, np.array(hyper, dtype=dtype), np.asarray(max_iters))
    path.block_until_ready()
    (res, its, code, converged, ok_score, bad_it, bad_wp, peak, where, asym, scale,
     ok_chol) = _to_host(stats)  # fmt: skip
    wall = time.perf_counter() - t0
    if kind == "metric":
        path0 = lambda: straight_line(x0n, x1n, n_points) if init is None else init  # noqa: E731
        raise_on_bad_metric(asym, scale, ok_chol, path0, metric, batched)
    raise_on_bad_score(ok_score, batched)
    if not batched:
        res, its, code, converged, bad_it, bad_wp, peak, where = (
            a[0] for a in (res, its, code, converged, bad_it, bad_wp, peak, where))  # fmt: skip
    report = SolveReport(
        iterations=its,
        residual=res,
        converged=converged,
        code=code,
        wall_time=wall,
        method=solver.name,
        bad_iteration=bad_it,
        bad_waypoint=bad_wp,
    )
    return path, report, (None if support_sigma is None else (peak, where))


@lru_cache(maxsize=64)
def _key_solver(solver):
    """``solver`` with its traced fields set to ``None`` (cached: ``dataclasses.replace`` costs
    a tenth of a small Adam solve)."""
    return dataclasses.replace(solver, **{f: None for f in solver.traced})


def _key_of(solver):
    """:func:`_key_solver`, uncached where a traced field is unhashable (an array)."""
    try:
        return _key_solver(solver)
    except TypeError:
        return _key_solver.__wrapped__(solver)


def _batch_mode(batch: str, solver) -> str:
    """``batch`` of :func:`solve` with ``"auto"`` resolved: the solver's ``cpu_batch`` on the
    CPU (``"map"`` for the Newton-type methods lm, action, gauss_newton; ``"vmap"`` for adam, a
    fixed iteration count, where batching pays), ``"vmap"`` on accelerators. Under ``"vmap"``
    every pass costs the whole batch until its slowest pair stops, and a skip in an LM pass
    needs every running pair to skip it.
    Measured on the CPU, 16 torus pairs with a trained denoiser, map vs vmap: LM to convergence
    71 vs 291 ms, LM-flat to a loose tolerance 7.0 vs 10.8 ms, action 37 vs 35 ms; Adam, 375
    iterations, 287 vs 218 ms."""
    if batch != "auto":
        return batch
    return solver.cpu_batch if jax.default_backend() == "cpu" else "vmap"


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    """``np.dtype(dtype).name``, cached (a few microseconds per solve otherwise)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


def _to_host(arrays):
    """NumPy copies of small outputs: one batched ``jax.device_get`` on an accelerator; on the
    CPU ``np.asarray`` per array, which reads the buffer directly (a few times cheaper)."""
    if next(iter(arrays[0].devices())).platform == "cpu":
        return tuple(np.asarray(a) for a in arrays)
    return jax.device_get(arrays)
