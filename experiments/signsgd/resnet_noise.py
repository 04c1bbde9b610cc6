"""signsgd/resnet_noise: ``uv run experiments/signsgd/resnet_noise.py [smoke|quick|paper]``."""

import sys

from geomopt.experiment import main
from geomopt.problems.exp_resnet_noise import EXPERIMENT

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
