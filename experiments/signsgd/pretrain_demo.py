"""The LM optimiser demo: ``uv run experiments/signsgd/pretrain_demo.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.lm.exp_pretrain_demo import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
