"""Sigma sweep: which methods stay stable as the score noise level goes from 0.5 to 0.01.

uv run experiments/gfm/sigma_sweep.py            # quick preset
uv run experiments/gfm/sigma_sweep.py paper      # trained torus denoiser, 32 pairs
uv run experiments/gfm/sigma_sweep.py smoke --config.n-pairs 2
"""

import dataclasses

from geomopt.cli import preset_cli
from geomopt.gfm.experiments import SIGMA_PRESETS, SigmaSweepConfig, run_sigma_sweep


@dataclasses.dataclass(frozen=True)
class Args:
    config: SigmaSweepConfig
    """Experiment settings."""
    root: str = "results"
    """Results root; the run goes to <root>/gfm/<config.name>."""
    overwrite: bool = False
    """Replace a finished run of the same name."""


PRESETS = {k: (d, Args(c)) for k, (d, c) in SIGMA_PRESETS.items()}

if __name__ == "__main__":
    args = preset_cli(PRESETS, default="quick")
    print(run_sigma_sweep(args.config, root=args.root, overwrite=args.overwrite))
