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

The headline reduction is :mod:`geomopt.canon._exp_covering_summary`, the figures
:mod:`geomopt.canon._exp_covering_plot`.

    uv run experiments/canon/covering.py [smoke|quick|paper|digits] [--modelnet-dir DIR]
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from geomopt.canon._checks import check_modelnet
from geomopt.canon._exp_covering_plot import plot
from geomopt.canon._exp_covering_summary import (
    KINDS,
    _digits_headline,
    _families_headline,
    _nan_reason,
)
from geomopt.canon._exp_covering_summary import mean_ci as mean_ci
from geomopt.checks import check_ints, check_one_of, check_positive, check_range, check_tuples
from geomopt.experiment import Experiment, Run

MODELNET_DATASETS = ("modelnet40", "modelnet10")
DATA = ("families", "digits")
CLASS_SEED = 1234
"""``class_seed`` of data seed 0 (``deformed_template_clouds``' default); data seed ``s`` uses
``CLASS_SEED + s``."""
DIGITS_IMAGES = 1797
"""Images in ``sklearn.datasets.load_digits`` (a constant, so validation loads nothing)."""
DIGITS_CLASSES = 10


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
