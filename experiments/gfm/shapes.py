"""3-D shape interpolation in a latent: ``uv run experiments/gfm/shapes.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.latent.exp_shapes import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
