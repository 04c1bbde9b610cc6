"""Train (or load) an EDM denoiser per manifold and report its PF-ODE sample quality.

    uv run experiments/gfm/train_score.py smoke            # seconds
    uv run experiments/gfm/train_score.py                  # quick: all six manifolds, CPU
    uv run experiments/gfm/train_score.py paper            # official settings (use a GPU)
    uv run experiments/gfm/train_score.py --manifolds torus twin_peaks --overwrite

Models land in ``<root>/gfm/scores/<manifold>/`` (model.eqx + model.json, metrics, summary,
PF-ODE samples); a finished run with the same settings is loaded instead of retrained.
This file is intentionally kept short: the work happens in :mod:`geomopt.diffusion`.
"""

import dataclasses
import sys
from pathlib import Path

from geomopt.cli import preset_cli
from geomopt.diffusion import SCORE_PRESETS, ScoreConfig, train_scores
from geomopt.manifolds import MANIFOLDS

ALL = tuple(MANIFOLDS)


@dataclasses.dataclass(frozen=True)
class Config:
    manifolds: tuple[str, ...] = ALL
    """Manifolds to train on (circle sphere torus twin_peaks swiss_roll two_moons)."""
    score: ScoreConfig = SCORE_PRESETS["quick"][1]
    """Data, network, training and sampling settings (its `manifold` field is ignored)."""
    root: Path = Path("results")
    """Results root; models go to <root>/gfm/scores/<manifold>/."""
    overwrite: bool = False
    """Replace a saved model trained with different settings."""
    retrain: bool = False
    """Train even when a model with the same settings is saved."""


PRESETS = {
    name: (desc, Config(score=cfg, manifolds=("circle", "torus") if name == "smoke" else ALL))
    for name, (desc, cfg) in SCORE_PRESETS.items()
}


def main(cfg: Config) -> None:
    rows = train_scores(
        cfg.manifolds, cfg.score, root=cfg.root, overwrite=cfg.overwrite, retrain=cfg.retrain
    )
    print(f"{'manifold':12s} {'loss':>8s} {'sample dist':>12s} {'data dist':>10s} {'train s':>8s}")
    for r in rows:
        print(
            f"{r['manifold']:12s} {r['final_loss']:8.4f} {r['sample_mean_distance']:12.4f} "
            f"{r['data_mean_distance']:10.4f} {r['train_seconds']:8.1f}"
            + ("  (loaded)" if r["loaded"] else "")
        )


if __name__ == "__main__":
    sys.exit(main(preset_cli(PRESETS, default="quick", description=__doc__)))
