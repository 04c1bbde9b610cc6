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

Replication: everything is measured on ``n_data_seeds`` data seeds (``seed``, ``seed + 1``, ...);
data seed ``s`` draws new templates and deformation fields (``class_seed = 1234 + s``) and new
clouds (``seed = s``). Each headline number is the mean over data seeds with a 95 % Student-t
interval over them (``KEY/ci_lo``, ``KEY/ci_hi``; the data seed is the unit of replication):
the slopes, the ratios proxy / Hungarian at the largest ``n``, the fitted growth of the ratio in
``d`` (``exp_rate``: slope of ``log ratio`` vs ``d``; ``poly_degree``: vs ``log d``), the
paired slope differences ``slope_diff/d{d}/a_vs_b`` (slope of order a minus that of b, data seed
by data seed; negative: a learns faster), and, with
no interval, ``order/...``: the fraction of data seeds in which Hungarian < Hilbert < lex < no
reordering at the largest ``n``.

With ``data="digits"`` the same proxies are measured on scikit-learn's 8x8 digits as 2-D clouds
(:func:`geomopt.canon.digits_clouds`; d = 2 and 10 classes, so no sweep over ``d`` or ``k``):
per data seed a new point sampling of every image, a random test set of ``n_test`` images and a
random training order of the others, classes interleaved so that every prefix of >= 10 clouds
holds each class.

With ``--modelnet-dir DIR`` holding ``ply_data_train*.h5`` / ``ply_data_test*.h5`` (keys
``data`` N x 2048 x 3 and ``label``) the same proxy is measured on ModelNet at 256 points
(loader and preprocessing: :func:`geomopt.canon._data.load_modelnet_covering`; one split, no
data seeds).

    uv run experiments/canon/covering.py [smoke|quick|paper|digits] [--modelnet-dir DIR]
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Literal

from geomopt.canon._checks import check_modelnet
from geomopt.checks import check_ints, check_one_of, check_positive, check_range, check_tuples
from geomopt.experiment import Experiment, Run, figure_path

KINDS = ("l2", "lex", "hilbert", "wass")
LABELS = {"l2": "no reordering", "lex": "lex sort", "hilbert": "Hilbert sort", "wass": "Hungarian"}
MODELNET_DATASETS = ("modelnet40", "modelnet10")
DATA = ("families", "digits")
COLORS = {"l2": "#7f7f7f", "lex": "#1f77b4", "hilbert": "#d62728", "wass": "#2ca02c"}
CLASS_SEED = 1234
"""``class_seed`` of data seed 0 (``deformed_template_clouds``' default); data seed ``s`` uses
``CLASS_SEED + s``."""
DIGITS_IMAGES = 1797
"""Images in ``sklearn.datasets.load_digits`` (a constant, so validation loads nothing)."""
DIGITS_CLASSES = 10
ORDER = ("wass", "hilbert", "lex", "l2")
"""The hierarchy whose frequency over data seeds is reported, smallest proxy first."""
SLOPE_PAIRS = (("hilbert", "lex"), ("lex", "wass"), ("hilbert", "wass"))
"""Orders whose slopes are compared seed by seed (``slope_diff/.../a_vs_b`` = slope a - b)."""


