"""Interpolation between 8x8 digits: ``uv run experiments/gfm/digits.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.latent.exp_digits import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
