"""Registers ``gfm/train_score``: a denoiser per manifold and the quality of its PF-ODE samples."""

import json
from pathlib import Path

import numpy as np

from geomopt import plotting
from geomopt.diffusion import SCORE_PRESETS, train_scores
from geomopt.manifolds import MANIFOLDS, get_manifold
from geomopt.reproduce import Experiment


def run(preset: str, root: Path, overwrite: bool) -> None:
    # Training is deterministic given the settings, so a model saved with the same settings
    # (e.g. trained on the fly by another gfm experiment of this reproduction) is reused.
    train_scores(tuple(MANIFOLDS), SCORE_PRESETS[preset][1], root=root, overwrite=overwrite)


def plot(root: Path, figures_dir: Path) -> list[Path]:
    """PF-ODE samples of each manifold's denoiser over its clean surface (from saved runs)."""
    import jax

    scores = Path(root) / "gfm" / "scores"
    names = [n for n in MANIFOLDS if (scores / n / "samples.npy").exists()]
    if not names:
        return []
    fig, axes = plotting.figure(ncols=3, nrows=2, width=3.0, height=2.8)
    for ax in axes.flat[len(names) :]:
        ax.set_axis_off()
    for i, name in enumerate(names[:6]):
        m = get_manifold(name)
        samples = np.load(scores / name / "samples.npy")
        summary = json.loads((scores / name / "summary.json").read_text())
        ref = np.asarray(m.sample(jax.random.key(0), 2000, noise=0.0))
        ax = axes.flat[i]
        if m.ambient_dim == 3:
            ax.remove()
            ax = fig.add_subplot(2, 3, i + 1, projection="3d")
            ax.scatter(*ref.T, s=0.5, color="0.75", alpha=0.4)
            ax.scatter(*samples.T, s=1.0, color=plotting.color("gfm"), alpha=0.6)
            ax.set_box_aspect(np.ptp(ref, axis=0))
            if name == "swiss_roll":
                ax.view_init(elev=15, azim=-75)  # look along the roll's axis (y)
            ax.set_axis_off()
        else:
            ax.scatter(*ref.T, s=0.5, color="0.75")
            ax.scatter(*samples.T, s=1.0, color=plotting.color("gfm"), alpha=0.6)
            ax.set_aspect("equal")
        ax.set_title(f"{name}: mean dist {summary['sample_mean_distance']:.3f}", fontsize=8)
    path = Path(figures_dir) / "gfm_score_samples.png"
    plotting.save(fig, path)
    return [path]


EXPERIMENTS = [
    Experiment(
        name="gfm/train_score",
        description="EDM denoiser per manifold; mean distance of its PF-ODE samples",
        run=run,
        plot=plot,
        command="uv run experiments/gfm/train_score.py",
    )
]
