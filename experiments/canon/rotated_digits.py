"""canon/rotated_digits: ``uv run experiments/canon/rotated_digits.py [smoke|quick|paper]``."""

import sys

from geomopt.canon.exp_rotated_digits import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