@dataclasses.dataclass(frozen=True)
class CoveringConfig:
    """Covering proxies vs the number of training clouds, on families of intrinsic dimension k
    (or on the 8x8 digits), replicated over data seeds.

    Paper-scale launch (reduced from the official 256 points on 2 CPU cores):
    ``uv run experiments/canon/covering.py paper``; digits:
    ``uv run experiments/canon/covering.py digits``.
    """

    data: Literal["families", "digits"] = "families"
    """families: deformed templates over the sweeps of d and k; digits: scikit-learn's 8x8
    digits as 2-D clouds (d = 2, 10 classes; `dims`, `k`, `ks`, `k_dim`, `n_classes` and
    `amplitude` are unused)."""
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
    """First data seed."""
    n_data_seeds: int = 20
    """Data seeds `seed`, `seed` + 1, ...: each draws new templates, deformations and clouds
    (digits: a new point sampling and train / test draw); the t-intervals are over them."""
    modelnet_dir: str = ""
    """Folder with the ModelNet ply_data_{train,test}*.h5 files (or their parent holding
    modelnet40_ply_hdf5_2048/ or modelnet10_ply_hdf5_2048/); empty: synthetic data only."""
    modelnet_dataset: Literal["modelnet40", "modelnet10"] = "modelnet40"
    """Which ModelNet the folder holds."""
    modelnet_points: int = 256
    """Points per ModelNet cloud (official covering: 256; a seeded random subset of the 2048)."""
    modelnet_max_test: int = 64
    """ModelNet test clouds used (the first ones; 0 = all; Hungarian costs n_test * n_train)."""
    modelnet_max_train: int = 512
    """ModelNet training clouds used (the first ones; 0 = all)."""

    @property
    def data_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.n_data_seeds))


def validate(cfg: CoveringConfig) -> None:
    check_one_of(cfg, "data", DATA)
    check_tuples(cfg, "dims", "ks", "n_train")
    check_ints(cfg, "dims", "k", "ks", "k_dim", "n_train", "n_test", "n_points", "n_classes",
               "bits", "modelnet_points")  # fmt: skip
    check_ints(cfg, "seed", "modelnet_max_test", "modelnet_max_train", minimum=0)
    check_ints(cfg, "n_data_seeds", minimum=2)
    check_range(cfg, "bits", 1, 32)
    check_positive(cfg, "amplitude")
    classes = DIGITS_CLASSES if cfg.data == "digits" else cfg.n_classes
    if min(cfg.n_train) < classes:
        raise ValueError(
            f"n_train={cfg.n_train!r}: expected every size >= {classes} (the number of classes"
            f"{' of the digits' if cfg.data == 'digits' else ''}) so each class can have a "
            "training cloud"
        )
    if cfg.data == "digits" and max(cfg.n_train) + cfg.n_test > DIGITS_IMAGES:
        raise ValueError(
            f"n_train={cfg.n_train!r}: expected the largest size + n_test={cfg.n_test} <= "
            f"{DIGITS_IMAGES} (the digits images)"
        )
    if cfg.modelnet_dataset not in MODELNET_DATASETS:
        raise ValueError(
            f"modelnet_dataset={cfg.modelnet_dataset!r}: expected one of {MODELNET_DATASETS}"
        )
    if cfg.modelnet_dir:
        check_modelnet("modelnet_dir", cfg.modelnet_dir, cfg.modelnet_dataset,
                       "modelnet_points", cfg.modelnet_points)  # fmt: skip


def mean_ci(values) -> tuple[float, float, float]:
    """``(mean, lo, hi)`` over data seeds: :func:`geomopt.stats.mean_ci` (95 % Student-t),
    except that a seed whose value is NaN (no slope or ratio to fit, see ``_nan_reason``) makes
    all three NaN, so the run still reports and says why."""
    import numpy as np

    from geomopt.stats import mean_ci as t_interval

    if not np.isfinite(np.asarray(values, float)).all():
        return float("nan"), float("nan"), float("nan")
    return t_interval(values)


def _put(headline: dict, key: str, values) -> None:
    m, lo, hi = mean_ci(values)
    headline.update({key: m, f"{key}/ci_lo": lo, f"{key}/ci_hi": hi})


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


def _measure(run: Run, tag: dict, test, train, sizes, bits) -> dict[str, tuple[float, float]]:
    """Log one row per (size, kind) and return {kind: (slope, proxy at the largest size)}."""
    import numpy as np

    near = nearest_by_prefix(*test, *train, sizes, bits=bits)
    rows, out = [], {}
    for kind, m in near.items():
        finite = np.where(np.isfinite(m), m, np.nan)
        proxy = np.nanmean(finite, axis=1)
        out[kind] = (_slope(sizes, proxy), float(proxy[-1]))
        rows += [
            {**tag, "kind": kind, "n_train": int(n), "proxy": float(p), "max": float(np.nanmax(r))}
            for n, p, r in zip(sizes, proxy, finite, strict=True)
        ]
    run.log_rows(rows)
    return out


