"""Geodesic force matching (GFM): paths that stay on a diffusion model's data support while
being optimal under a freely chosen prior metric.

Public API:

- :func:`solve` — collocation solve for one endpoint pair or a batch (by default the most
  robust method: action descent handing over to Levenberg-Marquardt with banded linear algebra,
  LM for the hypersphere residual, matrix-free Newton-GMRES from d = 256; or the official Adam);
  returns ``(path, report)`` with a :class:`Status` per pair (converged / stalled / max_iters /
  diverged / invalid_start). :func:`solve_matrix_free` is the matrix-free backend itself;
  :func:`minimise_path_matrix_free` its traceable core for any residual such as
  :func:`gfm_residual`.
- :mod:`geomopt.gfm.solvers` — solvers as objects carrying their options, passed as
  ``solve(..., solver=...)``: :class:`LM`, :class:`Action`, :class:`GaussNewton`,
  :class:`Adam`, :class:`MatrixFree`, :class:`Auto` (the default); :func:`as_solver` turns the
  keyword spelling (``method=``, ``backend=``, ``lr=``, ...) into one; :func:`minimise_path`
  runs a banded solver on any windowed residual.
- initial paths and continuation: :func:`chord`, :func:`slerp`, :func:`coordinate_linear`,
  :func:`project_with_denoiser`, :func:`sequential_init`, :func:`solve_continuation`.
- validity without the true manifold: :func:`denoiser_displacement`, :func:`path_validity`,
  :func:`support_profile` (the support check every :func:`solve` report carries:
  ``report.on_support``, threshold :data:`DEFAULT_SUPPORT_THRESHOLD`).
- prior metrics: :class:`Euclidean`, :class:`Conformal`, :class:`Diagonal`,
  :class:`TorusMetric`, :class:`HalfPlane`, :class:`SphereCoordinates`.
- residuals: :func:`local_residual`, :func:`path_residuals`, :func:`residual_norm`.
- banded solvers: :func:`solve_block_tridiagonal`, :func:`solve_block_pentadiagonal`.
- :func:`path_metrics` (manifold error, prior length, EL residual, log-density),
  :class:`ScoreAt` / :class:`LogDensityAt` (bind sigma to a denoiser or analytic potential);
  :func:`score_config` (the :mod:`geomopt.diffusion` training config of a light denoiser spec).
- score-field diagnostics of any model with ``score(x, sigma)``: :func:`score_diagnostics`
  (force heat map over sigma on the straight path, tangential / normal split, the field in the
  pair's plane), :func:`score_force`, :func:`plot_diagnostics`.
- :mod:`geomopt.gfm.baselines` — interpolation and density-aware metric baselines.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "solvers._banded": [
            "block_pentadiagonal_to_dense",
            "block_tridiagonal_to_dense",
            "solve_block_pentadiagonal",
            "solve_block_tridiagonal",
        ],
        "_checks": ["default_tol"],
        "_continuation": ["solve_continuation"],
        "_diagnostics": [
            "DEFAULT_DIAGNOSTIC_SIGMAS",
            "PlaneField",
            "ScoreDiagnostics",
            "plot_diagnostics",
            "score_diagnostics",
            "score_force",
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
        "_gfm": ["solve"],
        "_init": [
            "PERIODIC_COORDS",
            "chord",
            "coordinate_linear",
            "project_with_denoiser",
            "sequential_init",
            "slerp",
            "straight_line",
        ],
        "_matrix_free": ["gfm_residual", "minimise_path_matrix_free", "solve_matrix_free"],
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
        "_potentials": ["score_config"],
        "_residuals": [
            "christoffel_term",
            "local_residual",
            "path_residuals",
            "residual_norm",
        ],
        "solvers": [
            "LM",
            "Action",
            "GaussNewton",
            "Adam",
            "MatrixFree",
            "Auto",
            "as_solver",
            "minimise_path",
        ],
        "_support": ["DEFAULT_SUPPORT_THRESHOLD", "support_points", "support_profile"],
        "_status": [
            "REASONS",
            "STATUS_OF_CODE",
            "MatrixFreeReport",
            "SolveReport",
            "Status",
        ],
    },
)
