"""Official canonization runs on ModelNet: ``uv run experiments/canon/modelnet.py [PRESET]``."""

import sys

from geomopt.canon.exp_modelnet import EXPERIMENT
from geomopt.experiment import main

if __name__ == "__main__":
    sys.exit(main(EXPERIMENT))