def _ordered(proxy: dict[str, float]) -> bool:
    """Hungarian < Hilbert < lex < no reordering (strictly)."""
    return all(proxy[a] < proxy[b] for a, b in itertools.pairwise(ORDER))


def global_normalize(x):
    """The official covering normalisation in NumPy: per cloud, subtract the global minimum and
    divide by the global maximum of the shifted cloud (as :func:`geomopt.canon.normalize_cloud`
    with ``"global"``)."""
    import numpy as np

    shifted = x - x.min(axis=(-2, -1), keepdims=True)
    scale = shifted.max(axis=(-2, -1), keepdims=True)
    return (shifted / np.where(scale > 0, scale, 1)).astype(np.float32)


def synthetic_split(cfg: CoveringConfig, d: int, k: int, data_seed: int):
    """``(test, train)`` pairs ``(x, y)`` of the families at ``(d, k)`` for one data seed:
    templates and fields from ``class_seed = CLASS_SEED + data_seed``, clouds from
    ``seed = data_seed``; the first ``n_test`` clouds are the test set."""
    from geomopt.canon._families import deformed_template_clouds

    n = max(cfg.n_train) + cfg.n_test
    x, y, _ = deformed_template_clouds(
        n, cfg.n_points, d, k, cfg.n_classes, seed=data_seed, class_seed=CLASS_SEED + data_seed,
        amplitude=cfg.amplitude,
    )  # fmt: skip
    x = global_normalize(x)
    return (x[: cfg.n_test], y[: cfg.n_test]), (x[cfg.n_test :], y[cfg.n_test :])


def digits_split(cfg: CoveringConfig, data_seed: int):
    """``(test, train)`` digits clouds for one data seed: the points sampled with
    ``digits_clouds(n_points, seed=data_seed)`` and normalised for covering; ``n_test`` random
    test images, and ``max(n_train)`` training images from the rest in a random order with the
    classes interleaved (the ``i``-th image of every class, classes in a random order, before
    the ``i+1``-th), so each prefix of ``n`` clouds holds ``n // 10`` or one more of each class."""
    import numpy as np

    from geomopt.canon._digits import digits_clouds

    x, y = digits_clouds(cfg.n_points, seed=data_seed)
    x = global_normalize(x)
    rng = np.random.default_rng([data_seed, 1])
    perm = rng.permutation(len(y))
    test, pool = perm[: cfg.n_test], perm[cfg.n_test :]
    rank = np.zeros(len(pool), int)
    for c in range(DIGITS_CLASSES):
        rank[y[pool] == c] = np.arange((y[pool] == c).sum())
    class_key = rng.permutation(DIGITS_CLASSES)[y[pool]]
    train = pool[np.lexsort((class_key, rank))][: max(cfg.n_train)]
    return (x[test], y[test]), (x[train], y[train])


def _modelnet(cfg: CoveringConfig):
    """ModelNet for the covering proxies (:func:`geomopt.canon._data.load_modelnet_covering`:
    ``modelnet_points`` points as a seeded random subset, the covering normalisation), cut to
    the first ``modelnet_max_test`` / ``modelnet_max_train`` clouds; test classes absent from the
    cut training set are dropped."""
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


