"""``gfm/train_score``: an EDM denoiser per manifold and the quality of its PF-ODE samples.

    uv run experiments/gfm/train_score.py [smoke|quick|paper] [--field value ...]

The denoisers are kept in ``<out>/_cache/denoiser/<key>/`` (key: manifold + :class:`DenoiserSpec`),
the same cache the other GFM experiments draw their potentials from, so a ``paths`` run with the
same spec reuses the model trained here. Module-level imports are light (no JAX).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_one_of, check_positive, nested
from geomopt.experiment import Experiment, Run, figure_path

MANIFOLD_NAMES = ("circle", "sphere", "torus", "twin_peaks", "swiss_roll", "two_moons")


@dataclasses.dataclass(frozen=True)
class DenoiserSpec:
    """The EDM denoiser and its training (defaults: the official synthetic-experiment recipe:
    128-wide MLP with 4 residual SiLU blocks, 128-dim noise embedding, Adam 1e-3, batch 2048,
    20,000 points, ~10,000 steps = 1000 epochs)."""

    width: int = 128
    """Hidden width of the residual MLP."""
    n_blocks: int = 4
    """Residual SiLU blocks."""
    embed_dim: int = 128
    """Size of the sinusoidal noise-level embedding."""
    n_data: int = 20_000
    """Training points drawn from the manifold with its default noise."""
    steps: int = 10_000
    """Adam steps."""
    batch_size: int = 2048
    """Examples per step."""
    lr: float = 1e-3
    """Adam learning rate (the peak rate under a schedule)."""
    schedule: Literal["constant", "cosine"] = "constant"
    """Learning-rate schedule: "constant" (official) or "cosine" (decayed to 0 over ``steps``)."""
    log_every: int = 500
    """Steps per jitted chunk (one loss value and progress update per chunk)."""
    n_samples: int = 2000
    """PF-ODE samples drawn to measure what the model learned."""
    seed: int = 42
    """Seed of data, initialisation, training noise and sampling (official torus: 42)."""


SMOKE_DENOISER = DenoiserSpec(
    width=32, n_blocks=2, embed_dim=16, n_data=500, steps=100, batch_size=128, lr=3e-3,
    log_every=100, n_samples=128,
)  # fmt: skip
"""A tiny net trained for a few hundred steps (seconds): exercises the pipeline, not a model."""
QUICK_DENOISER = DenoiserSpec(batch_size=1024, lr=2e-3, schedule="cosine", n_samples=1000)
"""CPU recipe: the official network (128 wide, 4 blocks), 10,000 Adam steps of batch 1024 (half
the official batch) at a peak rate of 2e-3 decayed to 0 by a cosine. About 32 s on 2 CPU cores;
its torus samples lie 1.7x the training data's distance from the surface (the official constant
rate: 2.4x at twice the batch, 70 s), within the 2x the GFM comparisons require
(experiments/gfm/README_score.md)."""


@dataclasses.dataclass(frozen=True)
class TrainScoreConfig:
    """Train (or load from the cache) one denoiser per manifold; sample its PF-ODE (EDM Heun,
    18 steps, sigma 80 -> 0.002, rho 7) and measure the samples' distance to the true manifold.

    Paper command: ``uv run experiments/gfm/train_score.py paper``."""

    manifolds: tuple[str, ...] = MANIFOLD_NAMES
    """Manifolds (geomopt.manifolds names)."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Network and training recipe."""


def validate(cfg: TrainScoreConfig) -> None:
    check_names(cfg, "manifolds", MANIFOLD_NAMES)
    validate_spec(cfg.denoiser)


def validate_spec(spec: DenoiserSpec, prefix: str = "denoiser.") -> None:
    """Raise ``ValueError`` naming the first bad field of a :class:`DenoiserSpec` (as
    ``<prefix><field>``)."""
    nested(prefix, check_ints, spec, "width", "n_blocks", "n_data", "steps", "batch_size",
                 "log_every", "n_samples")  # fmt: skip
    nested(prefix, check_ints, spec, "seed", minimum=0)
    nested(prefix, check_positive, spec, "lr")
    nested(prefix, check_one_of, spec, "schedule", ("constant", "cosine"))
    e = spec.embed_dim
    if isinstance(e, bool) or not isinstance(e, int) or e < 2 or e % 2:
        raise ValueError(f"{prefix}embed_dim={e!r}: expected an even integer >= 2 (sin and cos "
                         "features in pairs)")  # fmt: skip


