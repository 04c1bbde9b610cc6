"""Test accuracy and generalization gap of canonized / unsorted / group-averaged / DeepSets models
vs the point dimension d and vs the training-set size (the data-scarcity table).

    uv run experiments/canon/classify.py smoke|quick|paper [--root results] [--field value]

The work happens in :mod:`geomopt.canon` (``run_classify`` / ``plot_classify``).
"""

import dataclasses
from pathlib import Path

from geomopt.canon._classify import ClassifyConfig, TrainConfig, plot_classify, run_classify
from geomopt.canon._models import ModelConfig
from geomopt.cli import preset_cli


@dataclasses.dataclass(frozen=True)
class Config:
    sweep: ClassifyConfig = ClassifyConfig()
    """The sweep settings."""
    root: Path = Path("results")
    """Results root; the run goes to <root>/canon/classify/<name>."""
    overwrite: bool = True
    """Replace an existing run of the same name."""
    figure: Path | None = None
    """Also write the figure here (e.g. experiments/canon/figures/classify.png)."""


_TINY = TrainConfig(steps=150, batch=32, model=ModelConfig(width=32, n_blocks=1, n_perms=4))

PRESETS = {
    "smoke": (
        "seconds",
        Config(ClassifyConfig(kinds=("hilbert", "deepsets"), dims=(2,), fractions=(1.0,),
                              fraction_dim=2, n_train=16, n_test=16, n_points=8, n_classes=2,
                              n_seeds=2, train=dataclasses.replace(_TINY, steps=5),
                              name="smoke")),
    ),
    "quick": (
        "CPU, about a minute: 4 models, d in {2, 4}, fractions 1 and 1/4, 2 seeds, 150 steps",
        Config(ClassifyConfig(kinds=("hilbert", "unsorted", "group_avg", "deepsets"),
                              dims=(2, 4), fractions=(1.0, 0.25), fraction_dim=2, n_train=128,
                              n_test=128, n_points=16, n_classes=4, n_seeds=2, train=_TINY,
                              name="quick")),
    ),
    "paper": (
        "official recipe (width 256, batch 256, 5 seeds, fractions 1..1/8), d = 2..8 (GPU)",
        Config(ClassifyConfig(kinds=("hilbert", "lex", "morton", "unsorted", "group_avg",
                                     "deepsets"),
                              dims=(2, 3, 4, 6, 8), fractions=(1.0, 0.5, 0.25, 0.125),
                              n_train=4096, n_test=1024, n_points=256, n_classes=10, n_seeds=5,
                              train=TrainConfig(steps=1600, batch=256,
                                                model=ModelConfig(width=256, n_blocks=3)),
                              name="paper")),
    ),
}  # fmt: skip

if __name__ == "__main__":
    cfg = preset_cli(PRESETS, default="quick", description=__doc__)
    path = run_classify(cfg.sweep, cfg.root, overwrite=cfg.overwrite)
    print(path)
    if cfg.figure is not None:
        print(plot_classify(path, cfg.figure))
