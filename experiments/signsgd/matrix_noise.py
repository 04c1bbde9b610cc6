"""Muon vs SGD, matrix noise: ``uv run experiments/signsgd/matrix_noise.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.problems.exp_matrix_noise import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
