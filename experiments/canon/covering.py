"""Covering on k-dim. families: ``uv run experiments/canon/covering.py [PRESET]``."""

import sys

from geomopt.canon.exp_covering import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
