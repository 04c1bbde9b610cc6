"""Matrix-free GFM solvers at latent scale (thousands of dimensions): inexact Newton-GMRES, then
Levenberg-Marquardt with PCG where Newton's line search fails.

The solver phases (the algorithm, memory and preconditioner): :mod:`.solvers._newton_krylov`.
This module holds the traceable core :func:`minimise_path_matrix_free`, the GFM residual and
the host-side front :func:`solve_matrix_free` (input checks, compilation, report).

**Official latent conventions.** :func:`geomopt.gfm.slerp` is the official GFM (``ELInterpolator``)
initialisation on the flattened latent; ``residual="hypersphere"`` is the official residual
(acceleration and force projected to the tangent space of the sphere through ``x_i``). The
official code's loss is the mean over all ``(K-2) d`` residual entries; the report's
``residual`` is ``sqrt(mean_i |r_i|^2)`` as for :func:`geomopt.gfm.solve`, i.e.
``sqrt(d * official_loss)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import default_tol, raise_on_bad_ends
from ._init import check_great_circle, slerp, straight_line
from ._residuals import local_residual
from ._status import CONVERGED_CODES, REASONS, MatrixFreeReport
from .solvers._interface import iterate, run
from .solvers._newton_krylov import (
    METHODS,
    PRECONDITIONERS,
    NewtonGMRES,
    PCGLevenbergMarquardt,
    second_difference,
)

__all__ = [
    "NewtonGMRES",
    "PCGLevenbergMarquardt",
    "gfm_residual",
    "minimise_path_matrix_free",
    "second_difference",
    "solve_matrix_free",
]


def minimise_path_matrix_free(
    path0,
    residual: Callable,
    *,
    tol,
    max_iters,
    cg_max_iters,
    precond: str = "fd_trace",
    tangent: bool = False,
    key=None,
    method: str = "newton",
    gmres_max_iters: int = 20,
):
    """Matrix-free solve of ``residual(path) = 0`` (``(K-2, d)``) for the interior waypoints.

    Traceable (call it inside ``jit``/``vmap``). ``path0`` is ``(K, d)`` with fixed endpoints;
    ``residual`` maps a full path to one residual row per interior waypoint whose linear part in
    the waypoints is the acceleration stencil (GFM's Euclidean / hypersphere residual).
    ``method``: ``"newton"`` (inexact Newton with GMRES, then LM from where a Newton line search
    fails) or ``"lm"`` (LM with PCG only). Returns ``(path, rms_residual, iterations, code,
    krylov_steps)``: iterations of both phases; Krylov steps = GMRES steps (one JVP each) + CG
    steps (one JVP and one VJP each); ``code`` as in :data:`geomopt.gfm.REASONS` (0 converged,
    1 max_iters, 2 non-finite initial residual, 3 stalled, 4 no decreasing step).
    """
    if precond not in PRECONDITIONERS:
        raise ValueError(f"precond {precond!r}: expected one of {PRECONDITIONERS}")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    common = dict(tol=tol, max_iters=max_iters, precond=precond, tangent=tangent, key=key)
    start = {}
    if method == "newton":
        newton = NewtonGMRES(residual, gmres_max_iters=gmres_max_iters, **common)
        state = run(newton, path0)
        # LM continues from the Newton phase's end, with its residual there (no second evaluation)
        start = dict(r0=state[3], it0=state[4], krylov0=state[5])
        path0 = newton.postprocess(state)[0]
    lm = PCGLevenbergMarquardt(residual, cg_max_iters=cg_max_iters, **start, **common)
    path, res, it, code, _, krylov = iterate(lm, path0)
    return path, res, it, code, krylov


def gfm_residual(path, *, lam, score, kind: str):
    """GFM residuals at the interior waypoints of ``path`` (``kind``: ``"euclidean"`` or
    ``"hypersphere"``), from :func:`geomopt.gfm.local_residual`."""
    dt = 1.0 / (path.shape[0] - 1)
    loc = partial(local_residual, dt=dt, lam=lam, score=score, metric=None, kind=kind)
    return jax.vmap(loc)(path[:-2], path[1:-1], path[2:])


@eqx.filter_jit
def _solve_jit(x0, x1, init, score, hyper, max_iters, cg_max_iters, cfg):
    kind, precond, n_points, init_kind, method, gmres_max_iters = cfg
    lam, tol = hyper[0], hyper[1]
    if init_kind == "slerp":  # the endpoints were checked on the host (check_great_circle)
        path0 = slerp(x0, x1, n_points)
    elif init_kind == "linear":
        path0 = straight_line(x0, x1, n_points)
    else:
        path0 = init
    res = partial(gfm_residual, lam=lam, score=score, kind=kind)

    def one(p):
        return minimise_path_matrix_free(
            p,
            res,
            tol=tol,
            max_iters=max_iters,
            cg_max_iters=cg_max_iters,
            precond=precond,
            tangent=kind == "hypersphere",
            method=method,
            gmres_max_iters=gmres_max_iters,
        )

    ends_ok = jnp.ones((x0.shape[0], 2), bool)
    if score is not None:  # the residual never evaluates the score at the endpoints
        ends_ok = jnp.stack([jnp.all(jnp.isfinite(jax.vmap(score)(x)), -1) for x in (x0, x1)], 1)
    return jax.vmap(one)(path0), ends_ok


def _check(name, x, dtype=None):
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} has dtype {arr.dtype}; expected a floating-point array")
    if dtype is not None and arr.dtype != dtype:
        raise TypeError(f"{name} has dtype {arr.dtype}, expected {dtype} (the dtype of x0)")
    if not np.isfinite(arr).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise ValueError(f"{name} has a non-finite entry {arr[bad]} at index {bad}")
    return arr


def _check_inputs(
    x0,
    x1,
    score,
    lam,
    n_points,
    residual,
    init,
    tol,
    max_iters,
    cg_max_iters,
    precond,
    method,
    gmres_max_iters,
):
    """The host-side checks of :func:`solve_matrix_free`'s arguments, in order; returns the
    endpoints as batches ``(B, d)``, the initial path (``None`` unless an array), the init kind,
    ``lam``, ``tol`` (defaulted) and whether the input was batched."""
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 3:
        raise ValueError(f"n_points={n_points!r}: expected an int >= 3")
    a0 = _check("x0", x0)
    a1 = _check("x1", x1, a0.dtype)
    if a0.shape != a1.shape:
        raise ValueError(f"endpoints have shapes {a0.shape} and {a1.shape}; expected equal shapes")
    if a0.ndim not in (1, 2) or a0.shape[-1] < 1:
        raise ValueError(f"endpoints of shape {a0.shape}: expected (d,) or (batch, d)")
    if residual not in ("hypersphere", "euclidean"):
        raise ValueError(f"residual {residual!r}: expected 'hypersphere' or 'euclidean'")
    if residual == "hypersphere":
        for name, a in (("x0", a0), ("x1", a1)):
            if (np.linalg.norm(a, axis=-1) == 0).any():
                raise ValueError(f"{name} is zero; the hypersphere residual needs |x| > 0")
    if precond not in PRECONDITIONERS:
        raise ValueError(f"precond {precond!r}: expected one of {PRECONDITIONERS}")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    if score is not None and not callable(score):
        raise TypeError(f"score must be a callable x -> s(x), got {type(score).__name__}")
    ints = (("max_iters", max_iters), ("cg_max_iters", cg_max_iters))
    for name, v in ints + (("gmres_max_iters", gmres_max_iters),):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r}: expected an int >= 1")
    lam_f = float(lam)
    if not (np.isfinite(lam_f) and lam_f >= 0):
        raise ValueError(f"lam={lam!r}: expected a finite number >= 0")
    batched = a0.ndim == 2
    b0 = a0 if batched else a0[None]
    b1 = a1 if batched else a1[None]
    if isinstance(init, str):
        if init not in ("slerp", "linear"):
            raise ValueError(f"init {init!r}: expected 'slerp', 'linear' or an array path")
        init_kind, init_arr = init, None
        scale = float(max(np.abs(b0).max(), np.abs(b1).max()))
    else:
        init_kind = "array"
        init_arr = _check("init", init, a0.dtype)
        want = (n_points, a0.shape[-1]) if not batched else (a0.shape[0], n_points, a0.shape[-1])
        if init_arr.shape != want:
            raise ValueError(f"init has shape {init_arr.shape}, expected {want}")
        init_arr = init_arr if batched else init_arr[None]
        gap = np.abs(init_arr[:, 0] - b0).max() + np.abs(init_arr[:, -1] - b1).max()
        scale = float(np.abs(init_arr).max())
        if gap > 1e-6 * (1.0 + scale):
            raise ValueError(f"init's endpoints differ from x0/x1 by {gap:.3g}")
    dtype = a0.dtype
    tol = default_tol(n_points, dtype, scale) if tol is None else float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol={tol!r}: expected a finite number > 0")
    if init_kind == "slerp":
        check_great_circle(a0, a1)
    return b0, b1, init_arr, init_kind, lam_f, tol, batched


def _report(out, wall, batched):
    """The checks on the solve's output, then the path and :class:`MatrixFreeReport`."""
    (path, res, its, code, cg), ends_ok = out
    res, its, code, cg = (np.asarray(a) for a in (res, its, code, cg))
    converged = np.isin(code, CONVERGED_CODES)
    raise_on_bad_ends(np.asarray(ends_ok), batched)
    if (code == 2).any():
        pair = int(np.nonzero(code == 2)[0][0])
        where = f"pair {pair}" if batched else "the initial path"
        raise ValueError(f"non-finite residual at {where} ({REASONS[2]})")
    report = MatrixFreeReport(
        iterations=its,
        residual=res,
        converged=converged,
        code=code,
        wall_time=wall,
        method="matrix_free",
        cg_iterations=cg,
    )
    if batched:
        return path, report
    return path[0], report[0]


def solve_matrix_free(
    x0,
    x1,
    *,
    score: Callable | None,
    lam=1.0,
    n_points: int = 10,
    residual: str = "hypersphere",
    init="slerp",
    tol=None,
    max_iters: int = 50,
    cg_max_iters: int = 50,
    precond: str = "fd_trace",
    method: str = "newton",
    gmres_max_iters: int = 20,
):
    """Matrix-free GFM solve between ``x0`` and ``x1``; returns ``(path, MatrixFreeReport)``.

    Args:
        x0, x1: endpoints ``(d,)`` or a batch ``(B, d)`` (flatten latents first, as
            :mod:`geomopt.latent` does for latents of any shape). Floating point, finite, one
            dtype.
        score: ``s(x) = grad log p(x)`` for one point ``(d,) -> (d,)`` (e.g.
            ``ScoreAt(denoiser, sigma)``; an Equinox module's arrays are traced, so new weights
            or sigma do not recompile); ``None``: no potential.
        lam: weight of the force (``>= 0``; traced).
        n_points: waypoints including both endpoints (``>= 3``; the official latent runs use 10).
        residual: ``"hypersphere"`` (official latent residual, tangent projections) or
            ``"euclidean"`` (``a_i + lam s(x_i)``).
        init: ``"slerp"`` (official), ``"linear"``, or a path ``(n_points, d)`` /
            ``(B, n_points, d)`` with the given endpoints.
        tol: stop when ``sqrt(mean_i |r_i|^2) <= tol``; default
            :func:`geomopt.gfm.default_tol` (near float rounding).
        max_iters: Newton + Levenberg-Marquardt iterations (each: one linearisation, one
            Krylov solve).
        cg_max_iters: cap on the CG steps per LM iteration.
        precond: ``"fd_trace"`` (finite-difference part plus a per-waypoint trace estimate of
            the score Jacobian), ``"fd"`` (finite-difference part only) or ``"none"``.
        method: ``"newton"`` (inexact Newton-GMRES, LM from where its line search fails; the
            fastest) or ``"lm"`` (LM with PCG only).
        gmres_max_iters: cap on the GMRES steps per Newton iteration (static; its Krylov basis
            of ``gmres_max_iters + 1`` arrays ``(n_points - 2, d)`` is kept in memory).

    Returns:
        ``path`` ``(n_points, d)`` / ``(B, n_points, d)`` and a :class:`MatrixFreeReport`
        (``method="matrix_free"``); unconverged solves return the best finite path.

    Raises:
        ValueError / TypeError: naming the bad argument (shape, dtype, non-finite entries,
            a score that is not finite at an endpoint, antipodal or zero endpoints for
            ``init="slerp"``).
    """
    b0, b1, init_arr, init_kind, lam_f, tol, batched = _check_inputs(
        x0, x1, score, lam, n_points, residual, init, tol, max_iters, cg_max_iters, precond,
        method, gmres_max_iters,
    )  # fmt: skip
    hyper = np.array([lam_f, tol], dtype=b0.dtype)
    cfg = (residual, precond, int(n_points), init_kind, method, int(gmres_max_iters))
    t0 = time.perf_counter()
    out = _solve_jit(
        jnp.asarray(b0),
        jnp.asarray(b1),
        init_arr,
        score,
        hyper,
        np.asarray(max_iters),
        np.asarray(cg_max_iters),
        cfg,
    )
    out = jax.block_until_ready(out)
    return _report(out, time.perf_counter() - t0, batched)
