"""GFM and every baseline on many endpoint pairs per manifold (table + figures via plot.py).

uv run experiments/gfm/paths.py            # quick preset
uv run experiments/gfm/paths.py paper      # trained denoisers, 64 pairs
uv run experiments/gfm/paths.py smoke --config.n-pairs 3
"""

import dataclasses

from geomopt.cli import preset_cli
from geomopt.gfm.experiments import PATHS_PRESETS, PathsConfig, run_paths


@dataclasses.dataclass(frozen=True)
class Args:
    config: PathsConfig
    """Experiment settings."""
    root: str = "results"
    """Results root; the run goes to <root>/gfm/<config.name>."""
    overwrite: bool = False
    """Replace a finished run of the same name."""


PRESETS = {k: (d, Args(c)) for k, (d, c) in PATHS_PRESETS.items()}

if __name__ == "__main__":
    args = preset_cli(PRESETS, default="quick")
    print(run_paths(args.config, root=args.root, overwrite=args.overwrite))
