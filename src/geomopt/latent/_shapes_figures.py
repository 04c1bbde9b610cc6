"""The figures of ``gfm/shapes`` (:mod:`geomopt.latent.exp_shapes`): the metrics per method and
ablation, and the decoded waypoints of one pair."""

from __future__ import annotations

from pathlib import Path

from geomopt.experiment import figure_path

LABELS = {"gfm": "GFM (LM)", "gfm_adam": "GFM (Adam)", "jacobian": "Jacobian", "stein": "Stein",
          "rbf": "RBF", "land": "LAND", "linear": "linear", "slerp": "SLERP"}  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``shapes_metrics.png`` (CD, HD, F@0.1, COV, family distance per method and ablation
    (hatched): means over seeds with their 95 % intervals) and
    ``shapes_strips.png`` (decoded waypoints of pair 0 per method)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.latent._study import error_bars

    rec = read_run(run_dir)
    table = rec.details["table"]
    methods = rec.details["methods"]
    rows = methods + rec.details.get("ablations", [])  # bars: methods, then ablations
    keys = ("CD", "HD", "F@0.1", "COV", "family_dist")
    fig, axes = plotting.figure(len(keys), 1, width=2.3 + 0.15 * max(0, len(rows) - 8),
                                height=2.8)  # fmt: skip
    x = np.arange(len(rows))
    for ax, k in zip(np.asarray(axes).flat, keys, strict=True):
        vals = [table[m][k] for m in rows]
        ax.bar(x, vals, yerr=error_bars(rec.headline, rows, k), capsize=2,
               color=[plotting.color(m.split("@")[0]) for m in rows],
               hatch=["//" if "@" in m else "" for m in rows])  # fmt: skip
        if k == "family_dist":
            for ref, ls in (("reconstruction", "--"), ("endpoints", ":")):
                ax.axhline(table[ref][k], color="k", ls=ls, lw=0.8, label=ref)
            top = np.array(vals + [table["reconstruction"][k], table["endpoints"][k]], float)
            if np.isfinite(top).any():  # room for the legend above the bars
                ax.set_ylim(0, 1.4 * np.nanmax(top))
            ax.legend(loc="upper left", fontsize=6, ncols=2)
        ax.set_xticks(x, [LABELS.get(m, m) for m in rows], rotation=60, fontsize=7)
        ax.set_title(k + (" (lower better)" if k in ("CD", "HD", "family_dist") else ""),
                     fontsize=8)  # fmt: skip
    figures = [plotting.save(fig, figure_path(run_dir, out, "shapes_metrics"))]

    with np.load(Path(run_dir) / "strips.npz") as f:
        strips = {m: f[m] for m in methods if m in f}
    k = next(iter(strips.values())).shape[0]
    fig, ax0 = plotting.figure(1, 1, width=1.1 * k, height=1.1 * len(strips))
    ax0.remove()
    for r, (m, clouds) in enumerate(strips.items()):
        for c in range(k):
            ax = fig.add_subplot(len(strips), k, r * k + c + 1, projection="3d")
            pts = clouds[c]
            if np.isfinite(pts).all():
                ax.scatter(pts[:, 0], pts[:, 1], pts[:, 2], s=0.5, c=pts[:, 2], cmap="viridis")
            ax.set_xlim(-1, 1), ax.set_ylim(-1, 1), ax.set_zlim(-1, 1)
            ax.set_xlabel("x", fontsize=4, labelpad=-14)
            ax.set_ylabel("y", fontsize=4, labelpad=-14)
            ax.set_zlabel("z", fontsize=4, labelpad=-14)
            ax.set_xticks([]), ax.set_yticks([]), ax.set_zticks([])
            if r == 0:
                ax.set_title(f"step {c}", fontsize=6)
            if c == 0:
                ax.text2D(-0.3, 0.5, LABELS.get(m, m), transform=ax.transAxes, fontsize=6,
                          rotation=90, va="center")  # fmt: skip
    figures.append(plotting.save(fig, figure_path(run_dir, out, "shapes_strips")))
    return figures