def _families_headline(cfg: CoveringConfig, res: dict) -> dict[str, float]:
    """Headline from ``res[(seed, d, k)][kind] = (slope, proxy at the largest n)``."""
    import numpy as np

    seeds, headline = cfg.data_seeds, {}

    def per_seed(d, k, kind, i):
        return [res[(s, d, k)][kind][i] for s in seeds]

    for d in cfg.dims:
        for kind in KINDS:
            _put(headline, f"slope/d{d}/{kind}", per_seed(d, cfg.k, kind, 0))
        for a, b in SLOPE_PAIRS:
            diff = np.subtract(per_seed(d, cfg.k, a, 0), per_seed(d, cfg.k, b, 0))
            _put(headline, f"slope_diff/d{d}/{a}_vs_{b}", diff)
    ks = sorted({k for _, d, k in res if d == cfg.k_dim})
    for k in ks:
        for kind in KINDS:
            _put(headline, f"slope/k{k}/{kind}", per_seed(cfg.k_dim, k, kind, 0))
    ratio = {}  # kind -> (n_seeds, n_dims)
    for kind in ("l2", "lex", "hilbert"):
        ratio[kind] = np.array(
            [[res[(s, d, cfg.k)][kind][1] / res[(s, d, cfg.k)]["wass"][1] for d in cfg.dims]
             for s in seeds]
        )  # fmt: skip
        for j, d in enumerate(cfg.dims):
            _put(headline, f"ratio/d{d}/{kind}", ratio[kind][:, j])
        if len(cfg.dims) > 1:
            x = np.asarray(cfg.dims, float)
            _put(headline, f"growth/{kind}/exp_rate",
                 [_fit(x, r) for r in ratio[kind]])  # fmt: skip
            _put(headline, f"growth/{kind}/poly_degree",
                 [_fit(np.log(x), r) for r in ratio[kind]])  # fmt: skip
    holds = {(d, k): [_ordered({kind: res[(s, d, k)][kind][1] for kind in KINDS}) for s in seeds]
             for (_, d, k) in res}  # fmt: skip
    for d in cfg.dims:
        headline[f"order/d{d}"] = float(np.mean(holds[(d, cfg.k)]))
    headline["order/all_d"] = float(np.mean(np.all([holds[(d, cfg.k)] for d in cfg.dims], 0)))
    for k in ks:
        headline[f"order/k{k}"] = float(np.mean(holds[(cfg.k_dim, k)]))
    return headline


def _fit(x, ratio) -> float:
    """Slope of ``log ratio`` vs ``x`` (NaN if a ratio is not finite and positive)."""
    import numpy as np

    r = np.asarray(ratio, float)
    if not (np.isfinite(r) & (r > 0)).all():
        return float("nan")
    return float(np.polyfit(x, np.log(r), 1)[0])


def _digits_headline(cfg: CoveringConfig, res: dict) -> dict[str, float]:
    """Headline from ``res[seed][kind] = (slope, proxy at the largest n)``."""
    import numpy as np

    seeds, headline = cfg.data_seeds, {}
    for kind in KINDS:
        _put(headline, f"digits/slope/{kind}", [res[s][kind][0] for s in seeds])
    for a, b in SLOPE_PAIRS:
        _put(headline, f"digits/slope_diff/{a}_vs_{b}",
             [res[s][a][0] - res[s][b][0] for s in seeds])  # fmt: skip
    for kind in ("l2", "lex", "hilbert"):
        _put(headline, f"digits/ratio/{kind}",
             [res[s][kind][1] / res[s]["wass"][1] for s in seeds])  # fmt: skip
    headline["digits/order"] = float(
        np.mean([_ordered({kind: res[s][kind][1] for kind in KINDS}) for s in seeds])
    )
    return headline


