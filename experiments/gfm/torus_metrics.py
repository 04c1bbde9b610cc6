"""The paper's three (alpha, beta) torus priors: the prior picks the route, the potential
keeps it on the surface.

uv run experiments/gfm/torus_metrics.py            # quick preset
uv run experiments/gfm/torus_metrics.py paper      # trained torus denoiser
uv run experiments/gfm/torus_metrics.py smoke --config.n-points 15
"""

import dataclasses

from geomopt.cli import preset_cli
from geomopt.gfm.experiments import TORUS_PRESETS, TorusMetricsConfig, run_torus_metrics


@dataclasses.dataclass(frozen=True)
class Args:
    config: TorusMetricsConfig
    """Experiment settings."""
    root: str = "results"
    """Results root; the run goes to <root>/gfm/<config.name>."""
    overwrite: bool = False
    """Replace a finished run of the same name."""


PRESETS = {k: (d, Args(c)) for k, (d, c) in TORUS_PRESETS.items()}

if __name__ == "__main__":
    args = preset_cli(PRESETS, default="quick")
    print(run_torus_metrics(args.config, root=args.root, overwrite=args.overwrite))
