"""Sparse vs dense noise: ``uv run experiments/signsgd/sparse_noise.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.problems.exp_sparse_noise import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
