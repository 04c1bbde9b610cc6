"""``canon/classify``: does the canonization hierarchy show in classification? A sweep over the
point dimension d and the training fraction, replicated over data sets.

    uv run experiments/canon/classify.py [smoke|quick|paper|transformer] [--field value ...]

Classes are shape families of intrinsic dimension ``k`` embedded in ``R^d``
(:func:`geomopt.canon._data.shape_family_clouds`: a template curve per class under a k-parameter
smooth deformation, points in random order), or (``task="digits"``) sklearn's handwritten digits
as 2-D point clouds. Models are trained with the official recipe (``geomopt.canon._classify``) on
every ``stride``-th training cloud.

The pre-stated test of the paper's claim (lex sorting's covering number grows exponentially in d,
Hilbert sorting's polynomially, so lex's generalization gap should grow faster in d): the
**contrast** ``slope_d(gap of lex) - slope_d(gap of Hilbert)`` at the full training set, where
gap = train accuracy - test accuracy. Each data seed draws a new task (templates, deformation
modes, frame and clouds) and trains ``n_seeds`` models per kind on it; the data seed is the unit
of replication: per data seed the gaps are averaged over model seeds, the slope in d is fitted,
and the contrast's 95 % t-interval is taken over data seeds. Secondary contrasts: the same at the
scarcest fraction, and the slope of test accuracy at the scarcest fraction. The headline also
states the smallest contrast the design detects with 80 % power (from the observed spread).

Module-level imports are light (no JAX): the numerics are imported inside :func:`run`/:func:`plot`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.canon._checks import check_train
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig, TrainConfig
from geomopt.checks import (
    check_ints,
    check_names,
    check_nonnegative,
    check_one_of,
    check_tuples,
)
from geomopt.experiment import Experiment, Run, figure_path


@dataclasses.dataclass(frozen=True)
class ClassifyConfig:
    """Generalization of canonized / unsorted / averaged / invariant models vs d and data size.

    The quick preset is the replicated contrast (see the module docstring):
    ``uv run experiments/canon/classify.py``. Paper-scale launch (a GPU):
    ``uv run experiments/canon/classify.py paper``.
    """

    kinds: tuple[str, ...] = ("lex", "hilbert")
    """Models compared (any of `geomopt.canon.MODEL_KINDS`); the contrast needs lex and hilbert."""
    task: Literal["shapes", "digits"] = "shapes"
    """shapes: synthetic shape families in R^d; digits: sklearn's 8x8 digits as 2-D point clouds
    (real data, shipped with scikit-learn; dims must be (2,))."""
    dims: tuple[int, ...] = (2, 4, 8, 12)
    """Point dimensions d of the sweep."""
    strides: tuple[int, ...] = (1, 2, 4, 8)
    """Train on every stride-th cloud: training fractions 1/stride (official 1, 1/2, 1/4, 1/8)."""
    k: int = 2
    """Intrinsic dimension of each class's shape family (deformation parameters)."""
    n_train: int = 256
    """Training clouds at fraction 1."""
    n_test: int = 256
    """Test clouds."""
    n_points: int = 256
    """Points per cloud (official covering setting 256; official classification 1024)."""
    n_classes: int = 10
    """Classes (one template shape each; >= 2; digits: 10)."""
    deform: float = 0.3
    """Amplitude of the k-parameter deformation (larger: classes overlap more)."""
    base_dim: int = 2
    """0: class templates drawn in R^d (their spread grows with d, so classes separate more
    easily at larger d). > 0: drawn in R^base_dim and rotated into every R^d by a random
    orthonormal frame, so class separability does not change with d and only the ambient
    coordinates do (every d must be >= base_dim)."""
    noise: float = 0.01
    """Standard deviation of i.i.d. point noise (0: exactly k-dimensional families)."""
    n_seeds: int = 3
    """Model seeds per data set and setting (official 5), trained together (vmapped)."""
    n_data_seeds: int = 5
    """Data sets (the unit of replication): each draws new templates, modes, frame and clouds."""
    train: TrainConfig = TrainConfig(
        epochs=60, batch=16, equal_steps=True, model=ModelConfig(mlp_dims=(128, 64, 32))
    )
    """Training recipe and architecture: the official per-order settings, widths halved
    (official 256 / 128 / 64) to fit the quick preset's budget on a CPU."""
    data_seed: int = 0
    """First data seed; the data sets are data_seed .. data_seed + n_data_seeds - 1."""


CLASS_SEED = 1234
"""Templates, modes and frame of data seed s come from ``CLASS_SEED + s``."""