def run(cfg: CoveringConfig, run: Run) -> dict[str, float]:
    sizes = sorted(cfg.n_train)
    if cfg.data == "digits":
        jobs = [("digits", 2, 0)]
    else:
        jobs = [("dim", d, cfg.k) for d in cfg.dims]
        jobs += [("k", cfg.k_dim, k) for k in cfg.ks
                 if not (cfg.k_dim in cfg.dims and k == cfg.k)]  # fmt: skip
    total = len(jobs) * cfg.n_data_seeds + bool(cfg.modelnet_dir)
    bar = run.progress(total=total, desc="covering", unit="family")
    res: dict = {}
    for s in cfg.data_seeds:
        for _, d, k in jobs:
            if cfg.data == "digits":
                bar.set_description(f"digits, data seed {s}")
                test, train = digits_split(cfg, s)
                tag = {"data": "digits", "data_seed": s, "d": 2, "k": 0}
                res[s] = _measure(run, tag, test, train, sizes, cfg.bits)
            else:
                bar.set_description(f"d={d}, k={k}, data seed {s}")
                test, train = synthetic_split(cfg, d, k, s)
                tag = {"data": "synthetic", "data_seed": s, "d": d, "k": k}
                res[(s, d, k)] = _measure(run, tag, test, train, sizes, cfg.bits)
            bar.update(1)
    if cfg.data == "digits":
        headline = _digits_headline(cfg, res)
    else:
        headline = _families_headline(cfg, res)
    if cfg.modelnet_dir:
        bar.set_description("ModelNet")
        test, train = _modelnet(cfg)
        msizes = [n for n in sizes if n < len(train[0])] + [len(train[0])]
        out = _measure(run, {"data": "modelnet", "d": 3, "k": 0}, test, train, msizes, cfg.bits)
        for kind in KINDS:
            headline[f"modelnet/{kind}"] = out[kind][1]
            headline[f"modelnet/slope/{kind}"] = out[kind][0]
        bar.update(1)
    bar.close()
    run.details["sizes"] = sizes
    run.details["data_seeds"] = list(cfg.data_seeds)
    for key, v in headline.items():
        if v != v:
            run.explain_nan(key, _nan_reason(key, sizes))
    return headline


def _nan_reason(key: str, sizes) -> str:
    """Why headline ``key`` came out NaN."""
    if len(sizes) < 2 and "slope" in key:
        return f"one training-set size (n_train={sizes}): no slope to fit"
    if "slope" in key:
        return (
            "in some data seed fewer than two training-set sizes with a finite positive proxy: "
            "no slope to fit"
        )
    return (
        "in some data seed the Hungarian proxy is 0 or not finite (no same-class training "
        "cloud): no ratio"
    )


