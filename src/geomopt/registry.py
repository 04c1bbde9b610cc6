"""The static list of every experiment, in the order ``experiments/reproduce.py`` runs them.

Each entry is ``"<module>:EXPERIMENT"``; importing the module is cheap (no JAX), so listing and
``--help`` stay instant. Add a new experiment here and in its family's README.
"""

from __future__ import annotations

import importlib

from geomopt.experiment import Experiment

__all__ = ["EXPERIMENTS", "load", "load_all"]

EXPERIMENTS: tuple[str, ...] = (
    # one line per experiment, in the order reproduce.py runs them
    "geomopt.problems.exp_toy",
    "geomopt.problems.exp_sparse_noise",
    "geomopt.problems.exp_matrix_noise",
    "geomopt.problems.exp_resnet_noise",
    "geomopt.lm.exp_pretrain",
    "geomopt.lm.exp_pretrain_demo",
    "geomopt.canon.exp_covering",
    "geomopt.canon.exp_curve_regularity",
    "geomopt.canon.exp_stability",
    "geomopt.canon.exp_classify",
    "geomopt.canon.exp_modelnet",
    "geomopt.canon.exp_rotations",
    "geomopt.canon.exp_rotated_digits",
    "geomopt.latent.exp_shapes",
    "geomopt.latent.exp_digits",
    "geomopt.gfm.exp_train_score",
    "geomopt.gfm.exp_paths",
    "geomopt.gfm.exp_sigma_sweep",
    "geomopt.gfm.exp_torus_metrics",
    "geomopt.gfm.exp_score_diagnostics",
)


def load(module: str) -> Experiment:
    """Import one experiment module and return its ``EXPERIMENT``."""
    exp = getattr(importlib.import_module(module), "EXPERIMENT", None)
    if not isinstance(exp, Experiment):
        raise TypeError(f"{module}.EXPERIMENT is not a geomopt.experiment.Experiment")
    return exp


def load_all() -> list[Experiment]:
    """Every registered experiment; raises if two share a name."""
    exps = [load(m) for m in EXPERIMENTS]
    names = [e.name for e in exps]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"experiment names registered twice: {dupes}")
    return exps
