"""Choosing the solver of :func:`geomopt.gfm.solve`: :class:`Auto` (the default), the
keyword spelling (:func:`as_solver`) and :func:`resolve`.

``gfm.solve(x0, x1, score=..., solver=gfm.LM(geodesic=False))`` runs Levenberg-Marquardt with
those options; ``solver=gfm.Adam(lr=1e-3)`` the official optimiser; ``solver=gfm.MatrixFree()``
the matrix-free Newton-GMRES. The default :class:`Auto` picks by residual and dimension
(:func:`resolve`). The older keywords of :func:`geomopt.gfm.solve` (``method``, ``backend``,
``lr``, ``clip``, ``eps``, ``lm_options``) are turned into one of these objects by
:func:`as_solver`, so the front resolves and dispatches in one place.

The solvers are one module each, the option object beside its algorithm:
:mod:`._levenberg_marquardt` (:class:`LM`), :mod:`._action` (:class:`Action`: descent, then LM),
:mod:`._gauss_newton`, :mod:`._adam` (banded, jitted by :mod:`geomopt.gfm._compiled`) and
:mod:`._newton_krylov` (:class:`MatrixFree`: Newton-GMRES / LM-PCG on JVPs).
"""

from __future__ import annotations

import dataclasses

from .._checks import check_lm_options
from ._action import Action
from ._adam import Adam
from ._gauss_newton import GaussNewton
from ._interface import BandedSolver
from ._levenberg_marquardt import LM
from ._newton_krylov import MatrixFree

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


Banded = BandedSolver  # LM, Action, GaussNewton, Adam, or a user's own
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
    if not isinstance(solver, (BandedSolver, MatrixFree, Auto)):
        raise TypeError(
            f"solver {solver!r}: expected gfm.LM, gfm.Action, gfm.GaussNewton, gfm.Adam, "
            "gfm.MatrixFree, gfm.Auto or a gfm.solvers.BandedSolver of your own"
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
