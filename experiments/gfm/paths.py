"""gfm/paths: ``uv run experiments/gfm/paths.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.gfm.exp_paths import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
