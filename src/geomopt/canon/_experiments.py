"""The covering and regularity sweeps behind ``experiments/canon`` (configs + runners).

Each runner writes one run folder with :class:`geomopt.runs.Run` (config, one metrics row per
measurement, a summary with the fitted growth rates) and can be re-plotted from disk alone.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from geomopt.canon._covering import DISTANCES, covering_proxy, fit_exponent, regularity_probe
from geomopt.canon._data import synthetic_clouds
from geomopt.runs import Run

__all__ = [
    "CoveringConfig",
    "RegularityConfig",
    "run_covering",
    "run_regularity",
    "growth_rates",
]


@dataclasses.dataclass(frozen=True)
class CoveringConfig:
    """Covering proxies (l2, lex, hilbert, wass) vs dimension and vs number of training clouds.

    Paper-style launch: ``uv run experiments/canon/covering.py paper``.
    """

    dims: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)
    """Point dimensions d of the sweep over d."""
    n_train: int = 48
    """Training clouds in the sweep over d."""
    n_train_sweep: tuple[int, ...] = (6, 12, 24, 48)
    """Training-set sizes of the sweep over the number of clouds (at dimension ``sweep_dim``)."""
    sweep_dim: int = 3
    """Dimension of the sweep over training-set size."""
    n_test: int = 16
    """Test clouds (the reduction runs over these)."""
    n_points: int = 64
    """Points per cloud (the official experiment uses 256)."""
    n_classes: int = 4
    """Synthetic classes (nearest neighbours are searched within the test cloud's class)."""
    bits: int = 12
    """Hilbert bits per axis (official: 12)."""
    reduce: str = "mean"
    """Reduction over test clouds: "mean" (official) or "max"."""
    seed: int = 0
    """Data seed."""
    name: str = "quick"
    """Run-folder name under ``<root>/canon/covering``."""


@dataclasses.dataclass(frozen=True)
class RegularityConfig:
    """Perturbation probe of lex / Hilbert / Morton canonization vs dimension."""

    dims: tuple[int, ...] = (2, 3, 4, 6, 8)
    """Point dimensions."""
    orders: tuple[str, ...] = ("lex", "hilbert", "morton")
    """Canonizations probed."""
    eps: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    """Perturbation sizes (standard deviation of the Gaussian noise added to every point)."""
    n_clouds: int = 6
    """Clouds probed per dimension."""
    n_points: int = 64
    """Points per cloud."""
    n_perturb: int = 2
    """Perturbations per cloud and size."""
    bits: int = 16
    """Bits per axis for Hilbert / Morton (fine grid, so small perturbations are resolved)."""
    seed: int = 0
    """Data and noise seed."""
    name: str = "quick"
    """Run-folder name under ``<root>/canon/regularity``."""


def _split(cfg: CoveringConfig, d: int, n_train: int):
    x, y = synthetic_clouds(n_train + cfg.n_test, cfg.n_points, d, cfg.n_classes, seed=cfg.seed + d)
    return x[cfg.n_test :], y[cfg.n_test :], x[: cfg.n_test], y[: cfg.n_test]


def growth_rates(dims, proxy: dict[str, list[float]]) -> dict[str, float]:
    """Fitted growth of ``proxy[k] / proxy["wass"]`` with d: exponential rate (slope of the log
    ratio vs d) and polynomial degree (slope of the log ratio vs log d), for k in l2/lex/hilbert."""
    dims = np.asarray(dims, float)
    out = {}
    for k in ("l2", "lex", "hilbert"):
        ratio = np.asarray(proxy[k]) / np.asarray(proxy["wass"])
        out[f"{k}_exp_rate"] = float(np.polyfit(dims, np.log(ratio), 1)[0])
        out[f"{k}_poly_degree"] = fit_exponent(dims, ratio)
    return out


def run_covering(cfg: CoveringConfig, root: str | Path, *, overwrite: bool = False) -> Path:
    run = Run.create("covering", cfg.name, cfg, root=Path(root) / "canon", overwrite=overwrite)
    proxy: dict[str, list[float]] = {k: [] for k in DISTANCES}
    for d in cfg.dims:
        xtr, ytr, xte, yte = _split(cfg, d, cfg.n_train)
        row = {"sweep": "dim", "d": d, "n_train": cfg.n_train}
        for k in DISTANCES:
            row[k] = covering_proxy(xte, yte, xtr, ytr, k, reduce=cfg.reduce, bits=cfg.bits)
            proxy[k].append(row[k])
        run.log(**row)
    for n in cfg.n_train_sweep:
        xtr, ytr, xte, yte = _split(cfg, cfg.sweep_dim, n)
        row = {"sweep": "n_train", "d": cfg.sweep_dim, "n_train": n}
        for k in DISTANCES:
            row[k] = covering_proxy(xte, yte, xtr, ytr, k, reduce=cfg.reduce, bits=cfg.bits)
        run.log(**row)
    run.finish(growth_rates(cfg.dims, proxy) if len(cfg.dims) > 1 else {})
    return run.path


def run_regularity(cfg: RegularityConfig, root: str | Path, *, overwrite: bool = False) -> Path:
    run = Run.create("regularity", cfg.name, cfg, root=Path(root) / "canon", overwrite=overwrite)
    summary = {}
    for d in cfg.dims:
        x, _ = synthetic_clouds(cfg.n_clouds, cfg.n_points, d, 1, seed=cfg.seed + d)
        for order in cfg.orders:
            res = regularity_probe(
                x, order, cfg.eps, n_perturb=cfg.n_perturb, seed=cfg.seed, bits=cfg.bits
            )
            for r in res["rows"]:
                run.log(d=d, order=order, **r)
            summary[f"{order}_d{d}_exponent"] = res["exponent"]
    run.finish(summary)
    return run.path
