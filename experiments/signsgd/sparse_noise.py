"""Sparse vs dense noise: gradient evaluations to E||grad f||_1 <= eps vs d and vs phi.

``uv run experiments/signsgd/sparse_noise.py [smoke|quick|paper]``. Intentionally short: the
work happens in :func:`geomopt.problems.experiments.run_sparse_noise`.
"""

from geomopt.cli import preset_cli
from geomopt.problems.experiments import SPARSE_PRESETS, run_sparse_noise

if __name__ == "__main__":
    path = run_sparse_noise(preset_cli(SPARSE_PRESETS, default="quick", description=__doc__))
    print(f"run folder: {path}  (figures: uv run experiments/signsgd/plot.py)")
