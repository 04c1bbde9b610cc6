"""The solvers of :func:`geomopt.gfm.solve` as objects that carry their options.

``gfm.solve(x0, x1, score=..., solver=gfm.LM(geodesic=False))`` runs Levenberg-Marquardt with
those options; ``solver=gfm.Adam(lr=1e-3)`` the official optimiser; ``solver=gfm.MatrixFree()``
the matrix-free Newton-GMRES. The default :class:`Auto` picks by residual and dimension
(:func:`resolve`). The older keywords of :func:`geomopt.gfm.solve` (``method``, ``backend``,
``lr``, ``clip``, ``eps``, ``lm_options``) are turned into one of these objects by
:func:`as_solver`, so the front resolves and dispatches in one place.

The algorithms themselves are one module each: :mod:`._lm`, :mod:`._action` (descent, then LM),
:mod:`._gauss_newton`, :mod:`._adam` (banded, jitted by :mod:`._compiled`) and
:mod:`._matrix_free` (Newton-GMRES / LM-PCG on JVPs).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ._checks import LM_OPTIONS, check_lm_options

__all__ = [
    "LM",
    "Action",
    "GaussNewton",
    "Adam",
    "MatrixFree",
    "Auto",
    "Solver",
    "as_solver",
    "resolve",
    "MATRIX_FREE_MIN_D",
]

MATRIX_FREE_MIN_D = 256  # Auto uses the matrix-free backend from this d on
GFM_METHODS = ("auto", "lm", "action", "gauss_newton", "adam")
BACKENDS = ("auto", "banded", "matrix_free")
_FREE_KINDS = ("euclidean", "hypersphere")


@dataclasses.dataclass(frozen=True)
class LM:
    """Levenberg-Marquardt on the banded Jacobian (:mod:`geomopt.gfm._lm`): ``geodesic``
    acceleration, the largest accepted ``2|a|/|v|`` (``accel_ratio``), the "too slow" stop
    (``slow_factor``, code 7) and the initial ``damping`` relative to ``max diag(J^T J)``."""

    geodesic: bool = True
    accel_ratio: float = 0.75
    slow_factor: float = 10.0
    damping: float = 1e-3
    name: ClassVar[str] = "lm"
    max_iters: ClassVar[int] = 200

    def lm_options(self) -> tuple:
        return tuple(sorted((k, getattr(self, k)) for k in LM_OPTIONS))


@dataclasses.dataclass(frozen=True)
class Action(LM):
    """Trust-region Newton descent of the path action (Euclidean or metric residual; at most
    half of ``max_iters``), handing over to :class:`LM` with these options to polish
    (:mod:`geomopt.gfm._action`). It reaches minima of the action, where LM alone also accepts
    saddles (paths through a torus's hole). Near a solution LM starts almost undamped:
    ``damping`` 1e-9 (one polishing iteration instead of ~7 on the torus pairs)."""

    damping: float = 1e-9
    name: ClassVar[str] = "action"
    # 800, of which at most half descends. At 200 the descent handed over to LM at iteration
    # 100 on 4 of 240 sigma-sweep solves at sigma 0.01 and LM stalled there (code 3); at 400
    # three of the four converge, at 800 all four. A converged solve stops where it converges.
    max_iters: ClassVar[int] = 800


@dataclasses.dataclass(frozen=True)
class GaussNewton:
    """Newton on the square system (block-tridiagonal Jacobian) with a line search
    (:mod:`geomopt.gfm._gauss_newton`)."""

    name: ClassVar[str] = "gauss_newton"
    max_iters: ClassVar[int] = 100


@dataclasses.dataclass(frozen=True)
class Adam:
    """The official optimiser (:mod:`geomopt.gfm._adam`): clip the gradient at global norm
    ``clip``, then Adam with ``lr`` and ``eps``; the score a constant force by default. The
    official settings differ per problem (torus runs A/B/C: lr 1e-3 / 5e-3 / 5e-4, clip 10,
    eps 1e-8, 1501 iterations; 3-D shape latents: lr 0.01, no clip, eps 1e-5, 500 iterations).
    Passed to the solve as arrays: changing them does not recompile."""

    lr: float = 0.05
    clip: float = 10.0
    eps: float = 1e-8
    name: ClassVar[str] = "adam"
    max_iters: ClassVar[int] = 1501  # the official torus setting


@dataclasses.dataclass(frozen=True)
class MatrixFree:
    """The matrix-free backend (:func:`geomopt.gfm.solve_matrix_free`; memory O(K d);
    Euclidean / hypersphere residual): ``method="newton"`` (inexact Newton-GMRES, LM-PCG from
    where its line search fails) or ``"lm"`` (LM-PCG only), the preconditioner ``precond``
    (``"fd_trace"``, ``"fd"``, ``"none"``), and the Krylov caps per iteration."""

    method: str = "newton"
    precond: str = "fd_trace"
    cg_max_iters: int = 50
    gmres_max_iters: int = 20
    name: ClassVar[str] = "matrix_free"
    max_iters: ClassVar[int] = 200


Banded = LM | Action | GaussNewton | Adam
Solver = Banded | MatrixFree


@dataclasses.dataclass(frozen=True)
class Auto:
    """The most robust solver measured for the problem: :attr:`matrix_free` for the Euclidean
    and hypersphere residuals from ``d >= min_d`` (``None``: never), else :attr:`hypersphere`
    for the hypersphere residual (its projected force is not the gradient of an action) and
    :attr:`other` for the Euclidean and metric residuals. The threshold is from the cost per LM
    iteration (the banded LM pushes ``d`` tangents through the score and factors ``d x d``
    blocks; the matrix-free one takes ~2 JVP/VJPs per CG step), not a measured crossover."""

    hypersphere: Banded = LM()
    other: Banded = Action()
    matrix_free: MatrixFree | None = MatrixFree()
    min_d: int = MATRIX_FREE_MIN_D


def as_solver(method: str = "auto", *, backend: str = "auto", lr=0.05, clip=10.0, eps=1e-8,
              lm_options: dict | None = None) -> Solver | Auto:  # fmt: skip
    """The solver object of :func:`geomopt.gfm.solve`'s keyword spelling: ``method`` one of
    ``"auto"``, ``"lm"``, ``"action"``, ``"gauss_newton"``, ``"adam"``; ``backend``
    ``"auto"``, ``"banded"`` or ``"matrix_free"``; ``lm_options`` the :class:`LM` fields."""
    if method not in GFM_METHODS:
        raise ValueError(f"method {method!r}: expected one of {GFM_METHODS}")
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: expected 'auto', 'banded' or 'matrix_free'")
    opts = dict(check_lm_options(lm_options))
    lm = LM(**opts)
    fixed = {"action": Action(**opts), "adam": Adam(lr=lr, clip=clip, eps=eps)}
    if backend == "matrix_free":
        if method in fixed:
            raise ValueError(
                f"backend='matrix_free' with method {method!r}: expected method 'auto', 'lm' "
                "or 'gauss_newton'"
            )
        return MatrixFree()
    if method in fixed:
        return fixed[method]
    free = MatrixFree() if backend == "auto" else None
    if method == "auto":
        return Auto(hypersphere=lm, other=Action(**opts), matrix_free=free)
    banded = lm if method == "lm" else GaussNewton()
    return Auto(hypersphere=banded, other=banded, matrix_free=free)


def resolve(solver, kind: str, d: int) -> Solver:
    """The solver that runs for ``solver`` on a residual of ``kind`` in ``d`` dimensions
    (an :class:`Auto` resolved), refusing a pairing that does not apply in one line."""
    if not isinstance(solver, (LM, GaussNewton, Adam, MatrixFree, Auto)):
        raise TypeError(
            f"solver {solver!r}: expected gfm.LM, gfm.Action, gfm.GaussNewton, gfm.Adam, "
            "gfm.MatrixFree or gfm.Auto"
        )
    if isinstance(solver, Auto):
        free = solver.matrix_free
        if free is not None and kind in _FREE_KINDS and d >= solver.min_d:
            return free
        solver = solver.hypersphere if kind == "hypersphere" else solver.other
    if isinstance(solver, Action) and kind == "hypersphere":
        raise ValueError(
            "method='action' with residual 'hypersphere': the projected residual is not the "
            "gradient of an action; use method='lm' or residual 'euclidean' / 'metric'"
        )
    if isinstance(solver, MatrixFree) and kind not in _FREE_KINDS:
        raise ValueError(
            f"backend='matrix_free' with residual {kind!r}: expected the 'euclidean' or "
            "'hypersphere' residual"
        )
    return solver
