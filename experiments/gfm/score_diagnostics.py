"""gfm/sigma_sweep: ``uv run experiments/gfm/sigma_sweep.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.gfm.exp_score_diagnostics import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
