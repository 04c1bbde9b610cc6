"""``canon/covering``: covering growth of canonized cloud families of controlled intrinsic dim.

The official covering proxy (class-restricted nearest-training-cloud distance, mean over test
clouds; :func:`geomopt.canon.covering_proxy`) with four distances: ``l2`` (no reordering),
``lex`` and ``hilbert`` (each cloud sorted by its own order) and ``wass`` (Hungarian; the
invariant lower bound), on :func:`geomopt.canon._families.deformed_template_clouds` — a template
under a ``k``-parameter smooth deformation, points in random order — so the invariant covering
number grows like ``eps^-k`` whatever ``d`` is.

Measured: the nearest-neighbour distance vs the number of training clouds ``n`` (log-log slope;
``-1/k`` for an invariant distance on a ``k``-dimensional family, flatter when the canonization
tears the family apart) at every ``d`` (fixed ``k``) and at every ``k`` (fixed ``d``), and the
proxy relative to Hungarian vs ``d``. Every cloud is first normalised as the official covering
experiment does (subtract the global minimum, divide by the global maximum of the shifted cloud);
Hilbert uses ``hilbertcurve``'s convention on axes in order with ``floor(X * 4095)`` (12 bits).

With ``--modelnet-dir DIR`` holding ``ply_data_train*.h5`` / ``ply_data_test*.h5`` (keys
``data`` N x 2048 x 3 and ``label``) the same proxy is measured on ModelNet at 256 points
(loader and preprocessing: :func:`geomopt.canon._data.load_modelnet_covering`).

    uv run experiments/canon/covering.py [smoke|quick|paper] [--modelnet-dir DIR]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.canon._checks import check_modelnet
from geomopt.checks import check_ints, check_positive, check_range, check_tuples
from geomopt.experiment import Experiment, Run, figure_path

KINDS = ("l2", "lex", "hilbert", "wass")
LABELS = {"l2": "no reordering", "lex": "lex sort", "hilbert": "Hilbert sort", "wass": "Hungarian"}
MODELNET_DATASETS = ("modelnet40", "modelnet10")
COLORS = {"l2": "#7f7f7f", "lex": "#1f77b4", "hilbert": "#d62728", "wass": "#2ca02c"}


@dataclasses.dataclass(frozen=True)
class CoveringConfig:
    """Covering proxies vs the number of training clouds, on families of intrinsic dimension k.

    Paper-scale launch (reduced from the official 256 points on 2 CPU cores):
    ``uv run experiments/canon/covering.py paper``.
    """

    dims: tuple[int, ...] = (2, 3, 4, 6, 8)
    """Point dimensions d of the sweep over d (at intrinsic dimension `k`)."""
    k: int = 2
    """Intrinsic dimension (deformation parameters) of the sweep over d."""
    ks: tuple[int, ...] = (1, 2, 4)
    """Intrinsic dimensions of the sweep over k (at point dimension `k_dim`)."""
    k_dim: int = 3
    """Point dimension of the sweep over k."""
    n_train: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    """Training-set sizes (nested: each is a prefix of the largest)."""
    n_test: int = 32
    """Test clouds (the proxy is the mean over them)."""
    n_points: int = 32
    """Points per cloud."""
    n_classes: int = 2
    """Classes (templates); nearest neighbours are searched within the test cloud's class."""
    amplitude: float = 0.1
    """Size of the deformation (times a unit field)."""
    bits: int = 12
    """Hilbert bits per axis (official: 12)."""
    seed: int = 0
    """Data seed."""
    modelnet_dir: str = ""
    """Folder with the ModelNet ply_data_{train,test}*.h5 files (or their parent holding
    modelnet40_ply_hdf5_2048/ or modelnet10_ply_hdf5_2048/); empty: synthetic data only."""
    modelnet_dataset: Literal["modelnet40", "modelnet10"] = "modelnet40"
    """Which ModelNet the folder holds."""
    modelnet_points: int = 256
    """Points per ModelNet cloud (official covering: 256; taken by stride from the 2048)."""
    modelnet_max_test: int = 64
    """ModelNet test clouds used (the first ones; 0 = all; Hungarian costs n_test * n_train)."""
    modelnet_max_train: int = 512
    """ModelNet training clouds used (the first ones; 0 = all)."""


