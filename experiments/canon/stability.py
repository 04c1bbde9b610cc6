"""Canonization jumps: ``uv run experiments/canon/stability.py [smoke|quick|paper]``."""

import sys

from geomopt.canon.exp_stability import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
