"""Registered canon experiments for ``experiments/reproduce.py``."""

import importlib.util
from pathlib import Path

from geomopt.canon._experiments import (
    CoveringConfig,
    RegularityConfig,
    run_covering,
    run_regularity,
)
from geomopt.reproduce import Experiment

_HERE = Path(__file__).parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_geomopt_canon_{name}", _HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _covering_cfg(preset: str) -> CoveringConfig:
    return _load("covering").PRESETS[preset][1].sweep


def _regularity_cfg(preset: str) -> RegularityConfig:
    return _load("regularity").PRESETS[preset][1].probe


def _plot(kind: str):
    def plot(root: Path, figures_dir: Path):
        module = _load("plot")
        fn = module.plot_covering if kind == "covering" else module.plot_regularity
        runs = [p for p in (Path(root) / "canon" / kind).glob("*") if (p / "summary.json").exists()]
        if not runs:
            return []
        latest = max(runs, key=lambda p: (p / "summary.json").stat().st_mtime)
        return fn(Path(root), Path(figures_dir) / "canon", latest.name)

    return plot


EXPERIMENTS = [
    Experiment(
        name="canon/covering",
        description="covering proxies l2/lex/Hilbert/Hungarian vs d and vs training clouds",
        run=lambda preset, root, overwrite: run_covering(
            _covering_cfg(preset), root, overwrite=overwrite
        ),
        plot=_plot("covering"),
        command="uv run experiments/canon/covering.py quick",
    ),
    Experiment(
        name="canon/regularity",
        description="perturbation probe (Hoelder exponent) of lex/Hilbert/Morton vs d",
        run=lambda preset, root, overwrite: run_regularity(
            _regularity_cfg(preset), root, overwrite=overwrite
        ),
        plot=_plot("regularity"),
        command="uv run experiments/canon/regularity.py quick",
    ),
]


def _classify_run(preset: str, root: Path, overwrite: bool):
    from geomopt.canon._classify import run_classify

    return run_classify(_load("classify").PRESETS[preset][1].sweep, root, overwrite=overwrite)


def _classify_plot(root: Path, figures_dir: Path):
    from geomopt.canon._classify import plot_classify

    runs = [
        p for p in (Path(root) / "canon" / "classify").glob("*") if (p / "summary.json").exists()
    ]
    if not runs:
        return []
    latest = max(runs, key=lambda p: (p / "summary.json").stat().st_mtime)
    return [plot_classify(latest, Path(figures_dir) / "canon" / "classify.png")]


EXPERIMENTS.append(
    Experiment(
        name="canon/classify",
        description="test accuracy / generalization gap of canonized, unsorted, group-averaged "
        "and DeepSets models vs d and training-set size",
        run=_classify_run,
        plot=_classify_plot,
        command="uv run experiments/canon/classify.py quick",
    )
)
