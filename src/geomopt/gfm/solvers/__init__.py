"""The GFM path solvers: one module per method, each an option object (a frozen dataclass the
user passes as ``gfm.solve(..., solver=...)``) beside the loop it runs.

- :class:`LM` (:mod:`._levenberg_marquardt`): Levenberg-Marquardt on the banded Jacobian.
- :class:`Action` (:mod:`._action`): trust-region descent of the path action handing over to LM.
- :class:`GaussNewton` (:mod:`._gauss_newton`): Newton with a line search.
- :class:`Adam` (:mod:`._adam`): the official optimiser.
- :class:`MatrixFree` (:mod:`._newton_krylov`): Newton-GMRES / LM-PCG on JVPs, no Jacobian
  blocks (the backend :func:`geomopt.gfm.solve_matrix_free`; Krylov methods in :mod:`._krylov`).
- :class:`Auto` (:mod:`._auto`): the default, resolved per problem by :func:`resolve`;
  :func:`as_solver` turns the keyword spelling (``method=``, ``backend=``, ``lr=``, ...) into an
  object.

The protocol they share is :mod:`._interface` (:class:`AbstractPathSolver`, the loop
:func:`iterate`; :class:`BandedSolver`, whose ``minimise`` runs a :class:`PathProblem`);
:func:`minimise_path` runs a banded solver on any windowed residual; :mod:`._banded` is the
block-banded linear algebra they use.
"""

from ._action import Action
from ._adam import Adam
from ._auto import MATRIX_FREE_MIN_D, Auto, Solver, as_solver, resolve
from ._gauss_newton import GaussNewton
from ._interface import AbstractPathSolver, BandedSolver, PathProblem, iterate
from ._levenberg_marquardt import LM
from ._minimise import minimise_path
from ._newton_krylov import MatrixFree

__all__ = [
    "LM",
    "Action",
    "GaussNewton",
    "Adam",
    "MatrixFree",
    "Auto",
    "Solver",
    "MATRIX_FREE_MIN_D",
    "as_solver",
    "resolve",
    "AbstractPathSolver",
    "BandedSolver",
    "PathProblem",
    "iterate",
    "minimise_path",
]