def validate(cfg: CoveringConfig) -> None:
    check_tuples(cfg, "dims", "ks", "n_train")
    check_ints(cfg, "dims", "k", "ks", "k_dim", "n_train", "n_test", "n_points", "n_classes",
               "bits", "modelnet_points")  # fmt: skip
    check_ints(cfg, "seed", "modelnet_max_test", "modelnet_max_train", minimum=0)
    check_range(cfg, "bits", 1, 32)
    check_positive(cfg, "amplitude")
    if min(cfg.n_train) < cfg.n_classes:
        raise ValueError(
            f"n_train={cfg.n_train!r}: expected every size >= n_classes={cfg.n_classes} so each "
            "class can have a training cloud"
        )
    if cfg.modelnet_dataset not in MODELNET_DATASETS:
        raise ValueError(
            f"modelnet_dataset={cfg.modelnet_dataset!r}: expected one of {MODELNET_DATASETS}"
        )
    if cfg.modelnet_dir:
        check_modelnet("modelnet_dir", cfg.modelnet_dir, cfg.modelnet_dataset,
                       "modelnet_points", cfg.modelnet_points)  # fmt: skip


def nearest_by_prefix(test_x, test_y, train_x, train_y, sizes, *, bits: int = 12) -> dict:
    """For each distance kind: ``(len(sizes), n_test)`` distance from every test cloud to the
    nearest same-class cloud among the first ``n`` training clouds, ``n`` in ``sizes``.

    Hungarian distances are computed for same-class pairs only.
    """
    import numpy as np

    from geomopt.canon._covering import assignment_distance, pairwise_distances

    test_y, train_y = np.asarray(test_y), np.asarray(train_y)
    same = test_y[:, None] == train_y[None, :]
    out = {}
    for kind in KINDS:
        if kind == "wass":
            dist = np.full(same.shape, np.inf)
            for i, j in zip(*np.nonzero(same), strict=True):
                dist[i, j] = assignment_distance(test_x[i], train_x[j])
        else:
            dist = np.where(same, pairwise_distances(test_x, train_x, kind, bits=bits), np.inf)
        out[kind] = np.stack([dist[:, :n].min(axis=1) for n in sizes])
    return out


def _slope(sizes, values) -> float:
    import numpy as np

    v = np.asarray(values, float)
    keep = np.isfinite(v) & (v > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(np.asarray(sizes, float)[keep]), np.log(v[keep]), 1)[0])


def _measure(run: Run, tag: dict, test, train, sizes, bits) -> dict:
    """Log one row per (size, kind) and return {kind: slope}."""
    import numpy as np

    near = nearest_by_prefix(*test, *train, sizes, bits=bits)
    rows, slopes = [], {}
    for kind, m in near.items():
        finite = np.where(np.isfinite(m), m, np.nan)
        proxy = np.nanmean(finite, axis=1)
        slopes[kind] = _slope(sizes, proxy)
        rows += [
            {**tag, "kind": kind, "n_train": int(n), "proxy": float(p), "max": float(np.nanmax(r))}
            for n, p, r in zip(sizes, proxy, finite, strict=True)
        ]
    run.log_rows(rows)
    return slopes


def global_normalize(x):
    """The official covering normalisation in NumPy: per cloud, subtract the global minimum and
    divide by the global maximum of the shifted cloud (as :func:`geomopt.canon.normalize_cloud`
    with ``"global"``)."""
    import numpy as np

    shifted = x - x.min(axis=(-2, -1), keepdims=True)
    scale = shifted.max(axis=(-2, -1), keepdims=True)
    return (shifted / np.where(scale > 0, scale, 1)).astype(np.float32)


def _synthetic(cfg: CoveringConfig, d: int, k: int):
    from geomopt.canon._families import deformed_template_clouds

    n = max(cfg.n_train) + cfg.n_test
    x, y, _ = deformed_template_clouds(
        n, cfg.n_points, d, k, cfg.n_classes, seed=cfg.seed, amplitude=cfg.amplitude
    )
    x = global_normalize(x)
    return (x[: cfg.n_test], y[: cfg.n_test]), (x[cfg.n_test :], y[cfg.n_test :])


