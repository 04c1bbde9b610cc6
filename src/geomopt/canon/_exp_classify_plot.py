"""The figure of a ``canon/classify`` run (:mod:`geomopt.canon.exp_classify`): the styles of the
model kinds, the rows averaged over data seeds, and the accuracy / gap sweeps (:func:`draw_sweep`,
which ``canon/modelnet`` shares) drawn into ``classify.png`` (:func:`plot`).

Module-level imports are light (no JAX, no matplotlib).
"""

from __future__ import annotations

from pathlib import Path

from geomopt.canon._exp_classify_report import CONTRAST, per_data_seed, slopes_per_data_seed
from geomopt.experiment import figure_path

LABELS = {
    "lex": "lex MLP",
    "hilbert": "Hilbert MLP",
    "morton": "Morton MLP",
    "unsorted": "unsorted MLP",
    "perm_sample_avg": "MLP averaged over K random permutations",
    "deepsets": "DeepSets",
    "transformer_lex": "transformer, lex",
    "transformer_hilbert": "transformer, Hilbert",
    "transformer_morton": "transformer, Morton",
    "transformer_random": "transformer, random",
}
STYLES = {
    "morton": ("#8c564b", "-"),
    "unsorted": ("#7f7f7f", "-"),
    "perm_sample_avg": ("#9467bd", "-"),
    "deepsets": ("#2ca02c", "--"),
    "transformer_lex": ("#1f77b4", ":"),
    "transformer_hilbert": ("#d62728", ":"),
    "transformer_morton": ("#17becf", ":"),
    "transformer_random": ("#7f7f7f", ":"),
}


def style(kind: str) -> dict:
    from geomopt import plotting

    c, ls = STYLES.get(kind, (plotting.color(kind), "-"))
    return dict(color=c, linestyle=ls, marker="o", ms=3, capsize=2, label=LABELS.get(kind, kind))


def fraction_label(f: float) -> str:
    return "1" if f == 1 else f"1/{round(1 / f)}"


def aggregate(rows) -> list[dict]:
    """Rows averaged over data seeds: per (kind, d, stride) the mean over data seeds of each
    data set's model-seed mean, with ``*_std`` the spread over data seeds (over model seeds when
    there is one data set)."""
    import numpy as np

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["d"], r["stride"]), []).append(r)
    out = []
    for (kind, d, stride), rs in groups.items():
        row = dict(kind=kind, d=d, stride=stride, fraction=1.0 / stride)
        for m in ("test_acc", "gap", "train_acc"):
            if len(rs) == 1:
                row[m + "_mean"], row[m + "_std"] = rs[0][m + "_mean"], rs[0][m + "_std"]
            else:
                v = np.array([r[m + "_mean"] for r in rs])
                row[m + "_mean"], row[m + "_std"] = float(v.mean()), float(v.std(ddof=1))
        out.append(row)
    return out


