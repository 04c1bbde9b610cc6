"""Geodesic force matching (GFM): paths that stay on a diffusion model's data support while
being optimal under a freely chosen prior metric.

Public API:

- :func:`solve` — collocation solve (Levenberg-Marquardt / Gauss-Newton with banded linear
  algebra, or the official Adam) for one endpoint pair or a batch; returns ``(path, report)``
  with a :class:`Status` per pair (converged / stalled / max_iters / diverged / invalid_start).
- initial paths and continuation: :func:`chord`, :func:`slerp`, :func:`coordinate_linear`,
  :func:`project_with_denoiser`, :func:`sequential_init`, :func:`solve_continuation`.
- validity without the true manifold: :func:`denoiser_displacement`, :func:`path_validity`.
- prior metrics: :class:`Euclidean`, :class:`Conformal`, :class:`Diagonal`,
  :class:`TorusMetric`, :class:`HalfPlane`, :class:`SphereCoordinates`.
- residuals: :func:`local_residual`, :func:`path_residuals`, :func:`residual_norm`.
- banded solvers: :func:`solve_block_tridiagonal`, :func:`solve_block_pentadiagonal`.
- :func:`path_metrics` (manifold error, prior length, EL residual, log-density),
  :class:`ScoreAt` / :class:`LogDensityAt` (bind sigma to a denoiser or analytic potential).
- :mod:`geomopt.gfm.baselines` — interpolation and density-aware metric baselines.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_banded": [
            "block_pentadiagonal_to_dense",
            "block_tridiagonal_to_dense",
            "solve_block_pentadiagonal",
            "solve_block_tridiagonal",
        ],
        "_evaluate": [
            "LogDensityAt",
            "ScoreAt",
            "compiled_memory_bytes",
            "denoiser_displacement",
            "path_metrics",
            "path_validity",
            "prior_length",
        ],
        "_gfm": [
            "default_tol",
            "solve",
            "straight_line",
        ],
        "_init": [
            "PERIODIC_COORDS",
            "chord",
            "coordinate_linear",
            "project_with_denoiser",
            "sequential_init",
            "solve_continuation",
        ],
        "_matrix_free": [
            "MatrixFreeReport",
            "slerp",
            "solve_matrix_free",
        ],
        "_metrics": [
            "Conformal",
            "Diagonal",
            "Euclidean",
            "HalfPlane",
            "Metric",
            "SphereCoordinates",
            "TorusMetric",
            "sphere_to_cartesian",
            "torus_frame",
        ],
        "_residuals": [
            "christoffel_term",
            "local_residual",
            "path_residuals",
            "residual_norm",
        ],
        "_solve": [
            "REASONS",
            "STATUS_OF_CODE",
            "SolveReport",
            "Status",
            "minimise_path",
        ],
    },
)
