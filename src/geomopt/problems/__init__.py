"""Synthetic problems for the SignSGD / Muon sparse-noise theory (Tao, Yu, Zhang 2026).

Vector problems: separable objectives with vector smoothness ``L`` and separable noise ``sigma``
(sparse: ``s`` noisy coordinates, up to dense: all ``d``), Gaussian or heavy-tailed, with the
exact norms the theory uses (``||sigma||_1``, ``||sigma||_2``, ``phi``, ``L_inf``). Matrix
problems: spectral-smooth objectives with low-rank or full-rank noise, nuclear-norm stationarity.
Runs: vmapped over problems x step sizes x seeds inside one jitted scan (``run_trajectories``) or
a checkpointed complexity measurement (``steps_to_reach``). The experiments of
``experiments/signsgd/`` live in :mod:`geomopt.problems.experiments`.
"""

from geomopt.problems._matrix import EmbeddedMatrixProblem as EmbeddedMatrixProblem
from geomopt.problems._matrix import QuadraticMatrixProblem as QuadraticMatrixProblem
from geomopt.problems._matrix import embedded_problem as embedded_problem
from geomopt.problems._matrix import nuclear_norm as nuclear_norm
from geomopt.problems._matrix import quadratic_matrix_problem as quadratic_matrix_problem
from geomopt.problems._matrix import random_orthogonal as random_orthogonal
from geomopt.problems._matrix import sgd_hard_matrix_instance as sgd_hard_matrix_instance
from geomopt.problems._run import OPTIMIZERS as OPTIMIZERS
from geomopt.problems._run import check_step_sizes as check_step_sizes
from geomopt.problems._run import geometric_checkpoints as geometric_checkpoints
from geomopt.problems._run import make_optimizer as make_optimizer
from geomopt.problems._run import orthogonalized_sgd as orthogonalized_sgd
from geomopt.problems._run import run_trajectories as run_trajectories
from geomopt.problems._run import stack_problems as stack_problems
from geomopt.problems._run import steps_to_reach as steps_to_reach
from geomopt.problems._separable import SeparableProblem as SeparableProblem
from geomopt.problems._separable import l1_norm as l1_norm
from geomopt.problems._separable import l2_norm as l2_norm
from geomopt.problems._separable import l_inf_smoothness as l_inf_smoothness
from geomopt.problems._separable import matched_l1_pair as matched_l1_pair
from geomopt.problems._separable import noise_density as noise_density
from geomopt.problems._separable import sample_noise as sample_noise
from geomopt.problems._separable import separable_problem as separable_problem
from geomopt.problems._separable import sgd_hard_instance as sgd_hard_instance
from geomopt.problems._separable import sigma_with_phi as sigma_with_phi
from geomopt.problems._separable import sparse_sigma as sparse_sigma
