"""The traceable front of the banded path solvers on any windowed residual:
:func:`minimise_path` runs a :class:`~._interface.BandedSolver` (given as ``solver``, or by its
name ``method`` with Adam's ``lr`` / ``clip`` / ``eps`` and LM's ``lm_options``) on
``sum_rows |local(window)|^2``. The baselines' path energies call it; :func:`geomopt.gfm.solve`
calls the solver's ``minimise`` directly (:mod:`geomopt.gfm._compiled`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ._adam import Adam
from ._gauss_newton import GaussNewton
from ._interface import BandedSolver, PathProblem
from ._levenberg_marquardt import LM

__all__ = ["METHODS", "Method", "minimise_path"]

Method = Literal["lm", "gauss_newton", "adam"]
METHODS: tuple[str, ...] = ("lm", "gauss_newton", "adam")


def minimise_path(
    path0,
    local: Callable,
    *,
    window: int,
    method: str = "lm",
    tol,
    gtol,
    max_iters,
    lr=0.05,
    clip=10.0,
    eps=1e-8,
    reduce: Literal["mean", "sum"] = "mean",
    diagnostics: bool = False,
    lm_options: dict | None = None,
    branches: bool = True,
    batch_axis: str | None = None,
    solver: BandedSolver | None = None,
):
    """Minimise ``sum_rows |local(window of waypoints)|^2`` over the interior of ``path0``.

    Traceable (call it inside ``jit``/``vmap``). ``local`` maps ``window`` consecutive waypoints
    to one residual row; rows run over all windows of the path. Returns
    ``(path, rms_residual, iterations, code)``, and with ``diagnostics=True`` also
    ``(bad_iteration, bad_waypoint)`` (where a diverged solve met a non-finite value; -1 when
    none). ``reduce`` only affects Adam's loss scale (``"mean"`` as in the official GFM loss,
    ``"sum"`` for path energies); ``lr`` / ``clip`` / ``eps`` are Adam's (PyTorch's default eps
    1e-8; the official 3-D shape runs use 1e-5). ``lm_options`` passes ``geodesic`` (default
    True), ``accel_ratio`` (0.75), ``slow_factor`` (10) and ``damping`` (1e-3: the initial
    damping relative to ``max diag(J^T J)``) to Levenberg-Marquardt. LM skips the parts of a
    pass it does not need with ``lax.cond`` (``branches=True``), which pays only where the
    predicates are not batched: for a single path (not under ``vmap``), or for a batch vmapped
    with ``axis_name=batch_axis``, where a part is skipped when no active pair of the batch
    needs it. ``branches=False`` (for a batch vmapped without an axis name, where every cond
    runs both branches) computes every part of a pass in one fused evaluation instead.
    ``solver`` (e.g. ``gfm.LM(geodesic=False)``) replaces ``method`` and its options.
    """
    if solver is None:
        if method not in METHODS:
            raise ValueError(f"method {method!r}: expected one of {METHODS}")
        named = {"lm": lambda: LM(**(lm_options or {})), "gauss_newton": GaussNewton,
                 "adam": lambda: Adam(lr=lr, clip=clip, eps=eps)}  # fmt: skip
        solver = named[method]()
    out = solver.minimise(
        path0, PathProblem(local, window, reduce), tol=tol, gtol=gtol, max_iters=max_iters,
        branches=branches, batch_axis=batch_axis,
    )  # fmt: skip
    return out if diagnostics else out[:4]
