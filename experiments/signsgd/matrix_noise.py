"""Muon (SVD / Newton-Schulz) vs SGD on matrix problems with low-rank or full-rank noise.

``uv run experiments/signsgd/matrix_noise.py [smoke|quick|paper]``. Intentionally short: the
work happens in :func:`geomopt.problems.experiments.run_matrix_noise`.
"""

from geomopt.cli import preset_cli
from geomopt.problems.experiments import MATRIX_PRESETS, run_matrix_noise

if __name__ == "__main__":
    path = run_matrix_noise(preset_cli(MATRIX_PRESETS, default="quick", description=__doc__))
    print(f"run folder: {path}  (figures: uv run experiments/signsgd/plot.py)")
