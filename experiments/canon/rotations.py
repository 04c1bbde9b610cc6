"""Rotation canonizations on rotated clouds: ``uv run experiments/canon/rotations.py [PRESET]``."""

import sys

from geomopt.canon.exp_rotations import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
