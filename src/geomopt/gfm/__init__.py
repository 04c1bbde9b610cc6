"""Geodesic force matching (GFM): paths that stay on a diffusion model's data support while
being optimal under a freely chosen prior metric.

Public API:

- :func:`solve` — collocation solve (Levenberg-Marquardt / Gauss-Newton with banded linear
  algebra, or the official Adam) for one endpoint pair or a batch; returns ``(path, report)``.
- prior metrics: :class:`Euclidean`, :class:`Conformal`, :class:`Diagonal`,
  :class:`TorusMetric`, :class:`HalfPlane`, :class:`SphereCoordinates`.
- residuals: :func:`local_residual`, :func:`path_residuals`, :func:`residual_norm`.
- banded solvers: :func:`solve_block_tridiagonal`, :func:`solve_block_pentadiagonal`.
- :func:`path_metrics` (manifold error, prior length, EL residual, log-density),
  :class:`ScoreAt` / :class:`LogDensityAt` (bind sigma to a denoiser or analytic potential).
- :mod:`geomopt.gfm.baselines` — interpolation and density-aware metric baselines.
"""

from ._banded import (
    block_pentadiagonal_to_dense as block_pentadiagonal_to_dense,
)
from ._banded import (
    block_tridiagonal_to_dense as block_tridiagonal_to_dense,
)
from ._banded import (
    solve_block_pentadiagonal as solve_block_pentadiagonal,
)
from ._banded import (
    solve_block_tridiagonal as solve_block_tridiagonal,
)
from ._evaluate import LogDensityAt as LogDensityAt
from ._evaluate import ScoreAt as ScoreAt
from ._evaluate import compiled_memory_bytes as compiled_memory_bytes
from ._evaluate import path_metrics as path_metrics
from ._evaluate import prior_length as prior_length
from ._gfm import default_tol as default_tol
from ._gfm import solve as solve
from ._gfm import straight_line as straight_line
from ._metrics import (
    Conformal as Conformal,
)
from ._metrics import (
    Diagonal as Diagonal,
)
from ._metrics import (
    Euclidean as Euclidean,
)
from ._metrics import (
    HalfPlane as HalfPlane,
)
from ._metrics import (
    Metric as Metric,
)
from ._metrics import (
    SphereCoordinates as SphereCoordinates,
)
from ._metrics import (
    TorusMetric as TorusMetric,
)
from ._metrics import (
    sphere_to_cartesian as sphere_to_cartesian,
)
from ._metrics import (
    torus_frame as torus_frame,
)
from ._residuals import (
    christoffel_term as christoffel_term,
)
from ._residuals import (
    local_residual as local_residual,
)
from ._residuals import (
    path_residuals as path_residuals,
)
from ._residuals import (
    residual_norm as residual_norm,
)
from ._solve import REASONS as REASONS
from ._solve import SolveReport as SolveReport
from ._solve import minimise_path as minimise_path
