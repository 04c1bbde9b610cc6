"""``geomopt.gfm.solve``: geodesic force matching between endpoint pairs (the front).

Finds the interior waypoints of a path from ``x0`` to ``x1`` where the discretised
Euler-Lagrange force balance of ``int 1/2 xdot^T G(x) xdot + lam U(x) dt`` holds (see
:mod:`._residuals`). The front checks the inputs on the host (:mod:`._checks`), turns the
solver (an object of :mod:`.solvers`, or the keyword spelling ``method`` / ``backend`` /
``lr`` / ``clip`` / ``eps`` / ``lm_options``) into the one that runs (:func:`.solvers.resolve`)
and dispatches once: the banded solvers run in one cached jitted executable for single pairs and
batches (:mod:`._compiled`), :class:`~.solvers.MatrixFree` in
:func:`geomopt.gfm.solve_matrix_free`. ``lam``, ``tol``, ``max_iters``, ``lr`` and ``clip`` are
passed as arrays, so changing them does not recompile.

The default (:class:`~.solvers.Auto`) is the most robust solver measured: the action descent
handing over to LM for the Euclidean and metric residuals (it reaches minima of the action where
LM also accepts saddles, e.g. paths through the torus's hole; ``benchmarks/results/gfm.md``), LM
for the hypersphere residual, and the matrix-free backend from ``d >= MATRIX_FREE_MIN_D``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ._checks import (
    check_callables,
    check_count,
    check_endpoints_host,
    check_init,
    check_metric_domain,
    check_output_shapes,
    default_tol,
    positive,
    resolve_kind,
)
from ._compiled import solve_banded
from ._init import sequential_init, slerp
from ._matrix_free import solve_matrix_free
from ._support import (
    DEFAULT_SUPPORT_THRESHOLD,
    check_paths,
    resolve_support_sigma,
    support_fields,
)
from .solvers import (
    LM,
    MATRIX_FREE_MIN_D,
    Action,
    Adam,
    GaussNewton,
    MatrixFree,
    as_solver,
    resolve,
)

__all__ = ["solve", "resolve_method", "DEFAULT_MAX_ITERS", "MATRIX_FREE_MIN_D"]

BATCH_MODES = ("auto", "vmap", "map")
DEFAULT_MAX_ITERS = {c.name: c.max_iters for c in (LM, Action, GaussNewton, Adam, MatrixFree)}
INITS = ("chord", "slerp", "sequential")


def resolve_method(method: str, kind: str, d: int, backend: str = "auto") -> str:
    """The name of the solver :func:`solve` runs for ``method`` / ``backend`` on a residual of
    ``kind`` in ``d`` dimensions (``"matrix_free"`` or a banded method)."""
    return resolve(as_solver(method, backend=backend), kind, d).name


def solve(x0, x1, *, score: Callable | None = None, metric: Callable | None = None, lam=1.0,
          n_points: int = 32, method: str = "auto", tol=None, max_iters: int | None = None,
          init=None, residual: str = "auto", score_grad: bool | None = None, solver=None,
          lr=0.05, clip=10.0, eps=1e-8, lm_options: dict | None = None, backend: str = "auto",
          batch: str = "auto", support_sigma=None, support_threshold=None):  # fmt: skip
    """Solve the GFM collocation problem between ``x0`` and ``x1``; return ``(path, report)``.

    Args:
        x0, x1: endpoints ``(d,)``, or ``(B, d)``: ``B`` pairs solved by one jitted call.
        score: ``s(x) = grad log p(x)`` for one point ``(d,) -> (d,)`` (the force is
            ``lam s``); ``None``: no potential. A function or an Equinox module (its array
            leaves are traced: new weights or ``sigma`` do not recompile).
        metric: prior metric ``x -> G(x)`` (SPD, ``d x d``); ``None`` is Euclidean.
        lam: weight of the potential (``>= 0``; traced, like ``tol`` and ``max_iters``).
        n_points: waypoints including both endpoints (``>= 3``).
        solver: the solver with its options: :class:`LM`, :class:`Action`,
            :class:`GaussNewton`, :class:`Adam`, :class:`MatrixFree` or, by default,
            :class:`Auto` (of :mod:`geomopt.gfm`; Auto: action descent then LM for the Euclidean
            and metric residuals, LM for the hypersphere one, matrix-free from ``d >= 256``;
            the report's ``method`` names the one that ran).
        method, lr, clip, eps, lm_options, backend: the keyword spelling of ``solver``
            (:func:`~geomopt.gfm.as_solver`), used when ``solver`` is not given: ``method``
            ``"auto"`` / ``"lm"`` / ``"action"`` / ``"gauss_newton"`` / ``"adam"``, Adam's
            ``lr`` / ``clip`` / ``eps``, LM's options as a dict, ``backend`` ``"auto"`` /
            ``"banded"`` / ``"matrix_free"``.
        tol: stop when ``sqrt(mean_i r_i^T G r_i) <= tol``; default :func:`default_tol`.
        max_iters: iteration cap; default the solver's ``max_iters``.
        init: initial path ``(n_points, d)`` / ``(B, n_points, d)`` with the given endpoints,
            or ``"chord"`` (the default), ``"slerp"`` (:func:`geomopt.gfm.slerp`) or
            ``"sequential"`` (:func:`geomopt.gfm.sequential_init` with this ``score``, ``lam``,
            ``lr`` and a tenth of ``max_iters`` per waypoint).
        residual: ``"auto"`` (Euclidean for ``metric=None`` / :class:`Euclidean`, the metric
            residual otherwise), ``"euclidean"``, ``"hypersphere"`` or ``"metric"``.
        score_grad: differentiate through the score (default: yes, but not for Adam).
        batch: ``"vmap"`` (pairs advance together), ``"map"`` (one pair after another, each
            stopping at its own iteration; the same numbers) or ``"auto"`` (the measured
            choice of :mod:`geomopt.gfm._compiled`).
        support_sigma, support_threshold: the support check after the solve
            (:mod:`geomopt.gfm._support`: ``sigma |s(x)|`` at every waypoint and segment
            midpoint). ``support_sigma`` defaults to ``score.sigma`` where the score has a
            scalar one (:class:`geomopt.gfm.ScoreAt`), else the report's ``support`` is
            ``"unknown"``; the threshold to :data:`geomopt.gfm.DEFAULT_SUPPORT_THRESHOLD`.

    Returns:
        ``path`` ``(n_points, d)`` / ``(B, n_points, d)`` with the endpoints, and a
        :class:`SolveReport` (with the ``tol``, ``lam`` and ``n_points`` used). A solve that does
        not reach ``tol`` returns the best finite path, ``converged=False`` and the reason.
        ``converged`` says the equations are solved; ``report.on_support`` says whether the path
        stayed on the data (``report.reason`` reads "...; but OFF THE DATA SUPPORT: ...").

    Raises:
        ValueError: one line naming the bad value (shape, dtype, non-finite entry, option, a
            solver that does not apply, a metric not SPD or a score not finite on the start).
    """
    x0n, x1n = check_endpoints_host(x0, x1, n_points)
    check_callables(score, metric)
    check_output_shapes(score, metric, x0n.shape[-1], x0n.dtype)
    kind = resolve_kind(residual, metric)
    if solver is None:
        solver = as_solver(method, backend=backend, lr=lr, clip=clip, eps=eps,
                           lm_options=lm_options)  # fmt: skip
    solver = resolve(solver, kind, x0n.shape[-1])
    if batch not in BATCH_MODES:
        raise ValueError(f"batch {batch!r}: expected one of {BATCH_MODES}")
    lam = positive("lam", lam, allow_zero=True)
    max_iters = solver.max_iters if max_iters is None else max_iters
    adam = solver if isinstance(solver, Adam) else Adam(lr=lr, clip=clip, eps=eps)
    if isinstance(init, str):
        init = _named_init(init, x0n, x1n, n_points, score, lam, adam.lr, max_iters)
    init, scale = check_init(init, x0n, x1n, n_points)
    check_metric_domain(metric, x0n, x1n, init)
    tol = positive("tol", default_tol(n_points, x0n.dtype, scale) if tol is None else tol)
    max_iters = check_count("max_iters", max_iters)
    path, report, support = _dispatch(
        solver, adam, x0, x1, x0n, x1n, init, score=score, metric=metric, kind=kind, lam=lam,
        tol=tol, max_iters=max_iters, n_points=n_points, score_grad=score_grad, batch=batch,
        support=(support_sigma, support_threshold),
    )  # fmt: skip
    used = dict(tol=float(tol), lam=float(lam), n_points=int(n_points), **support)
    return path, dataclasses.replace(report, **used)


def _dispatch(solver, adam, x0, x1, x0n, x1n, init, *, score, metric, kind, lam, tol, max_iters,
              n_points, score_grad, batch, support):  # fmt: skip
    """Run the resolved ``solver`` (inputs checked by :func:`solve`); returns ``(path, report,
    support fields)``."""
    sigma, note = resolve_support_sigma(score, support[0])
    threshold = float(positive("support_threshold", DEFAULT_SUPPORT_THRESHOLD
                               if support[1] is None else support[1]))  # fmt: skip
    if isinstance(solver, MatrixFree):
        path, report = solve_matrix_free(
            x0n, x1n, score=score, lam=float(lam), n_points=n_points, residual=kind,
            init="linear" if init is None else init, tol=float(tol), max_iters=max_iters,
            **dataclasses.asdict(solver),
        )  # fmt: skip
        fields = check_paths(path, score, sigma, threshold, note)
    else:
        # Adam's options are checked even when another solver runs (the keyword spelling)
        positive("lr", adam.lr), positive("clip", adam.clip, allow_inf=True)
        positive("eps", adam.eps)
        path, report, peaks = solve_banded(
            x0, x1, x0n, x1n, init, score=score, metric=metric, kind=kind, solver=solver,
            score_grad=score_grad, n_points=n_points, batch=batch, lam=lam, tol=tol,
            max_iters=max_iters, support_sigma=sigma,
        )  # fmt: skip
        fields = support_fields(*(peaks or (None, None)), sigma, threshold, note)
    return path, report, fields


def _named_init(name, x0, x1, n_points, score, lam, lr, max_iters):
    """The initial path named ``name`` (None for the chord, which the jitted solve builds)."""
    if name == "chord":
        return None
    if name == "slerp":
        return np.asarray(slerp(x0, x1, n_points))
    if name == "sequential":
        if score is None:
            raise ValueError("init='sequential' needs a score (it balances the force)")
        iters = max(1, int(check_count("max_iters", max_iters)) // 10)
        path = sequential_init(
            x0, x1, n_points, score, lam=float(lam), lr=float(positive("lr", lr)), iters=iters
        )
        return np.asarray(path)
    raise ValueError(f"init {name!r}: expected an array or one of {INITS}")
