"""Figures of the GFM experiments, from saved run folders only.

uv run experiments/gfm/plot.py --root results --out experiments/gfm/figures
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import tyro

from geomopt.gfm.experiments import load_paths
from geomopt.plotting import color as shared_color
from geomopt.plotting import figure, save
from geomopt.runs import load_run

METHOD_LABEL = {
    "gfm": "GFM (LM)",
    "gfm_adam": "GFM (Adam, official)",
    "linear": "linear",
    "rbf": "RBF metric",
    "land": "LAND metric",
    "score": "score-Jacobian",
    "stein": "Stein",
    "density": "1/p conformal",
}
SHOWN_3D = ("gfm", "linear", "rbf", "stein")
COLORS = {
    "gfm": "#d62728",
    "gfm_adam": "#ff7f0e",
    "linear": "#7f7f7f",
    "rbf": "#9467bd",
    "land": "#8c564b",
    "score": "#1f77b4",
    "stein": "#2ca02c",
    "density": "#bcbd22",
}


def color(name: str) -> str:
    """Fixed colours for the GFM methods, the shared palette otherwise."""
    return COLORS.get(name, shared_color(name))


def _torus_surface(ax):
    th, ph = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, 2 * np.pi, 49))
    ring = 1.2 + 0.4 * np.cos(th)
    ax.plot_wireframe(ring * np.cos(ph), ring * np.sin(ph), 0.4 * np.sin(th), color="0.8",
                      linewidth=0.3)  # fmt: skip


def _twin_peaks_surface(ax):
    u, v = np.meshgrid(np.linspace(-1, 1, 25), np.linspace(-1, 1, 25))
    ax.plot_wireframe(u, v, 0.5 * np.exp(-(u**2 + v**2) / 0.5), color="0.8", linewidth=0.3)


SURFACES = {"torus": _torus_surface, "twin_peaks": _twin_peaks_surface}


def _rows_table(rows: list[dict], manifolds: list[str], methods: list[str]) -> str:
    lines = [
        "| manifold | method | manifold error mean | max | prior length | EL residual | "
        "iterations | wall time / pair (s) | converged |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for man in manifolds:
        for meth in methods:
            sel = [r for r in rows if r["manifold"] == man and r["method"] == meth]
            if not sel:
                continue

            def mean(k, sel=sel):
                v = np.array([r[k] for r in sel], float)
                v = v[np.isfinite(v)]
                return float(v.mean()) if len(v) else float("nan")

            lines.append(
                f"| {man} | {METHOD_LABEL.get(meth, meth)} | {mean('manifold_error_mean'):.4f} | "
                f"{mean('manifold_error_max'):.4f} | {mean('prior_length'):.3f} | "
                f"{mean('el_residual'):.2e} | {mean('iterations'):.1f} | {mean('wall_time'):.3f} | "
                f"{np.mean([r['converged'] for r in sel]):.2f} |"
            )
    return "\n".join(lines) + "\n"


def plot_paths(run_dir: Path, out: Path) -> list[Path]:
    """Distance to the manifold along the path per method; 3-D paths; a Markdown table."""
    config, rows, _ = load_run(run_dir)
    arrays = load_paths(run_dir)
    manifolds = list(config["manifolds"])
    methods = [m for m in config["methods"] if any(r["method"] == m for r in rows)]
    written = []
    fig, axes = figure(len(manifolds), 1, width=3.8, height=2.8)
    for ax, man in zip(np.atleast_1d(axes).flat, manifolds, strict=True):
        for meth in methods:
            key = f"{man}/{meth}/dist"
            if key not in arrays:
                continue
            dist = arrays[key]
            t = np.linspace(0, 1, dist.shape[1])
            ax.plot(t, np.nanmean(dist, 0), color=color(meth), label=METHOD_LABEL.get(meth, meth))
        ax.set(title=man, xlabel="path time t", ylabel="distance to manifold")
        ax.set_yscale("symlog", linthresh=1e-3)
    np.atleast_1d(axes).flat[-1].legend(loc="upper right", fontsize=6)
    written.append(save(fig, out / "gfm_paths_distance.png"))
    import matplotlib.pyplot as plt

    for man in manifolds:
        if man not in SURFACES:
            continue
        fig = plt.figure(figsize=(4.2, 3.6))
        ax = fig.add_subplot(projection="3d")
        SURFACES[man](ax)
        for meth in SHOWN_3D:
            key = f"{man}/{meth}/paths"
            if key not in arrays:
                continue
            for i, p in enumerate(arrays[key][:3]):
                ax.plot(*p.T, color=color(meth), label=METHOD_LABEL[meth] if i == 0 else None,
                        linewidth=1.2)  # fmt: skip
        ax.set_title(f"{man}: paths between 3 pairs")
        ax.legend(fontsize=6, loc="upper left")
        if man == "torus":
            ax.set_zlim(-0.8, 0.8)
        written.append(save(fig, out / f"gfm_paths_{man}_3d.png"))
    table = out / "gfm_paths_table.md"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(_rows_table(rows, manifolds, methods))
    return written


def plot_sigma_sweep(run_dir: Path, out: Path) -> list[Path]:
    """Manifold error and failure rate against sigma per method."""
    config, rows, _ = load_run(run_dir)
    sigmas = sorted({r["sigma"] for r in rows})
    fig, axes = figure(2, 1, width=3.4, height=2.7)
    ax0, ax1 = axes[0]
    for meth in config["methods"]:
        sel = [[r for r in rows if r["method"] == meth and r["sigma"] == s] for s in sigmas]
        if not any(sel):
            continue
        err = [np.nanmean([r["manifold_error_mean"] if r["finite"] else np.nan for r in g])
               if g else np.nan for g in sel]  # fmt: skip
        fail = [np.mean([r["failed"] or not r["converged"] for r in g]) if g else np.nan
                for g in sel]  # fmt: skip
        ax0.plot(sigmas, err, "o-", color=color(meth), label=METHOD_LABEL.get(meth, meth))
        ax1.plot(sigmas, fail, "o-", color=color(meth), label=METHOD_LABEL.get(meth, meth))
    ax0.set(xscale="log", yscale="log", xlabel="sigma", ylabel="mean distance to manifold",
            title=f"{config['manifold']}: manifold error")  # fmt: skip
    ax1.set(xscale="log", xlabel="sigma", ylabel="fraction failed", ylim=(-0.05, 1.05),
            title="not converged, non-finite or off-manifold")  # fmt: skip
    ax1.legend(fontsize=6)
    return [save(fig, out / "gfm_sigma_sweep.png")]


def plot_torus_metrics(run_dir: Path, out: Path) -> list[Path]:
    """The least-action GFM route under each torus prior, in 3-D and as theta(t)."""
    import matplotlib.pyplot as plt

    _, rows, _ = load_run(run_dir)
    arrays = load_paths(run_dir)
    fig = plt.figure(figsize=(7.6, 3.4), layout="constrained")
    ax3 = fig.add_subplot(1, 2, 1, projection="3d")
    ax2 = fig.add_subplot(1, 2, 2)
    _torus_surface(ax3)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]
    for c, r in zip(colors, [r for r in rows if r["chosen"]], strict=False):
        p = arrays[f"a{r['alpha']:g}_b{r['beta']:g}/{r['route']}"]
        label = f"alpha={r['alpha']:g}, beta={r['beta']:g} ({r['route']})"
        ax3.plot(*p.T, color=c, linewidth=2, label=label)
        theta = np.arctan2(p[:, 2], np.hypot(p[:, 0], p[:, 1]) - 1.2)
        ax2.plot(np.linspace(0, 1, len(p)), np.unwrap(theta), color=c, label=label)
    ax3.set_zlim(-0.8, 0.8)
    ax3.set_title("GFM under three torus priors")
    ax2.set(xlabel="path time t", ylabel="poloidal angle theta",
            title="pi/2 = top, pi = inner equator")  # fmt: skip
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=6)
    return [save(fig, out / "gfm_torus_metrics.png")]


PLOTTERS = {
    "paths": plot_paths,
    "sigma_sweep": plot_sigma_sweep,
    "torus_metrics": plot_torus_metrics,
}


def plot_all(root: Path, out: Path, names=("paths", "sigma_sweep", "torus_metrics")) -> list[Path]:
    """Plot every finished run ``<root>/gfm/<name>`` among ``names``."""
    written = []
    for name in names:
        run_dir = Path(root) / "gfm" / name
        if (run_dir / "summary.json").exists():
            written += PLOTTERS[name.split("-")[0]](run_dir, Path(out))
    return written


@dataclasses.dataclass(frozen=True)
class Args:
    root: str = "results"
    """Results root holding gfm/<run>/ folders."""
    out: str = "experiments/gfm/figures"
    """Where the figures go."""


if __name__ == "__main__":
    args = tyro.cli(Args)
    for p in plot_all(Path(args.root), Path(args.out)):
        print(p)
