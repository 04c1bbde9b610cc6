"""The paper's two toy experiments: ``uv run experiments/signsgd/toy.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.problems.exp_toy import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
