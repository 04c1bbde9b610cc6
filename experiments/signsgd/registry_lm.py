"""Registers the GPT-2 CPU demo (SGD / SignSGD / Signum / AdamW / Muon on a small byte-level GPT)
with ``experiments/reproduce.py``. ``quick``: ~2 min on 2 CPU cores; ``paper``: the full
``cpu-demo`` sweep (4 layers, width 256, context 256, three step sizes each; hours on a CPU).
The paper's own GPT-2 124M run needs C4 shards and an accelerator: see README_pretrain.md."""

from pathlib import Path

from geomopt.lm import DEMO_EXPERIMENTS, plot_demo, run_demo
from geomopt.reproduce import Experiment

_PRESET = {"quick": "quick", "paper": "full"}
_FIGURE = {"quick": "lm_cpu_demo_quick.png", "full": "lm_cpu_demo.png"}


def _run(preset: str, root: Path, overwrite: bool) -> None:
    run_demo(_PRESET[preset], root, overwrite)


def _plot(root: Path, figures_dir: Path) -> list[Path]:
    out = []
    for demo, folder in DEMO_EXPERIMENTS.items():
        runs = Path(root) / folder
        if runs.is_dir() and any(runs.glob("*/summary.json")):
            out.append(plot_demo(runs, Path(figures_dir) / _FIGURE[demo]))
    if not out:
        raise FileNotFoundError(f"no finished GPT-2 demo runs under {root}")
    return out


EXPERIMENTS = [
    Experiment(
        name="signsgd/pretrain_cpu_demo",
        description="small GPT on stdlib bytes: SGD vs SignSGD/Signum/AdamW/Muon, noise density",
        run=_run,
        plot=_plot,
        command="uv run experiments/reproduce.py --only signsgd/pretrain_cpu_demo",
    )
]
