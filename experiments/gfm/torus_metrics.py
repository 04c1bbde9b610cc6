"""gfm/torus_metrics: ``uv run experiments/gfm/torus_metrics.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.gfm.exp_torus_metrics import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
