"""gfm/train_score: ``uv run experiments/gfm/train_score.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.gfm.exp_train_score import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
