"""Figures of GPT-2 runs from their saved run folders only: validation loss vs tokens per
optimiser (best step size bold) and noise density phi vs step.

    uv run experiments/signsgd/plot_lm.py --runs results/signsgd_lm_demo_quick \
        --out experiments/signsgd/figures/lm_cpu_demo_quick.png
    uv run experiments/signsgd/plot_lm.py --runs results/signsgd_lm_paper --out lm_paper.png
"""

import dataclasses
import sys
from pathlib import Path

from geomopt.cli import preset_cli
from geomopt.lm import plot_demo


@dataclasses.dataclass(frozen=True)
class Config:
    runs: Path = Path("results/signsgd_lm_demo_quick")
    """Folder holding one run folder per (optimiser, step size)."""
    out: Path = Path("experiments/signsgd/figures/lm_cpu_demo_quick.png")
    """PNG to write."""


PRESETS = {
    "quick": ("the quick CPU demo's runs", Config()),
    "smoke": ("same as quick", Config()),
    "cpu-demo": (
        "the full cpu-demo sweep's runs",
        Config(
            runs=Path("results/signsgd_lm_cpu_demo"),
            out=Path("experiments/signsgd/figures/lm_cpu_demo.png"),
        ),
    ),
    "paper": (
        "the paper's GPT-2 124M runs",
        Config(runs=Path("results/signsgd_lm_paper"), out=Path("results/figures/lm_paper.png")),
    ),
}


if __name__ == "__main__":
    cfg = preset_cli(PRESETS, default="quick", description=__doc__)
    print(plot_demo(cfg.runs, cfg.out))
    sys.exit(0)