def _errorbar(ax, x, head: dict, key: str, *, offset: float = 0.0, **kw) -> None:
    """Mean and 95 % interval of headline ``key`` (``{}`` filled with each x), drawn at
    ``x + offset`` (so the orders' bars do not hide each other)."""
    import numpy as np

    m, lo, hi = (np.array([float(head.get(key.format(v) + suffix, "nan")) for v in x])
                 for suffix in ("", "/ci_lo", "/ci_hi"))  # fmt: skip
    ax.errorbar(np.asarray(x, float) + offset, m, yerr=np.stack([m - lo, hi - m]), fmt="o-",
                capsize=2, ms=3, **kw)  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``covering.png``: NN distance vs training clouds per d and per k, and proxy / Hungarian
    vs d (mean and 95 % t-interval over data seeds); for a digits run the proxies and their
    ratios vs n; ``covering_modelnet.png`` when the run measured ModelNet."""

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    head = record.headline
    n_seeds = cfg.get("n_data_seeds", 1)
    if cfg.get("data", "families") == "digits":
        figures = [_plot_digits(record, figure_path(run_dir, out, "covering"))]
    else:
        rows = [r for r in record.metrics if r.get("data") == "synthetic"]
        fig, axes = plotting.figure(3, 1, width=3.5, height=2.9)
        a, b, c = axes.flat
        sizes = sorted({r["n_train"] for r in rows})
        shift = {kind: 0.06 * (i - 1.5) for i, kind in enumerate(KINDS)}
        # (a) slopes vs d at fixed k
        for kind in KINDS:
            _errorbar(a, cfg["dims"], head, f"slope/d{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        a.axhline(-1 / cfg["k"], color="k", ls="--", lw=1, label=f"-1/k (k = {cfg['k']})")
        a.set_xticks(cfg["dims"])
        a.set_xlabel("point dimension d")
        a.set_ylabel("slope of NN distance vs n (log-log)")
        a.set_title(f"intrinsic dim. k = {cfg['k']}; {n_seeds} data seeds, 95 % CI")
        # (b) slopes vs k at fixed d
        ks = sorted(int(key.split("/")[1][1:]) for key in head
                    if key.startswith("slope/k") and key.endswith("/wass"))  # fmt: skip
        for kind in KINDS:
            _errorbar(b, ks, head, f"slope/k{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
        b.plot(ks, [-1 / k for k in ks], "k--", lw=1, label="-1/k")
        b.set_xticks(ks)
        b.set_xlabel("intrinsic dimension k")
        b.set_title(f"d = {cfg['k_dim']}")
        # (c) ratio to Hungarian at the largest n vs d
        for kind in ("l2", "lex", "hilbert"):
            _errorbar(c, cfg["dims"], head, f"ratio/d{{}}/{kind}", offset=shift[kind],
                      color=COLORS[kind], label=LABELS[kind])  # fmt: skip
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


def _plot_digits(record, path: Path) -> Path:
    """Proxy vs n and proxy / Hungarian vs n on the digits, mean and 95 % t-interval over
    data seeds (computed from the logged rows)."""
    import numpy as np

    from geomopt import plotting

    rows = [r for r in record.metrics if r.get("data") == "digits"]
    cfg = record.config_values
    sizes = sorted({r["n_train"] for r in rows})
    seeds = sorted({r["data_seed"] for r in rows})
    proxy = {(r["data_seed"], r["kind"], r["n_train"]): float(r["proxy"]) for r in rows}
    fig, axes = plotting.figure(2, 1, width=3.6, height=2.9)
    a, b = axes.flat
    for kind in KINDS:
        p = np.array([[proxy[(s, kind, n)] for n in sizes] for s in seeds])
        m, lo, hi = np.array([mean_ci(col) for col in p.T]).T
        a.plot(sizes, m, "o-", ms=3, color=COLORS[kind], label=LABELS[kind])
        plotting.band(a, sizes, lo, hi, label_color=COLORS[kind])
        if kind == "wass":
            continue
        r = p / np.array([[proxy[(s, "wass", n)] for n in sizes] for s in seeds])
        m, lo, hi = np.array([mean_ci(col) for col in r.T]).T
        b.plot(sizes, m, "o-", ms=3, color=COLORS[kind], label=LABELS[kind])
        plotting.band(b, sizes, lo, hi, label_color=COLORS[kind])
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        ax.set_xlabel("training clouds n")
    a.set_yscale("log")
    a.set_ylabel("covering proxy (mean NN distance)")
    a.set_title(f"8x8 digits, {cfg['n_points']} points; {len(seeds)} data seeds, 95 % CI")
    b.set_yscale("log")
    b.set_ylabel("proxy / Hungarian")
    handles, labels = a.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return plotting.save(fig, path)


EXPERIMENT = Experiment(
    name="canon/covering",
    description="covering proxies (none / lex / Hilbert / Hungarian) on families of intrinsic "
    "dimension k (or 8x8 digits) over data seeds: NN distance vs training clouds, vs d and k",
    presets={
        "smoke": CoveringConfig(
            dims=(2, 3),
            ks=(1,),
            k_dim=2,
            n_train=(4, 8, 16),
            n_test=4,
            n_points=8,
            n_data_seeds=2,
        ),
        "quick": CoveringConfig(),
        "paper": CoveringConfig(
            dims=(2, 3, 4, 5, 6, 8, 10),
            n_train=(16, 32, 64, 128, 256, 512),
            n_test=32,
            n_points=128,
            n_data_seeds=10,
        ),
        "digits": CoveringConfig(
            data="digits",
            n_train=(16, 32, 64, 128, 256, 512, 1024),
            n_test=64,
            n_points=64,
            n_data_seeds=20,
        ),
    },  # fmt: skip
    notes={
        "smoke": "tiny sizes, 2 data seeds, seconds",
        "quick": "32 points, up to 256 training clouds, d = 2..8, k = 1, 2, 4, 20 data seeds",
        "paper": "128 points (official: 256), up to 512 clouds, d = 2..10, 10 data seeds",
        "digits": "8x8 digits as 2-D clouds of 64 points, up to 1024 training clouds, "
        "20 data seeds",
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
    seconds={"smoke": 2.3, "quick": 26.6, "digits": 30.9},
)
