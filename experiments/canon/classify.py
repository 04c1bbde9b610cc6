"""Canonized vs unsorted vs invariant models: ``uv run experiments/canon/classify.py [PRESET]``."""

import sys

from geomopt.canon.exp_classify import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
