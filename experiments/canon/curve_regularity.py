"""Curve Hoelder exponents: ``uv run experiments/canon/curve_regularity.py [smoke|quick|paper]``."""

import sys

from geomopt.canon.exp_curve_regularity import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
