"""``canon/classify``: can the canonization hierarchy show in classification? A sweep over the
point dimension d and the training fraction on shape families of fixed intrinsic dimension.

    uv run experiments/canon/classify.py [smoke|quick|paper] [--field value ...]

Classes are shape families of intrinsic dimension ``k`` embedded in ``R^d``
(:func:`geomopt.canon._data.shape_family_clouds`: a template curve per class under a k-parameter
smooth deformation, points in random order). Every preset compares the lex / Hilbert / Morton
canonized MLPs with the unsorted MLP, the MLP averaged over random permutations and DeepSets (and,
where listed, the serialized point transformer with each serialization), trained with the
official recipe (``geomopt.canon._classify``) on every ``stride``-th training cloud. Reported per
model, d and fraction: test accuracy and generalization gap (train - test accuracy), mean and
standard deviation (ddof 1) over seeds; and per model the least-squares slope of the gap in d at
the full training set.

Module-level imports are light (no JAX): the numerics are imported inside :func:`run`/:func:`plot`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.canon._checks import check_train
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig, TrainConfig
from geomopt.checks import check_ints, check_names, check_nonnegative, check_tuples
from geomopt.experiment import Experiment, Run, figure_path


@dataclasses.dataclass(frozen=True)
class ClassifyConfig:
    """Generalization of canonized / unsorted / averaged / invariant models vs d and data size.

    Paper-scale launch: ``uv run experiments/canon/classify.py paper``.
    """

    kinds: tuple[str, ...] = ("lex", "hilbert", "morton", "unsorted", "group_avg", "deepsets")
    """Models compared (any of `geomopt.canon.MODEL_KINDS`)."""
    dims: tuple[int, ...] = (2, 3, 4, 6)
    """Point dimensions d of the sweep."""
    strides: tuple[int, ...] = (1, 2, 4, 8)
    """Train on every stride-th cloud: training fractions 1/stride (official 1, 1/2, 1/4, 1/8)."""
    k: int = 2
    """Intrinsic dimension of each class's shape family (deformation parameters)."""
    n_train: int = 512
    """Training clouds at fraction 1."""
    n_test: int = 256
    """Test clouds."""
    n_points: int = 32
    """Points per cloud (official ModelNet: 1024)."""
    n_classes: int = 4
    """Classes (one template shape each; >= 2)."""
    deform: float = 0.3
    """Amplitude of the k-parameter deformation (larger: classes overlap more)."""
    base_dim: int = 0
    """0: class templates drawn in R^d (their spread grows with d). > 0: drawn once in
    R^base_dim and rotated into every R^d by a random orthonormal frame, so class separability
    does not change with d and only the ambient coordinates do (every d must be >= base_dim)."""
    noise: float = 0.01
    """Standard deviation of i.i.d. point noise (0: exactly k-dimensional families)."""
    n_seeds: int = 3
    """Seeds per setting (official 5), trained together (vmapped)."""
    train: TrainConfig = TrainConfig(
        epochs=20, batch=32, model=ModelConfig(mlp_dims=(128, 64, 32), tf_dim=32, tf_window=8)
    )
    """Training recipe and architecture (official per-order settings on by default)."""
    data_seed: int = 0
    """Seed of the synthetic clouds (templates use a fixed class seed)."""


def validate(cfg: ClassifyConfig) -> None:
    check_names(cfg, "kinds", MODEL_KINDS)
    check_tuples(cfg, "dims", "strides")
    check_ints(cfg, "dims", "strides", "k", "n_train", "n_test", "n_points", "n_seeds")
    check_ints(cfg, "n_classes", minimum=2)
    check_ints(cfg, "base_dim", "data_seed", minimum=0)
    check_nonnegative(cfg, "deform", "noise")
    check_train(cfg.train)
    if cfg.base_dim > min(cfg.dims):
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


