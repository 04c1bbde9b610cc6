"""Covering proxies (l2 / lex / Hilbert / Hungarian) vs dimension and vs training-set size.

    uv run experiments/canon/covering.py smoke|quick|paper [--root results] [--field value]

This file is intentionally kept short: the work happens in :mod:`geomopt.canon`.
"""

import dataclasses
from pathlib import Path

from geomopt.canon._experiments import CoveringConfig, run_covering
from geomopt.cli import preset_cli


@dataclasses.dataclass(frozen=True)
class Config:
    sweep: CoveringConfig = CoveringConfig()
    """The sweep settings."""
    root: Path = Path("results")
    """Results root; the run goes to <root>/canon/covering/<name>."""
    overwrite: bool = True
    """Replace an existing run of the same name."""


PRESETS = {
    "smoke": (
        "seconds",
        Config(CoveringConfig(dims=(2, 3), n_train=8, n_train_sweep=(4, 8), n_test=4,
                              n_points=16, n_classes=2, name="smoke")),
    ),
    "quick": ("CPU, about 30 s", Config(CoveringConfig())),
    "paper": (
        "the official sizes: 256 points per cloud, more clouds (tens of minutes on CPU)",
        Config(CoveringConfig(n_points=256, n_train=256, n_train_sweep=(32, 64, 128, 256),
                              n_test=64, n_classes=10, name="paper")),
    ),
}  # fmt: skip

if __name__ == "__main__":
    cfg = preset_cli(PRESETS, default="quick", description=__doc__)
    print(run_covering(cfg.sweep, cfg.root, overwrite=cfg.overwrite))