def validate(cfg: ClassifyConfig) -> None:
    check_names(cfg, "kinds", MODEL_KINDS)
    check_one_of(cfg, "task", ("shapes", "digits"))
    check_tuples(cfg, "dims", "strides")
    check_ints(cfg, "dims", "strides", "k", "n_train", "n_test", "n_points", "n_seeds",
               "n_data_seeds")  # fmt: skip
    check_ints(cfg, "n_classes", minimum=2)
    check_ints(cfg, "base_dim", "data_seed", minimum=0)
    check_nonnegative(cfg, "deform", "noise")
    check_train(cfg.train)
    if cfg.task == "digits":
        if cfg.dims != (2,):
            raise ValueError(f"dims={cfg.dims!r}: expected (2,) for task='digits' (2-D images)")
        if cfg.n_classes != 10:
            raise ValueError(f"n_classes={cfg.n_classes!r}: expected 10 for task='digits'")
        if cfg.n_train + cfg.n_test > DIGITS:
            raise ValueError(
                f"n_train + n_test = {cfg.n_train + cfg.n_test}: expected at most the {DIGITS} "
                "images of sklearn's digits"
            )
    elif cfg.base_dim > min(cfg.dims):
        raise ValueError(
            f"base_dim={cfg.base_dim!r}: expected at most the smallest d in dims={cfg.dims}"
        )
    smallest = -(-cfg.n_train // max(cfg.strides))
    if smallest < cfg.train.batch:
        raise ValueError(
            f"n_train={cfg.n_train!r}: at stride {max(cfg.strides)} it leaves {smallest} clouds, "
            f"fewer than one batch of {cfg.train.batch}; expected n_train >= "
            f"{cfg.train.batch * max(cfg.strides)}"
        )
    window = cfg.train.model.tf_window
    if any(k.startswith("transformer_") for k in cfg.kinds) and cfg.n_points % window:
        raise ValueError(
            f"train.model.tf_window={window!r}: expected a divisor of n_points={cfg.n_points}"
        )


DIGITS = 1797
"""Images in sklearn's digits."""


def stats(values) -> tuple[float, float]:
    """Mean and standard deviation with ddof 1 (0 for one seed) -- the official reduction."""
    import numpy as np

    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def loss_change(curve) -> float:
    """Relative change of the mean training loss from the third to the last fifth of the epochs
    (``nan`` below 5 epochs): near 0 where the loss has plateaued."""
    import numpy as np

    c = np.asarray(curve, float)
    n = c.size // 5
    if n < 1:
        return float("nan")
    before, last = c[-3 * n : -2 * n].mean(), c[-n:].mean()
    return float((before - last) / abs(before)) if before else float("nan")


def sweep_rows(run: Run, bar, *, kind, results, strides, **extra) -> list[dict]:
    """Log one metrics row per stride of ``fit``'s results; returns the rows."""
    rows = []
    for stride, r in zip(strides, results, strict=True):
        row = dict(kind=kind, stride=stride, fraction=1.0 / stride, n_train=r["n_train"], **extra)
        for key in ("train_acc", "train_acc_running", "test_acc", "gap", "loss"):
            row[key] = [float(v) for v in r[key]]
            row[key + "_mean"], row[key + "_std"] = stats(r[key])
        row["loss_change"] = [loss_change(c) for c in r["loss_curve"]]
        rows.append(row)
    run.log_rows(rows)
    return rows


def gap_slope(rows, dims) -> tuple[float, float]:
    """Least-squares slope of the per-seed gap vs d (full training set) and its standard error
    (treats every seed as independent: one data set's view; :func:`summarise` replicates)."""
    import numpy as np

    xs, ys = [], []
    for r in rows:
        if r["stride"] == 1 and r["d"] in dims:
            xs += [r["d"]] * len(r["gap"])
            ys += r["gap"]
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(set(xs.tolist())) < 2:
        return float("nan"), float("nan")
    a = np.stack([xs, np.ones_like(xs)], 1)
    coef, res, *_ = np.linalg.lstsq(a, ys, rcond=None)
    dof = max(len(xs) - 2, 1)
    sigma2 = float(((a @ coef - ys) ** 2).sum()) / dof
    se = float(np.sqrt(sigma2 * np.linalg.inv(a.T @ a)[0, 0]))
    return float(coef[0]), se


def data_set(cfg: ClassifyConfig, data_seed: int, d: int):
    """``(x_train, y_train, x_test, y_test)`` of data seed ``data_seed`` at dimension ``d``."""
    import numpy as np

    n = cfg.n_train + cfg.n_test
    if cfg.task == "digits":
        from geomopt.canon._digits import digits_clouds

        x, y = digits_clouds(cfg.n_points, seed=data_seed)
        pick = np.random.default_rng([data_seed, 7]).permutation(len(y))[:n]
        x, y = x[pick], y[pick]
    else:
        from geomopt.canon._data import shape_family_clouds

        x, y = shape_family_clouds(
            n, cfg.n_points, d, cfg.n_classes, k=cfg.k, seed=data_seed + 1000 * d,
            class_seed=CLASS_SEED + data_seed, deform=cfg.deform, noise=cfg.noise,
            base_dim=cfg.base_dim,
        )  # fmt: skip
    return x[: cfg.n_train], y[: cfg.n_train], x[cfg.n_train :], y[cfg.n_train :]


def data_seeds(cfg: ClassifyConfig) -> list[int]:
    return list(range(cfg.data_seed, cfg.data_seed + cfg.n_data_seeds))


def run(cfg: ClassifyConfig, run: Run) -> dict[str, float]:
    from geomopt.canon._classify import fit

    total = cfg.n_data_seeds * len(cfg.dims) * len(cfg.kinds) * len(cfg.strides)
    bar = run.progress(total=total, desc="classify", unit="fit")
    rows: list[dict] = []
    for s in data_seeds(cfg):
        seeds = [1000 * s + i for i in range(cfg.n_seeds)]  # data seed 0: model seeds 0 .. n-1
        for d in cfg.dims:
            xtr, ytr, xte, yte = data_set(cfg, s, d)
            for kind in cfg.kinds:
                bar.set_description(f"data seed {s}, d={d}, {kind}, {cfg.n_seeds} model seeds")
                res = fit(
                    kind, xtr, ytr, xte, yte, cfg.n_classes, cfg.train, seeds,
                    strides=cfg.strides, data_seed=s, on_stride=lambda _: bar.update(1),
                )  # fmt: skip
                rows += sweep_rows(
                    run, bar, kind=kind, results=res, strides=cfg.strides, d=d, data_seed=s
                )
    bar.close()
    out = summarise(rows, cfg.kinds, cfg.dims, max(cfg.strides))
    table = contrast_table(rows, cfg.kinds, cfg.dims, max(cfg.strides), out)
    run.file("table.md").write_text(table + "\n")
    run.print(table)
    for key, v in out.items():
        if v != v:
            run.explain_nan(key, nan_reason(key, cfg))
    return out


def nan_reason(key: str, cfg: ClassifyConfig) -> str:
    if "slope" in key and len(cfg.dims) < 2:
        return f"one d (dims={cfg.dims}): no slope in d to fit"
    if "/ci_" in key or "mde" in key:
        return f"n_data_seeds={cfg.n_data_seeds}: an interval needs at least 2 data seeds"
    return "no finite value for this setting"


CONTRAST = ("lex", "hilbert")
"""The pre-stated contrast: lex minus Hilbert."""


def per_data_seed(rows, kind, d, stride, key) -> dict[int, float]:
    """Per data seed: ``key`` averaged over the model seeds of the (kind, d, stride) row."""
    return {
        r.get("data_seed", 0): float(r[key + "_mean"])
        for r in rows
        if r["kind"] == kind and r["d"] == d and r["stride"] == stride
    }


def slopes_per_data_seed(rows, kind, dims, stride, key) -> dict[int, float]:
    """Per data seed: the least-squares slope in d of ``key`` (model-seed mean) at ``stride``."""
    from geomopt.stats import ols_slope

    by_d = [per_data_seed(rows, kind, d, stride, key) for d in dims]
    common = sorted(set.intersection(*(set(b) for b in by_d)))
    return {s: ols_slope(list(dims), [b[s] for b in by_d]) for s in common}


def _ci_keys(out: dict, name: str, values) -> None:
    """``name`` = mean over replications, ``name/ci_lo`` / ``name/ci_hi`` its 95 % t-interval."""
    from geomopt.stats import mean_ci

    vals = [v for v in values if v == v]
    if not vals:
        out[name] = out[name + "/ci_lo"] = out[name + "/ci_hi"] = float("nan")
        return
    out[name], out[name + "/ci_lo"], out[name + "/ci_hi"] = mean_ci(vals)


def _difference(a: dict, b: dict) -> list[float]:
    return [a[s] - b[s] for s in sorted(set(a) & set(b))]


def summarise(rows, kinds, dims, scarce: int) -> dict[str, float]:
    """The headline: per kind and d, accuracy and gap averaged over data seeds; per kind, the gap
    slope in d with its interval over data seeds; the lex-minus-Hilbert contrasts."""
    import numpy as np

    from geomopt.stats import min_detectable_effect

    out: dict[str, float] = {}
    for kind in kinds:
        for d in dims:
            for name, stride, key in (
                ("acc", 1, "test_acc"), ("gap", 1, "gap"), ("train_acc", 1, "train_acc"),
                ("gap_scarce", scarce, "gap"), ("acc_scarce", scarce, "test_acc"),
            ):  # fmt: skip
                if name.endswith("scarce") and scarce == 1:
                    continue
                v = per_data_seed(rows, kind, d, stride, key)
                out[f"{name}/{kind}/d{d}"] = float(np.mean(list(v.values()))) if v else np.nan
        if len(dims) > 1:
            slopes = slopes_per_data_seed(rows, kind, dims, 1, "gap").values()
            _ci_keys(out, f"gap_slope/{kind}", slopes)
    fits = [(t, c) for r in rows for t, c in zip(r["train_acc"], r["loss_change"], strict=True)]
    if fits:
        t, c = np.asarray(fits, float).T
        out["fits/share_train_acc_ge_0.95"] = float((t >= 0.95).mean())
        out["fits/min_train_acc"] = float(t.min())
        below = c[t < 0.95]
        out["fits/max_loss_change_below_0.95"] = float(np.max(np.abs(below))) if below.size else 0.0
    lex, hil = CONTRAST
    if not (lex in kinds and hil in kinds):
        return out
    out["contrast/n_data_seeds"] = float(len({r.get("data_seed", 0) for r in rows}))
    out["contrast/n_model_seeds"] = float(len(rows[0]["gap"]))
    if len(dims) > 1:
        name = "contrast/gap_slope/lex_minus_hilbert"
        diff = _difference(*(slopes_per_data_seed(rows, k, dims, 1, "gap") for k in CONTRAST))
        _ci_keys(out, name, diff)
        sd = float(np.std(diff, ddof=1)) if len(diff) > 1 else np.nan
        out[name + "/mde80"] = min_detectable_effect(sd, len(diff))
    if scarce > 1 and len(dims) > 1:
        for key, label in (("gap", "gap_slope_scarce"), ("test_acc", "acc_slope_scarce")):
            diff = _difference(
                *(slopes_per_data_seed(rows, k, dims, scarce, key) for k in CONTRAST)
            )
            _ci_keys(out, f"contrast/{label}/lex_minus_hilbert", diff)
    for d in dims:
        for key, label, stride in (("gap", "gap", 1), ("test_acc", "acc_scarce", scarce)):
            if label == "acc_scarce" and scarce == 1:
                continue
            diff = _difference(*(per_data_seed(rows, k, d, stride, key) for k in CONTRAST))
            _ci_keys(out, f"contrast/{label}/lex_minus_hilbert/d{d}", diff)
    return out


def _fmt(out: dict, name: str, digits: int = 3) -> str:
    m, lo, hi = (out.get(name + sfx, float("nan")) for sfx in ("", "/ci_lo", "/ci_hi"))
    if lo != lo:
        return f"{m:+.{digits}f}"
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def contrast_table(rows, kinds, dims, scarce: int, out: dict) -> str:
    """Markdown: per kind and d the accuracies and gaps (means over data seeds), then the
    contrasts with their 95 % intervals over data seeds."""
    lines = [
        "| model | d | train acc. | test acc. | gap | gap at 1/" + str(scarce)
        + " | test acc. at 1/" + str(scarce) + " |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for kind in kinds:
        for d in dims:
            vals = [out.get(f"{n}/{kind}/d{d}", float("nan"))
                    for n in ("train_acc", "acc", "gap", "gap_scarce", "acc_scarce")]  # fmt: skip
            lines.append(f"| {kind} | {d} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    lines += ["", "| quantity (lex minus Hilbert, 95 % CI over data seeds) | value |", "|---|---:|"]
    for label in ("gap_slope", "gap_slope_scarce", "acc_slope_scarce"):
        key = f"contrast/{label}/lex_minus_hilbert"
        if key in out:
            lines.append(f"| {key.split('/')[1]} (per unit d) | {_fmt(out, key, 4)} |")
    for d in dims:
        for lab in ("gap", "acc_scarce"):
            key = f"contrast/{lab}/lex_minus_hilbert/d{d}"
            if key in out:
                lines.append(f"| {lab}, d = {d} | {_fmt(out, key)} |")
    if "contrast/gap_slope/lex_minus_hilbert/mde80" in out:
        lines.append(
            f"| smallest gap-slope contrast detected with 80 % power | "
            f"{out['contrast/gap_slope/lex_minus_hilbert/mde80']:.4f} |"
        )
    if "contrast/n_data_seeds" in out:
        lines.append(
            f"| data seeds x model seeds | {int(out['contrast/n_data_seeds'])} x "
            f"{int(out['contrast/n_model_seeds'])} |"
        )
    for kind in kinds if len(dims) > 1 else ():
        lines.append(f"| gap slope of {kind} (per unit d) | {_fmt(out, f'gap_slope/{kind}', 4)} |")
    return "\n".join(lines)


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


_SMOKE_TRAIN = TrainConfig(
    epochs=1,
    batch=8,
    model=ModelConfig(
        mlp_dims=(16,), n_bands=1, n_perms=2, deepsets_width=8, deepsets_depth=1, tf_dim=8,
        tf_heads=2, tf_depth=1, tf_window=4,
    ),
    fast_compile=True,
)  # fmt: skip
ALL_KINDS = ("lex", "hilbert", "morton", "unsorted", "perm_sample_avg", "deepsets")
TRANSFORMERS = (
    "transformer_lex",
    "transformer_hilbert",
    "transformer_morton",
    "transformer_random",
)
_TF_TRAIN = TrainConfig(
    epochs=20, batch=32, model=ModelConfig(mlp_dims=(128, 64, 32), tf_dim=32, tf_window=8)
)

EXPERIMENT = Experiment(
    name="canon/classify",
    description="accuracy and generalization gap of canonized / unsorted / averaged / invariant "
    "models on shape families of intrinsic dimension k in R^d, vs d and training fraction",
    presets={
        "smoke": ClassifyConfig(
            kinds=ALL_KINDS,
            dims=(2, 3),
            strides=(1, 2),
            n_train=16,
            n_test=16,
            n_points=8,
            n_classes=2,
            n_seeds=2,
            n_data_seeds=2,
            train=dataclasses.replace(_SMOKE_TRAIN, epochs=5, equal_steps=True),
        ),
        "quick": ClassifyConfig(),
        "digits": ClassifyConfig(
            kinds=ALL_KINDS, task="digits", dims=(2,), n_points=64, n_train=512, n_test=512
        ),
        "transformer": ClassifyConfig(
            kinds=TRANSFORMERS + ("deepsets",),
            dims=(2, 3, 4, 6),
            n_train=512,
            n_points=32,
            n_classes=4,
            base_dim=0,
            n_data_seeds=1,
            train=_TF_TRAIN,
        ),
        "paper": ClassifyConfig(
            kinds=ALL_KINDS + TRANSFORMERS,
            dims=(2, 4, 6, 8, 10, 12, 16),
            n_train=4096,
            n_test=1024,
            n_points=256,
            n_seeds=5,
            n_data_seeds=10,
            train=TrainConfig(
                epochs=100, batch=256, equal_steps=True, model=ModelConfig(tf_dim=96, tf_window=32)
            ),
        ),
    },  # fmt: skip
    notes={
        "smoke": "tiny sizes, every model, d = 2, 3, 2 data sets, 5 epochs, compiled for speed of "
        "compilation (seconds)",
        "quick": "the replicated contrast: lex and Hilbert MLPs (official per-order settings, "
        "widths 128/64/32), d = 2/4/8/12, fractions 1..1/8 at equal steps, 5 data sets x 3 "
        "model seeds, 256 clouds of 256 points, 60 epochs of batch 16 (CPU, about an hour; see "
        "README_classify.md)",
        "digits": "sklearn's digits as 2-D point clouds of 64 points, every model, 5 data sets "
        "x 3 model seeds",
        "transformer": "the serialized transformer (lex / Hilbert / Morton / random "
        "serialization) and DeepSets on the earlier small task (32 points, 4 classes, one data "
        "set)",
        "paper": "official recipe (batch 256, 100 epochs, widths 256/128/64), 256 points, 4096 "
        "clouds, d = 2..16, all models incl. the serialized transformers, 10 data sets x 5 model "
        "seeds (a GPU)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "contrast/gap_slope/lex_minus_hilbert",
        "contrast/gap_slope/lex_minus_hilbert/ci_lo",
        "contrast/gap_slope/lex_minus_hilbert/ci_hi",
        "contrast/n_data_seeds",
        "gap_slope/lex",
        "gap_slope/hilbert",
    ),
    seconds={"smoke": 25.0, "quick": 3430.0, "digits": 940.0},
)
