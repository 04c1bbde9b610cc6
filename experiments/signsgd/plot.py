"""Figures of the SignSGD experiments from saved run folders only.

``uv run experiments/signsgd/plot.py`` reads ``results/signsgd/{toy,sparse_noise,matrix_noise}``
(the quick runs; ``--suffix=-paper`` for the paper runs) and writes PNGs to ``--out``.
Intentionally short: the plotting code lives in :mod:`geomopt.problems.experiments`.
"""

import dataclasses
from pathlib import Path

from geomopt.cli import preset_cli
from geomopt.problems.experiments import (
    FAMILY,
    plot_matrix_noise,
    plot_sparse_noise,
    plot_toy,
)


@dataclasses.dataclass(frozen=True)
class Config:
    root: Path = Path("results")
    """Results root holding signsgd/<run> folders."""
    suffix: str = ""
    """Run-name suffix: "" for the quick runs, "-paper" or "-smoke" for the others."""
    out: Path = Path("experiments/signsgd/figures")
    """Folder for the PNGs."""


PRESETS = {
    "quick": ("figures of the quick runs into experiments/signsgd/figures", Config()),
    "paper": (
        "figures of the paper runs into results/figures/signsgd-paper",
        Config(suffix="-paper", out=Path("results/figures/signsgd-paper")),
    ),
    "smoke": (
        "figures of the smoke runs into results/figures/signsgd-smoke",
        Config(suffix="-smoke", out=Path("results/figures/signsgd-smoke")),
    ),
}


def main(cfg: Config) -> None:
    made = []
    for run, plot in (
        ("toy", plot_toy),
        ("sparse_noise", plot_sparse_noise),
        ("matrix_noise", plot_matrix_noise),
    ):
        path = cfg.root / FAMILY / f"{run}{cfg.suffix}"
        if (path / "summary.json").exists():
            made += plot(path, cfg.out)
        else:
            print(f"skipping {path}: no complete run there")
    for p in made:
        print(p)


if __name__ == "__main__":
    main(preset_cli(PRESETS, default="quick", description=__doc__))
