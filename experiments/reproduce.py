"""Reproduce every registered experiment: ``uv run experiments/reproduce.py`` (quick preset).

Runs the chosen preset of each experiment found in ``experiments/*/registry.py`` on the
available backend, writes run folders and figures under ``--root`` (``results/`` by default)
and prints a summary table. The paper's settings: ``uv run experiments/reproduce.py paper``.
This file is intentionally kept short: the work happens in :mod:`geomopt.reproduce`.
"""

import dataclasses
import sys
from pathlib import Path

from geomopt.cli import preset_cli
from geomopt.reproduce import discover, format_table, run_all


@dataclasses.dataclass(frozen=True)
class Config:
    preset: str = "quick"
    """Which settings to run: "quick" (CPU, about 10 minutes in all) or "paper"."""
    root: Path = Path("results")
    """Folder for run folders, figures and the summary table."""
    only: tuple[str, ...] = ()
    """Run only experiments whose name starts with one of these (e.g. signsgd/toy)."""
    list: bool = False
    """List the registered experiments and exit."""


PRESETS = {
    "quick": ("CPU settings, the whole set in about 10 minutes on 2 cores", Config()),
    "paper": ("the papers' settings (hours; use an accelerator)", Config(preset="paper")),
    "smoke": ("list the registered experiments (seconds)", Config(list=True)),
}


def main(cfg: Config) -> int:
    experiments = discover(Path(__file__).parent)
    if cfg.list:
        for e in experiments:
            print(f"{e.name:28s} {e.description}")
        return 0
    outcomes = run_all(experiments, preset=cfg.preset, root=cfg.root, only=cfg.only)
    print()
    print(format_table(outcomes, cfg.preset))
    print(f"figures: {cfg.root / 'figures'}    summary: {cfg.root / 'summary.md'}")
    return 0 if all(o.status == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(preset_cli(PRESETS, default="quick", description=__doc__)))
