"""Registers the SignSGD synthetic experiments with ``experiments/reproduce.py``."""

import dataclasses
from pathlib import Path

from geomopt.problems.experiments import (
    FAMILY,
    MATRIX_PRESETS,
    SPARSE_PRESETS,
    TOY_PRESETS,
    plot_matrix_noise,
    plot_sparse_noise,
    plot_toy,
    run_matrix_noise,
    run_sparse_noise,
    run_toy,
)
from geomopt.reproduce import Experiment


def _entry(name, presets, run, plot, description):
    def run_preset(preset: str, root: Path, overwrite: bool) -> None:
        cfg = dataclasses.replace(presets[preset][1], root=Path(root), overwrite=overwrite)
        run(cfg)

    def plot_saved(root: Path, figures_dir: Path):
        cfg = presets["quick"][1]
        runs = [Path(root) / FAMILY / cfg.name, Path(root) / FAMILY / presets["paper"][1].name]
        done = [r for r in runs if (r / "summary.json").exists()]
        if not done:
            raise FileNotFoundError(f"no complete run of signsgd/{name} under {root}")
        return [p for r in done for p in plot(r, Path(figures_dir) / r.name)]

    return Experiment(
        name=f"signsgd/{name}",
        description=description,
        run=run_preset,
        plot=plot_saved,
        command=f"uv run experiments/signsgd/{name}.py quick",
    )


EXPERIMENTS = [
    _entry("toy", TOY_PRESETS, run_toy, plot_toy, "paper's toy problems: SGD vs SignSGD"),
    _entry(
        "sparse_noise",
        SPARSE_PRESETS,
        run_sparse_noise,
        plot_sparse_noise,
        "complexity vs d and phi: SignSGD is d-free, SGD pays 1/phi",
    ),
    _entry(
        "matrix_noise",
        MATRIX_PRESETS,
        run_matrix_noise,
        plot_matrix_noise,
        "Muon (SVD / Newton-Schulz) vs SGD under low-rank vs full-rank noise",
    ),
]