def stats(values) -> tuple[float, float]:
    """Mean and standard deviation with ddof 1 (0 for one seed) -- the official reduction."""
    import numpy as np

    v = np.asarray(values, float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def sweep_rows(run: Run, bar, *, kind, results, strides, **extra) -> list[dict]:
    """Log one metrics row per stride of ``fit``'s results; returns the rows."""
    rows = []
    for stride, r in zip(strides, results, strict=True):
        row = dict(kind=kind, stride=stride, fraction=1.0 / stride, n_train=r["n_train"], **extra)
        for key in ("train_acc", "train_acc_running", "test_acc", "gap", "loss"):
            row[key] = [float(v) for v in r[key]]
            row[key + "_mean"], row[key + "_std"] = stats(r[key])
        rows.append(row)
    run.log_rows(rows)
    return rows


def gap_slope(rows, dims) -> tuple[float, float]:
    """Least-squares slope of the per-seed gap vs d (full training set) and its standard error."""
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


def run(cfg: ClassifyConfig, run: Run) -> dict[str, float]:
    from geomopt.canon._classify import fit
    from geomopt.canon._data import shape_family_clouds

    seeds = list(range(cfg.n_seeds))
    total = len(cfg.dims) * len(cfg.kinds) * len(cfg.strides)
    bar = run.progress(total=total, desc="classify", unit="fit")
    rows: list[dict] = []
    for d in cfg.dims:
        x, y = shape_family_clouds(
            cfg.n_train + cfg.n_test,
            cfg.n_points,
            d,
            cfg.n_classes,
            k=cfg.k,
            seed=cfg.data_seed + 1000 * d,
            deform=cfg.deform,
            noise=cfg.noise,
            base_dim=cfg.base_dim,
        )
        xtr, ytr, xte, yte = x[: cfg.n_train], y[: cfg.n_train], x[cfg.n_train :], y[cfg.n_train :]
        for kind in cfg.kinds:
            bar.set_description(f"d={d}, {kind}, {cfg.n_seeds} seeds")
            res = fit(
                kind, xtr, ytr, xte, yte, cfg.n_classes, cfg.train, seeds,
                strides=cfg.strides, data_seed=cfg.data_seed, on_stride=lambda _: bar.update(1),
            )  # fmt: skip
            rows += sweep_rows(run, bar, kind=kind, results=res, strides=cfg.strides, d=d)
    bar.close()
    out = headline(rows, cfg.kinds, cfg.dims, max(cfg.strides))
    for key, v in out.items():
        if v != v:
            run.explain_nan(key, f"one d (dims={cfg.dims}): no slope of the gap in d to fit")
    return out


def headline(rows, kinds, dims, scarce: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in kinds:
        for d in dims:
            for r in rows:
                if r["kind"] == kind and r["d"] == d and r["stride"] == 1:
                    out[f"acc/{kind}/d{d}"] = r["test_acc_mean"]
                    out[f"gap/{kind}/d{d}"] = r["gap_mean"]
                if r["kind"] == kind and r["d"] == d and r["stride"] == scarce and scarce > 1:
                    out[f"gap_scarce/{kind}/d{d}"] = r["gap_mean"]
        slope, se = gap_slope([r for r in rows if r["kind"] == kind], dims)
        out[f"gap_slope/{kind}"] = slope
        out[f"gap_slope_se/{kind}"] = se
    return out


LABELS = {
    "lex": "lex MLP",
    "hilbert": "Hilbert MLP",
    "morton": "Morton MLP",
    "unsorted": "unsorted MLP",
    "group_avg": "perm.-averaged MLP",
    "deepsets": "DeepSets",
    "transformer_lex": "transformer, lex",
    "transformer_hilbert": "transformer, Hilbert",
    "transformer_morton": "transformer, Morton",
    "transformer_random": "transformer, random",
}
STYLES = {
    "morton": ("#8c564b", "-"),
    "unsorted": ("#7f7f7f", "-"),
    "group_avg": ("#9467bd", "-"),
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


def draw_sweep(rows, kinds, x_key, axes, *, xs_ticks=None, log2=False) -> None:
    """Test accuracy (``axes[0]``) and gap (``axes[1]``) vs ``x_key``, mean +- std over seeds."""
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
    """``classify.png``: accuracy and gap vs d (full data) and vs training fraction (largest d)."""
    from geomopt import plotting
    from geomopt.runs import read_run

    rec = read_run(run_dir)
    cfg = rec.config_values
    rows = rec.metrics
    kinds = [k for k in cfg["kinds"] if any(r["kind"] == k for r in rows)]
    dims = sorted({r["d"] for r in rows})
    fig, axes = plotting.figure(2, 2, width=4.0, height=2.8)
    full = [r for r in rows if r["stride"] == 1]
    draw_sweep(full, kinds, "d", axes[:, 0], xs_ticks=dims)
    axes[1, 0].set_xlabel("point dimension d (full training set)")
    dmax = max(dims)
    at = [r for r in rows if r["d"] == dmax]
    fracs = sorted({r["fraction"] for r in at})
    draw_sweep(at, kinds, "fraction", axes[:, 1], xs_ticks=fracs, log2=True)
    axes[1, 1].set_xlabel(f"training fraction (d = {dmax})")
    slopes = rec.headline
    base = cfg.get("base_dim", 0)
    fig.suptitle(
        f"{cfg['n_classes']} classes of k = {cfg['k']} shape families (deform {cfg['deform']:g}"
        + (f", drawn in R^{base} and rotated into R^d" if base else "")
        + f"), {cfg['n_points']} points, {cfg['n_train']} training clouds at fraction 1, "
        f"{cfg['n_seeds']} seeds"
    )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels = [
        f"{lab} (gap slope {float(slopes.get('gap_slope/' + k, 'nan')):+.3f}/d)"
        for lab, k in zip(labels, kinds, strict=True)
    ]
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return [plotting.save(fig, figure_path(run_dir, out, "classify"))]


_SMALL = TrainConfig(
    epochs=20, batch=32, model=ModelConfig(mlp_dims=(128, 64, 32), tf_dim=32, tf_window=8)
)
_SMOKE_TRAIN = TrainConfig(
    epochs=1,
    batch=8,
    model=ModelConfig(
        mlp_dims=(16,), n_bands=1, n_perms=2, deepsets_width=8, deepsets_depth=1, tf_dim=8,
        tf_heads=2, tf_depth=1, tf_window=4,
    ),
    fast_compile=True,
)  # fmt: skip
ALL_KINDS = ("lex", "hilbert", "morton", "unsorted", "group_avg", "deepsets")
TRANSFORMERS = (
    "transformer_lex",
    "transformer_hilbert",
    "transformer_morton",
    "transformer_random",
)

EXPERIMENT = Experiment(
    name="canon/classify",
    description="accuracy and generalization gap of canonized / unsorted / averaged / invariant "
    "models on shape families of intrinsic dimension k in R^d, vs d and training fraction",
    presets={
        "smoke": ClassifyConfig(
            dims=(2, 3),
            strides=(1, 2),
            n_train=16,
            n_test=16,
            n_points=8,
            n_classes=2,
            n_seeds=2,
            train=_SMOKE_TRAIN,
        ),
        "quick": ClassifyConfig(train=_SMALL),
        "transformer": ClassifyConfig(kinds=TRANSFORMERS + ("deepsets",), train=_SMALL),
        "paper": ClassifyConfig(
            kinds=ALL_KINDS + TRANSFORMERS,
            dims=(2, 3, 4, 6, 8),
            n_train=4096,
            n_test=1024,
            n_points=256,
            n_classes=10,
            n_seeds=5,
            train=TrainConfig(epochs=100, batch=256, model=ModelConfig(tf_dim=96, tf_window=32)),
        ),
    },  # fmt: skip
    notes={
        "smoke": "tiny sizes, every model, d = 2, 3, 1 epoch, compiled for speed of "
        "compilation (seconds)",
        "quick": "6 models, d = 2/3/4/6, fractions 1..1/8, 3 seeds, 512 clouds of 32 points, "
        "20 epochs (CPU; see README_classify.md for the measured time)",
        "transformer": "the quick sweep with the serialized transformer (lex / Hilbert / Morton / "
        "random serialization) and DeepSets",
        "paper": "official recipe (batch 256, 100 epochs, 5 seeds, widths 256/128/64), 256 "
        "points, 4096 clouds, d = 2..8, all models incl. the serialized transformers (GPU)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "gap_slope/lex",
        "gap_slope/hilbert",
        "gap_slope/group_avg",
        "gap/unsorted/d3",
        "acc/lex/d3",
        "acc/hilbert/d3",
    ),
    seconds={"smoke": 20.0, "quick": 3780.0},
)