def run(cfg: TrainScoreConfig, run: Run) -> dict[str, float]:
    import numpy as np

    from geomopt.gfm._potentials import trained_denoiser

    headline: dict[str, float] = {}
    samples = {}
    for name in cfg.manifolds:
        _, summary = trained_denoiser(run, name, cfg.denoiser)
        samples[name] = np.load(Path(summary["cache"]) / "samples.npy")
        run.log(manifold=name, **{k: v for k, v in summary.items() if k != "manifold"})
        run.print(
            f"{name}: loss {summary['final_loss']:.4f}, PF-ODE samples' mean distance "
            f"{summary['sample_mean_distance']:.4f} (data {summary['data_mean_distance']:.4f})"
            + (" (loaded from the cache)" if summary["loaded"] else "")
        )
        headline[f"{name}/sample_mean_distance"] = summary["sample_mean_distance"]
        headline[f"{name}/data_mean_distance"] = summary["data_mean_distance"]
        headline[f"{name}/final_loss"] = summary["final_loss"]
    run.save_arrays("samples.npz", **samples)
    return headline


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_score_samples.png``: PF-ODE samples over each clean manifold."""
    import jax
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.manifolds import get_manifold

    record = read_run(run_dir)
    rows = {r["manifold"]: r for r in record.metrics}
    with np.load(Path(run_dir) / "samples.npz") as f:
        samples = dict(f)
    names = [n for n in record.config_values["manifolds"] if n in samples]
    fig = plotting.figure(len(names), 1, width=2.6, height=2.8)[0]  # width per panel
    fig.clf()
    for i, name in enumerate(names):
        s = samples[name]
        clean = np.asarray(get_manifold(name).sample(jax.random.key(1), 3000, noise=0.0))
        title = f"{name}\nmean dist {rows[name]['sample_mean_distance']:.3f}"
        if s.shape[1] == 2:
            ax = fig.add_subplot(1, len(names), i + 1)
            ax.scatter(clean[:, 0], clean[:, 1], s=1, color="0.75", label="manifold")
            ax.scatter(s[:, 0], s[:, 1], s=2, color=plotting.color("gfm"), label="PF-ODE samples")
            ax.set_aspect("equal")
            ax.set_xlabel("x")
            ax.set_ylabel("y")
        else:
            ax = fig.add_subplot(1, len(names), i + 1, projection="3d")
            ax.scatter(*clean.T, s=0.5, color="0.75", label="manifold")
            ax.scatter(*s.T, s=1.5, color=plotting.color("gfm"), label="PF-ODE samples")
            ax.set_xlabel("x")
            ax.set_ylabel("y")
            ax.set_zlabel("z")
        ax.set_title(title, fontsize=8)
    fig.axes[0].legend(loc="upper left", bbox_to_anchor=(0.0, -0.12), markerscale=4)
    return [plotting.save(fig, figure_path(run_dir, out, "gfm_score_samples"))]


EXPERIMENT = Experiment(
    name="gfm/train_score",
    description="an EDM denoiser per manifold (cached for the GFM experiments) and its PF-ODE "
    "sample quality",
    presets={
        "smoke": TrainScoreConfig(manifolds=("circle", "torus"), denoiser=SMOKE_DENOISER),
        "quick": TrainScoreConfig(),
        "paper": TrainScoreConfig(denoiser=DenoiserSpec()),
    },
    notes={
        "smoke": "circle + torus, a tiny net for 100 steps (seconds)",
        "quick": "six manifolds, the official 128x4 net, 10,000 steps of batch 1024, cosine "
        "rate (CPU, about 35 s per manifold)",
        "paper": "six manifolds, the official 128x4 net, 10,000 steps of batch 2048 (about 70 s "
        "per manifold on an idle 2-core machine, 556-717 s at load ~6)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "torus/sample_mean_distance",
        "torus/data_mean_distance",
        "circle/sample_mean_distance",
        "twin_peaks/sample_mean_distance",
    ),
    # quick: about 35 s per manifold on an idle 2-core machine (README_score.md); paper: the
    # official recipe's 70 s of training per manifold (README_score.md), plus sampling
    seconds={"smoke": 9.6, "quick": 215.0, "paper": 480.0},
)
