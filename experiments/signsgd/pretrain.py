"""GPT-2 pretraining: ``uv run experiments/signsgd/pretrain.py [smoke|quick|paper|speedrun]``."""

import sys

from geomopt.experiment import main
from geomopt.lm.exp_pretrain import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
