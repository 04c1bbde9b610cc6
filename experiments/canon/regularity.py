"""Regularity probe of lex / Hilbert / Morton canonization vs dimension.

    uv run experiments/canon/regularity.py smoke|quick|paper [--root results] [--field value]

This file is intentionally kept short: the work happens in :mod:`geomopt.canon`.
"""

import dataclasses
from pathlib import Path

from geomopt.canon._experiments import RegularityConfig, run_regularity
from geomopt.cli import preset_cli


@dataclasses.dataclass(frozen=True)
class Config:
    probe: RegularityConfig = RegularityConfig()
    """The probe settings."""
    root: Path = Path("results")
    """Results root; the run goes to <root>/canon/regularity/<name>."""
    overwrite: bool = True
    """Replace an existing run of the same name."""


PRESETS = {
    "smoke": (
        "seconds",
        Config(RegularityConfig(dims=(2, 3), eps=(1e-3, 1e-2), n_clouds=2, n_points=16,
                                n_perturb=1, name="smoke")),
    ),
    "quick": ("CPU, about 30 s", Config(RegularityConfig())),
    "paper": (
        "256 points, d = 2..8, more clouds and perturbations",
        Config(RegularityConfig(dims=(2, 3, 4, 5, 6, 7, 8), n_clouds=32, n_points=256,
                                n_perturb=8, eps=(1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
                                name="paper")),
    ),
}  # fmt: skip

if __name__ == "__main__":
    cfg = preset_cli(PRESETS, default="quick", description=__doc__)
    print(run_regularity(cfg.probe, cfg.root, overwrite=cfg.overwrite))
