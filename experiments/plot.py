"""Figures from saved run folders: ``uv run experiments/plot.py NAME [RUN_DIR ...]``.

Writes to ``results/figures/<family>/`` (``--out``), or into the committed
``experiments/<family>/figures/`` with ``--update-committed``.
"""

import sys

from geomopt.experiment import plot_main
from geomopt.registry import load_all

if __name__ == "__main__":
    sys.exit(plot_main(load_all()))
