"""GFM experiments for ``experiments/reproduce.py``: paths, sigma sweep, torus priors.

Each ``run`` calls the library (:mod:`geomopt.gfm.experiments`) with the chosen preset; each
``plot`` draws from the saved run folders with ``experiments/gfm/plot.py``.
"""

import importlib.util
import sys
from pathlib import Path

from geomopt.gfm import experiments as ex
from geomopt.reproduce import Experiment

_spec = importlib.util.spec_from_file_location("_gfm_plot", Path(__file__).with_name("plot.py"))
_plot = importlib.util.module_from_spec(_spec)
sys.modules["_gfm_plot"] = _plot  # dataclasses in plot.py look their module up here
_spec.loader.exec_module(_plot)


def _runner(presets, run_fn):
    def run(preset: str, root: Path, overwrite: bool) -> None:
        cfg = presets[preset][1]
        run_fn(cfg, root=root, overwrite=overwrite)

    return run


def _plotter(presets, kind):
    def plot(root: Path, figures_dir: Path):
        names = {presets[p][1].name for p in ("quick", "paper")}
        run_dirs = [Path(root) / "gfm" / n for n in sorted(names)]
        out = []
        for d in run_dirs:
            if (d / "summary.json").exists():
                out += _plot.PLOTTERS[kind](d, Path(figures_dir))
        return out

    return plot


EXPERIMENTS = [
    Experiment(
        name="gfm/paths",
        description="GFM vs baselines on torus and twin peaks: manifold error, length, residual",
        run=_runner(ex.PATHS_PRESETS, ex.run_paths),
        plot=_plotter(ex.PATHS_PRESETS, "paths"),
        command="uv run experiments/gfm/paths.py quick",
    ),
    Experiment(
        name="gfm/sigma_sweep",
        description="sigma 0.5 -> 0.01: GFM stays stable where density-aware metrics blow up",
        run=_runner(ex.SIGMA_PRESETS, ex.run_sigma_sweep),
        plot=_plotter(ex.SIGMA_PRESETS, "sigma_sweep"),
        command="uv run experiments/gfm/sigma_sweep.py quick",
    ),
    Experiment(
        name="gfm/torus_metrics",
        description="three (alpha, beta) torus priors change the route, the potential keeps it on",
        run=_runner(ex.TORUS_PRESETS, ex.run_torus_metrics),
        plot=_plotter(ex.TORUS_PRESETS, "torus_metrics"),
        command="uv run experiments/gfm/torus_metrics.py quick",
    ),
]