def draw_sweep(rows, kinds, x_key, axes, *, xs_ticks=None, log2=False) -> None:
    """Test accuracy (``axes[0]``) and gap (``axes[1]``) vs ``x_key``, mean +- std."""
    for kind in kinds:
        rs = sorted((r for r in rows if r["kind"] == kind), key=lambda r: r[x_key])
        if not rs:
            continue
        xs = [r[x_key] for r in rs]
        for ax, m in zip(axes, ("test_acc", "gap"), strict=True):
            ax.errorbar(
                xs, [r[m + "_mean"] for r in rs], yerr=[r[m + "_std"] for r in rs], **style(kind)
            )
    for ax, lab in zip(axes, ("test accuracy", "gap (train - test accuracy)"), strict=True):
        ax.set_ylabel(lab)
        if log2:
            ax.set_xscale("log", base=2)
        if xs_ticks is not None:
            ax.set_xticks(xs_ticks)
            ax.set_xticklabels(
                [fraction_label(t) if log2 else str(t) for t in xs_ticks], minor=False
            )
            ax.minorticks_off()


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``classify.png``: accuracy and gap vs d (full data) and vs training fraction (largest d),
    means over data seeds with their spread; the contrast per data seed."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    rec = read_run(run_dir)
    cfg = rec.config_values
    rows = aggregate(rec.metrics)
    kinds = [k for k in cfg["kinds"] if any(r["kind"] == k for r in rows)]
    dims = sorted({r["d"] for r in rows})
    fig, axes = plotting.figure(3, 2, width=4.0, height=2.8)
    full = [r for r in rows if r["stride"] == 1]
    draw_sweep(full, kinds, "d", axes[:, 0], xs_ticks=dims)
    axes[1, 0].set_xlabel("point dimension d (full training set)")
    dmax = max(dims)
    at = [r for r in rows if r["d"] == dmax]
    fracs = sorted({r["fraction"] for r in at})
    draw_sweep(at, kinds, "fraction", axes[:, 1], xs_ticks=fracs, log2=True)
    axes[1, 1].set_xlabel(f"training fraction (d = {dmax})")
    head = rec.headline
    # right column: per data seed, the lex - Hilbert gap difference vs d, and the slopes
    ax, bx = axes[0, 2], axes[1, 2]
    if all(k in kinds for k in CONTRAST) and len(dims) > 1:
        lex = {d: per_data_seed(rec.metrics, "lex", d, 1, "gap") for d in dims}
        hil = {d: per_data_seed(rec.metrics, "hilbert", d, 1, "gap") for d in dims}
        seeds = sorted(set.intersection(*(set(lex[d]) & set(hil[d]) for d in dims)))
        for s in seeds:
            ax.plot(dims, [lex[d][s] - hil[d][s] for d in dims], "o-", ms=3, lw=1, alpha=0.7,
                    label=f"data seed {s}")  # fmt: skip
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(dims)
        ax.set_xlabel("d")
        ax.set_ylabel("gap of lex - gap of Hilbert")
        ax.legend(fontsize=6)
        name = "contrast/gap_slope/lex_minus_hilbert"
        m, lo, hi = (float(head.get(name + x, np.nan)) for x in ("", "/ci_lo", "/ci_hi"))
        per = [float(v) for v in slopes_per_data_seed(rec.metrics, "lex", dims, 1, "gap").values()]
        per_h = slopes_per_data_seed(rec.metrics, "hilbert", dims, 1, "gap")
        diffs = [a - b for a, b in zip(per, per_h.values(), strict=True)]
        bx.plot(np.zeros(len(diffs)), diffs, "o", color="0.4", ms=4, label="per data seed")
        bx.errorbar([0.3], [m], yerr=[[m - lo], [hi - m]], fmt="s", color="k", capsize=3,
                    label="mean, 95 % CI")  # fmt: skip
        bx.axhline(0, color="k", lw=0.6)
        bx.set_xlim(-0.5, 0.8)
        bx.set_xticks([])
        bx.set_ylabel("gap slope: lex - Hilbert (per unit d)")
        bx.legend(fontsize=6)
    else:
        ax.set_axis_off()
        bx.set_axis_off()
    base = cfg.get("base_dim", 0)
    task = cfg.get("task", "shapes")
    what = (
        "sklearn digits as 2-D point clouds" if task == "digits"
        else f"{cfg['n_classes']} classes of k = {cfg['k']} shape families (deform "
        f"{cfg['deform']:g}" + (f", drawn in R^{base} and rotated into R^d" if base else "") + ")"
    )  # fmt: skip
    fig.suptitle(
        f"{what}, {cfg['n_points']} points, {cfg['n_train']} training clouds at fraction 1; "
        f"{cfg.get('n_data_seeds', 1)} data sets x {cfg['n_seeds']} model seeds"
    )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels = [f"{lab} (gap slope {head['gap_slope/' + k]:+.3f}/d)" if "gap_slope/" + k in head
              else lab for lab, k in zip(labels, kinds, strict=True)]  # fmt: skip
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return [plotting.save(fig, figure_path(run_dir, out, "classify"))]