def _modelnet(cfg: CoveringConfig):
    """ModelNet for the covering proxies (:func:`geomopt.canon._data.load_modelnet_covering`:
    ``modelnet_points`` points by the stride rule, the covering normalisation), cut to the first
    ``modelnet_max_test`` / ``modelnet_max_train`` clouds; test classes absent from the cut
    training set are dropped."""
    import numpy as np

    from geomopt.canon._data import load_modelnet_covering

    x_tr, y_tr, x_te, y_te = load_modelnet_covering(
        cfg.modelnet_dir, cfg.modelnet_dataset, n_points=cfg.modelnet_points
    )
    if cfg.modelnet_max_train:
        x_tr, y_tr = x_tr[: cfg.modelnet_max_train], y_tr[: cfg.modelnet_max_train]
    if cfg.modelnet_max_test:
        x_te, y_te = x_te[: cfg.modelnet_max_test], y_te[: cfg.modelnet_max_test]
    keep = np.isin(y_te, y_tr)
    return (x_te[keep], y_te[keep]), (x_tr, y_tr)


def run(cfg: CoveringConfig, run: Run) -> dict[str, float]:
    import numpy as np

    sizes = sorted(cfg.n_train)
    jobs = [("dim", d, cfg.k) for d in cfg.dims]
    jobs += [("k", cfg.k_dim, k) for k in cfg.ks if not (cfg.k_dim in cfg.dims and k == cfg.k)]
    headline: dict[str, float] = {}
    slopes: dict[tuple[int, int], dict] = {}
    bar = run.progress(total=len(jobs) + bool(cfg.modelnet_dir), desc="covering", unit="family")
    for _, d, k in jobs:
        bar.set_description(f"d={d}, k={k}")
        test, train = _synthetic(cfg, d, k)
        slopes[(d, k)] = _measure(run, {"data": "synthetic", "d": d, "k": k}, test, train, sizes,
                                  cfg.bits)  # fmt: skip
        bar.update(1)
    rows = run.metrics()
    for (d, k), s in slopes.items():
        for kind, v in s.items():
            if k == cfg.k:
                headline[f"slope/d{d}/{kind}"] = v
            if d == cfg.k_dim:
                headline[f"slope/k{k}/{kind}"] = v
    big = max(sizes)
    proxy = {
        (r["d"], r["k"], r["kind"]): r["proxy"]
        for r in rows
        if r.get("data") == "synthetic" and r["n_train"] == big
    }
    dims = np.asarray(cfg.dims, float)
    for kind in ("l2", "lex", "hilbert"):
        ratio = np.array([proxy[(d, cfg.k, kind)] / proxy[(d, cfg.k, "wass")] for d in cfg.dims])
        for d, r in zip(cfg.dims, ratio, strict=True):
            headline[f"ratio/d{d}/{kind}"] = float(r)
        if len(cfg.dims) > 1:
            headline[f"growth/{kind}/exp_rate"] = float(np.polyfit(dims, np.log(ratio), 1)[0])
            headline[f"growth/{kind}/poly_degree"] = float(
                np.polyfit(np.log(dims), np.log(ratio), 1)[0]
            )
    if cfg.modelnet_dir:
        bar.set_description("ModelNet")
        test, train = _modelnet(cfg)
        msizes = [n for n in sizes if n < len(train[0])] + [len(train[0])]
        s = _measure(run, {"data": "modelnet", "d": 3, "k": 0}, test, train, msizes, cfg.bits)
        final = {r["kind"]: r["proxy"] for r in run.metrics()
                 if r.get("data") == "modelnet" and r["n_train"] == msizes[-1]}  # fmt: skip
        for kind in KINDS:
            headline[f"modelnet/{kind}"] = final[kind]
            headline[f"modelnet/slope/{kind}"] = s[kind]
        bar.update(1)
    bar.close()
    run.details["sizes"] = sizes
    for key, v in headline.items():
        if v != v:
            run.explain_nan(key, _nan_reason(key, sizes))
    return headline


