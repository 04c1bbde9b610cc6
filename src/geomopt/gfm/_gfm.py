"""``geomopt.gfm.solve``: geodesic force matching between endpoint pairs (the front).

Finds the interior waypoints of a path from ``x0`` to ``x1`` where the discretised
Euler-Lagrange force balance of ``int 1/2 xdot^T G(x) xdot + lam U(x) dt`` holds (see
:mod:`._residuals`). The front checks the inputs on the host (:mod:`._checks`), resolves the
method and backend (:func:`resolve_method`) and dispatches: the banded methods (``"action"``:
:mod:`._action` then :mod:`._lm`; ``"lm"``; the official ``"adam"``) run in one cached jitted
executable for single pairs and batches (:mod:`._compiled`), the matrix-free Newton-GMRES in
:func:`geomopt.gfm.solve_matrix_free`. ``lam``, ``tol``, ``max_iters``, ``lr`` and ``clip`` are
passed as arrays, so changing them does not recompile.

The default ``method="auto"`` is the most robust method measured: the action descent handing
over to LM for the Euclidean and metric residuals (it reaches minima of the action where LM
also accepts saddles, e.g. paths through the torus's hole; ``benchmarks/results/gfm.md``), LM
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
    check_lm_options,
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

__all__ = ["solve", "resolve_method", "DEFAULT_MAX_ITERS", "MATRIX_FREE_MIN_D"]

MATRIX_FREE_MIN_D = 256  # method / backend "auto" use the matrix-free backend from this d on
BATCH_MODES = ("auto", "vmap", "map")
BACKENDS = ("auto", "banded", "matrix_free")
DEFAULT_MAX_ITERS = {
    "lm": 200,
    # action: 800, of which at most half descends. At 200 the descent handed over to LM at
    # iteration 100 on 4 of 240 sigma-sweep solves at sigma 0.01 and LM stalled there (code 3, a
    # local minimum of |r|^2); at 400 three of the four converge, at 800 all four. A solve that
    # converges stops where it converges, so the larger cap costs only the hard pairs.
    "action": 800,
    "gauss_newton": 100,
    "adam": 1501,
    "matrix_free": 200,
}
GFM_METHODS = ("auto", "lm", "action", "gauss_newton", "adam")
INITS = ("chord", "slerp", "sequential")


def resolve_method(method: str, kind: str, d: int, backend: str = "auto") -> str:
    """The method :func:`solve` runs for ``method`` on a residual of ``kind`` in ``d``
    dimensions: ``"matrix_free"`` (the matrix-free backend) or a banded method (module doc)."""
    if method not in GFM_METHODS:
        raise ValueError(f"method {method!r}: expected one of {GFM_METHODS}")
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: expected 'auto', 'banded' or 'matrix_free'")
    if method == "action" and kind == "hypersphere":
        raise ValueError(
            "method='action' with residual 'hypersphere': the projected residual is not the "
            "gradient of an action; use method='lm' or residual 'euclidean' / 'metric'"
        )
    free_ok = kind in ("euclidean", "hypersphere") and method in ("auto", "lm", "gauss_newton")
    if backend == "matrix_free" and not free_ok:
        raise ValueError(
            f"backend='matrix_free' with residual {kind!r} and method {method!r}: expected the "
            "'euclidean' or 'hypersphere' residual and method 'auto', 'lm' or 'gauss_newton'"
        )
    if backend == "matrix_free" or (backend == "auto" and free_ok and d >= MATRIX_FREE_MIN_D):
        return "matrix_free"
    if method == "auto":
        return "lm" if kind == "hypersphere" else "action"
    return method


def solve(
    x0,
    x1,
    *,
    score: Callable | None = None,
    metric: Callable | None = None,
    lam=1.0,
    n_points: int = 32,
    method: str = "auto",
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
    support_sigma=None,
    support_threshold=None,
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
        method: ``"auto"`` (the default: the most robust method for the problem, see below),
            ``"lm"`` (Levenberg-Marquardt, banded), ``"action"`` (Euclidean or metric residual:
            trust-region Newton descent of the path action, then LM to polish; it reaches
            minima of the action, where LM also accepts saddles such as paths through a torus's
            hole, see :mod:`geomopt.gfm._action`), ``"gauss_newton"`` (Newton on the square
            system, block-tridiagonal Jacobian, line search) or ``"adam"`` (official
            settings). ``"auto"`` is ``"action"`` for the Euclidean and metric residuals on the
            banded backend, ``"lm"`` for the hypersphere residual (its projected force is not the
            gradient of an action), and the matrix-free backend's Newton-GMRES (``report.method ==
            "matrix_free"``) where ``backend="auto"`` picks that backend. ``report.method`` names
            the method that ran.
        tol: stop when ``sqrt(mean_i r_i^T G r_i) <= tol``; default :func:`default_tol`.
        max_iters: iteration cap; default :data:`DEFAULT_MAX_ITERS` of the method that runs:
            800 (action, at most half for the descent), 200 (lm, matrix-free), 100
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
        score_grad: differentiate through the score. Default True for lm / action /
            gauss_newton (exact Jacobian, quadratic convergence) and False for adam (the official
            code's constant force). The residual, and therefore the solution, is the same.
        lr, clip, eps: Adam's learning rate, global-norm gradient clip and epsilon. The official
            settings differ per problem (torus metric runs A/B/C: lr 1e-3 / 5e-3 / 5e-4, clip
            10, eps 1e-8 (PyTorch's default), 1501 iterations; 3-D shape latents: lr 0.01, no
            clip, eps 1e-5, 500 iterations); pass them. Arrays: changing them does not recompile.
        lm_options: Levenberg-Marquardt options (static: a new value compiles once):
            ``geodesic`` (geodesic acceleration, default True), ``accel_ratio`` (0.75: largest
            accepted ``2|a|/|v|``), ``slow_factor`` (10: the "too slow" stop, code 7),
            ``damping`` (1e-3: initial damping relative to ``max diag(J^T J)``).
        backend: ``"banded"`` (the solvers above), ``"matrix_free"`` (inexact Newton-GMRES
            with an LM-PCG fallback on JVPs/VJPs, memory O(K d),
            :func:`geomopt.gfm.solve_matrix_free`; Euclidean / hypersphere residual, method
            ``"auto"`` / ``"lm"`` / ``"gauss_newton"``; ``score_grad``, ``lr``, ``clip``, ``eps``,
            ``lm_options`` do not apply) or ``"auto"``: matrix-free for those residuals and methods
            when ``d >= MATRIX_FREE_MIN_D`` (256), banded otherwise. The threshold is from the cost
            per LM iteration (the banded LM pushes ``d`` tangents through the score and factors
            ``d x d`` blocks; the matrix-free one takes ~2 JVP/VJPs per CG step, 5-30 CG steps
            measured), not a measured crossover.
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
        support_sigma: the noise level of ``score`` for the support check (did the path stay
            on the data? :mod:`geomopt.gfm._support`): the solved path's ``sigma |s(x)|``
            (Tweedie's ``|D(x, sigma) - x|`` in units of sigma) at every waypoint and segment
            midpoint, one batched score evaluation after the solve, ``sigma`` traced (a new
            value does not recompile). Default: ``score.sigma`` where the score has a scalar
            one (:class:`geomopt.gfm.ScoreAt`); a plain function needs it passed, else the
            report's ``on_support`` is ``None`` and its ``support`` ``"unknown"``.
        support_threshold: the largest ``sigma |s(x)|`` that counts as on the support;
            default :data:`geomopt.gfm.DEFAULT_SUPPORT_THRESHOLD` (chosen by measurement on
            curves and surfaces; in high-dimensional latent spaces pass one measured there).

    Returns:
        ``path`` of shape ``(n_points, d)`` (or ``(B, n_points, d)``) with the endpoints, and a
        :class:`SolveReport` (recording the ``tol``, ``lam`` and ``n_points`` it used). A solve
        that does not reach ``tol`` returns the best finite path with ``converged=False`` and
        the reason; the path is never NaN. ``converged`` says the equations are solved, not
        that the path stayed on the data: ``report.on_support`` (and ``report.reason``, which
        reads "...; but OFF THE DATA SUPPORT: ..." for a converged path that left it) says
        that.

    Raises:
        ValueError: bad shapes, non-finite endpoints, ``n_points < 3``, bad ``lam``/``tol``, an
            unknown method, a metric that is not symmetric positive-definite at some waypoint
            of the initial path, a score that is not finite at an endpoint or on the initial
            path (the message names the pair and waypoint or endpoint), or ``init="slerp"``
            between antipodal or zero endpoints.
    """
    x0n, x1n = check_endpoints_host(x0, x1, n_points)
    check_callables(score, metric)
    check_output_shapes(score, metric, x0n.shape[-1], x0n.dtype)
    kind = resolve_kind(residual, metric)
    method = resolve_method(method, kind, x0n.shape[-1], backend)
    if batch not in BATCH_MODES:
        raise ValueError(f"batch {batch!r}: expected one of {BATCH_MODES}")
    lam = positive("lam", lam, allow_zero=True)
    max_iters = DEFAULT_MAX_ITERS[method] if max_iters is None else max_iters
    if isinstance(init, str):
        init = _named_init(init, x0n, x1n, n_points, score, lam, lr, max_iters)
    init, scale = check_init(init, x0n, x1n, n_points)
    check_metric_domain(metric, x0n, x1n, init)
    tol = positive("tol", default_tol(n_points, x0n.dtype, scale) if tol is None else tol)
    max_iters = check_count("max_iters", max_iters)
    hyper = (lam, tol, positive("lr", lr), positive("clip", clip, allow_inf=True),
             positive("eps", eps))  # fmt: skip
    lm_opts = check_lm_options(lm_options)
    sigma, note = resolve_support_sigma(score, support_sigma)
    threshold = float(positive("support_threshold", DEFAULT_SUPPORT_THRESHOLD
                               if support_threshold is None else support_threshold))  # fmt: skip
    if method == "matrix_free":
        path, report = solve_matrix_free(
            x0n, x1n, score=score, lam=float(lam), n_points=n_points, residual=kind,
            init="linear" if init is None else init, tol=float(tol), max_iters=max_iters,
        )  # fmt: skip
        support = check_paths(path, score, sigma, threshold, note)
    else:
        path, report, peaks = solve_banded(
            x0, x1, x0n, x1n, init, score=score, metric=metric, kind=kind, method=method,
            score_grad=score_grad, n_points=n_points, lm_opts=lm_opts, batch=batch,
            hyper=hyper, max_iters=max_iters, support_sigma=sigma,
        )  # fmt: skip
        support = support_fields(*(peaks or (None, None)), sigma, threshold, note)
    used = dict(tol=float(tol), lam=float(lam), n_points=int(n_points), **support)
    return path, dataclasses.replace(report, **used)


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
