"""Synthetic problems for the SignSGD / Muon sparse-noise theory (Tao, Yu, Zhang 2026).

Vector problems: separable objectives with vector smoothness ``L`` and separable noise ``sigma``
(sparse: ``s`` noisy coordinates, up to dense: all ``d``), Gaussian or heavy-tailed, with the
exact norms the theory uses (``||sigma||_1``, ``||sigma||_2``, ``phi``, ``L_inf``). Matrix
problems: spectral-smooth objectives with low-rank or full-rank noise, nuclear-norm stationarity.
Runs: vmapped over problems x step sizes x seeds inside one jitted scan (``run_trajectories``) or
a checkpointed complexity measurement (``steps_to_reach``). The experiments of
``experiments/signsgd/`` live in :mod:`geomopt.problems.experiments`.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_matrix": [
            "EmbeddedMatrixProblem",
            "QuadraticMatrixProblem",
            "embedded_problem",
            "nuclear_norm",
            "quadratic_matrix_problem",
            "random_orthogonal",
            "sgd_hard_matrix_instance",
        ],
        "_run": [
            "METHODS",
            "OPTIMIZERS",
            "check_step_sizes",
            "geometric_checkpoints",
            "make_optimizer",
            "optimizer_factory",
            "orthogonalized_sgd",
            "run_trajectories",
            "stack_problems",
            "steps_to_reach",
            "complexity_from_curves",
        ],
        "_separable": [
            "SeparableProblem",
            "l1_norm",
            "l2_norm",
            "l_inf_smoothness",
            "matched_l1_pair",
            "noise_density",
            "sample_noise",
            "separable_problem",
            "sgd_hard_instance",
            "fixed_curvature_instance",
            "sigma_with_phi",
            "sparse_sigma",
        ],
    },
)