def _nan_reason(key: str, sizes) -> str:
    """Why headline ``key`` came out NaN."""
    if len(sizes) < 2 and "slope" in key:
        return f"one training-set size (n_train={sizes}): no slope to fit"
    if "slope" in key:
        return "fewer than two training-set sizes with a finite positive proxy: no slope to fit"
    return "the Hungarian proxy is 0 or not finite (no same-class training cloud): no ratio"


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``covering.png``: NN distance vs training clouds per d and per k, and proxy / Hungarian
    vs d; ``covering_modelnet.png`` when the run measured ModelNet."""

    from geomopt import plotting
    from geomopt.runs import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    rows = [r for r in record.metrics if r.get("data") == "synthetic"]
    head = record.headline
    fig, axes = plotting.figure(3, 1, width=3.5, height=2.9)
    a, b, c = axes.flat
    sizes = sorted({r["n_train"] for r in rows})
    # (a) slopes vs d at fixed k
    for kind in KINDS:
        ys = [float(head.get(f"slope/d{d}/{kind}", "nan")) for d in cfg["dims"]]
        a.plot(cfg["dims"], ys, "o-", color=COLORS[kind], label=LABELS[kind])
    a.axhline(-1 / cfg["k"], color="k", ls="--", lw=1, label=f"-1/k (k = {cfg['k']})")
    a.set_xticks(cfg["dims"])
    a.set_xlabel("point dimension d")
    a.set_ylabel("slope of NN distance vs n (log-log)")
    a.set_title(f"family of intrinsic dim. k = {cfg['k']}")
    # (b) slopes vs k at fixed d
    ks = sorted(set(cfg["ks"]) | ({cfg["k"]} if cfg["k_dim"] in cfg["dims"] else set()))
    for kind in KINDS:
        ys = [float(head.get(f"slope/k{k}/{kind}", "nan")) for k in ks]
        b.plot(ks, ys, "o-", color=COLORS[kind], label=LABELS[kind])
    b.plot(ks, [-1 / k for k in ks], "k--", lw=1, label="-1/k")
    b.set_xticks(ks)
    b.set_xlabel("intrinsic dimension k")
    b.set_title(f"d = {cfg['k_dim']}")
    # (c) ratio to Hungarian at the largest n vs d
    for kind in ("l2", "lex", "hilbert"):
        ys = [float(head.get(f"ratio/d{d}/{kind}", "nan")) for d in cfg["dims"]]
        c.plot(cfg["dims"], ys, "o-", color=COLORS[kind], label=LABELS[kind])
    c.set_yscale("log")
    c.set_xticks(cfg["dims"])
    c.set_xlabel("point dimension d")
    c.set_ylabel(f"proxy / Hungarian at n = {max(sizes)}")
    handles, labels = a.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    figures = [plotting.save(fig, figure_path(run_dir, out, "covering"))]
    mn = [r for r in record.metrics if r.get("data") == "modelnet"]
    if mn:
        fig, ax = plotting.figure(1, 1, width=4.0, height=3.0)
        for kind in KINDS:
            sel = [r for r in mn if r["kind"] == kind]
            ax.plot([r["n_train"] for r in sel], [float(r["proxy"]) for r in sel], "o-",
                    color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted({r["n_train"] for r in mn}))
        ax.set_xticklabels([str(n) for n in sorted({r["n_train"] for r in mn})])
        ax.set_xlabel("training clouds")
        ax.set_ylabel("covering proxy (mean NN distance)")
        ax.set_title(f"ModelNet, {cfg['modelnet_points']} points")
        ax.legend(loc="best")
        figures.append(plotting.save(fig, figure_path(run_dir, out, "covering_modelnet")))
    return figures


EXPERIMENT = Experiment(
    name="canon/covering",
    description="covering proxies (none / lex / Hilbert / Hungarian) on families of intrinsic "
    "dimension k: NN distance vs training clouds, vs d and k",
    presets={
        "smoke": CoveringConfig(
            dims=(2, 3), ks=(1,), k_dim=2, n_train=(4, 8, 16), n_test=4, n_points=8
        ),
        "quick": CoveringConfig(),
        "paper": CoveringConfig(
            dims=(2, 3, 4, 5, 6, 8, 10),
            n_train=(16, 32, 64, 128, 256, 512),
            n_test=32,
            n_points=128,
        ),
    },  # fmt: skip
    notes={
        "smoke": "tiny sizes, seconds",
        "quick": "32 points, up to 256 training clouds, d = 2..8, k = 1, 2, 4",
        "paper": "128 points (official: 256), up to 512 clouds, d = 2..10 (minutes on 2 cores)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "slope/d3/wass",
        "slope/k1/wass",
        "slope/d3/hilbert",
        "slope/d3/lex",
        "growth/lex/exp_rate",
        "growth/hilbert/exp_rate",
    ),
    paper={"slope/d3/wass": -0.5, "slope/k1/wass": -1.0},
    paper_source="theory (README): an invariant distance on a k-dim. family, NN distance ~ "
    "n^(-1/k) (k = 2 over d, k = 1 at d = k_dim)",
    seconds={"smoke": 2.2, "quick": 159.0},
)
