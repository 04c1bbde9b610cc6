"""``canon/rotations``: rotation canonizations (PCA, frame averaging, skewness sign fix, random
frames, none) on the official DeepSets backbone, on randomly rotated clouds; and the covering
proxy under rotations.

    uv run experiments/canon/rotations.py [smoke|quick|paper] [--field value ...]

Data: shape families of intrinsic dimension ``k`` in ``R^d`` (``shape_family_clouds``), every
training and test cloud centred and rotated by its own Haar-random rotation (the official
``apply_rotation`` does this to train and test clouds); with ``--data-root`` ModelNet40 HDF5
clouds instead (1024 points by stride 2, d = 3). Training: the official recipe of
``geomopt.canon._classify`` with the per-model lr / weight decay of the official
``configs/PCA.json``. Covering: :func:`geomopt.canon._rotations.rotation_covering_proxy` on
``cover_clouds`` clouds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.canon._checks import check_modelnet, check_train
from geomopt.canon._model_config import TrainConfig
from geomopt.checks import check_ints, check_names, check_range, check_tuples
from geomopt.experiment import Experiment, Run, figure_path

CANONS = ("none", "pca", "frame_avg", "skew", "random_frame")


@dataclasses.dataclass(frozen=True)
class RotationsConfig:
    """Rotation canonizations on randomly rotated clouds.

    Paper-style launch: ``uv run experiments/canon/rotations.py paper``.
    """

    canons: tuple[str, ...] = CANONS
    """Canonizations compared (none / pca / frame_avg / skew / random_frame)."""
    dims: tuple[int, ...] = (3,)
    """Point dimensions, 2..8 (frame averaging costs 2^d backbone passes)."""
    k: int = 2
    """Intrinsic dimension of each class's shape family."""
    n_train: int = 512
    """Training clouds."""
    n_test: int = 256
    """Test clouds."""
    n_points: int = 64
    """Points per cloud (official 1024)."""
    n_classes: int = 4
    """Classes (>= 2)."""
    n_seeds: int = 3
    """Seeds, trained together."""
    train: TrainConfig = TrainConfig(epochs=20, batch=32)
    """Training recipe (per-model lr / weight decay from the official PCA.json)."""
    cover_clouds: tuple[int, int] = (64, 16)
    """Training and test clouds of the covering proxy, the first of n_train / n_test
    (Hungarian distances: keep small)."""
    data_root: str = ""
    """ModelNet40 HDF5 folder; empty: synthetic shape families."""
    data_seed: int = 0
    """Seed of the clouds and rotations."""


def validate(cfg: RotationsConfig) -> None:
    check_names(cfg, "canons", CANONS)
    check_tuples(cfg, "dims")
    check_ints(cfg, "dims", minimum=2)
    check_range(cfg, "dims", 2, 8)
    check_ints(cfg, "k", "n_train", "n_test", "n_points", "n_seeds", "cover_clouds")
    check_ints(cfg, "n_classes", minimum=2)
    check_ints(cfg, "data_seed", minimum=0)
    check_train(cfg.train)
    if cfg.n_train < cfg.train.batch:
        raise ValueError(
            f"n_train={cfg.n_train!r}: expected at least one batch (train.batch={cfg.train.batch})"
        )
    ctr, cte = cfg.cover_clouds
    if ctr > cfg.n_train or cte > cfg.n_test:
        raise ValueError(
            f"cover_clouds={cfg.cover_clouds!r}: expected at most (n_train, n_test) = "
            f"({cfg.n_train}, {cfg.n_test}) clouds"
        )
    if cfg.data_root:
        if cfg.dims != (3,):
            raise ValueError(f"dims={cfg.dims!r}: ModelNet clouds are 3-D; expected (3,)")
        check_modelnet("data_root", cfg.data_root, "modelnet40", "n_points", cfg.n_points)
    elif ctr < cfg.n_classes:
        raise ValueError(
            f"cover_clouds={cfg.cover_clouds!r}: expected at least n_classes={cfg.n_classes} "
            "training clouds for the covering proxy"
        )


def _data(cfg: RotationsConfig, d: int):
    import numpy as np

    from geomopt.canon._data import load_modelnet, shape_family_clouds
    from geomopt.canon._rotations import random_rotations

    if cfg.data_root:
        xtr, ytr, xte, yte = load_modelnet(cfg.data_root, "modelnet40", n_points=cfg.n_points)
        xtr, ytr, xte, yte = (
            xtr[: cfg.n_train],
            ytr[: cfg.n_train],
            xte[: cfg.n_test],
            yte[: cfg.n_test],
        )
    else:
        x, y = shape_family_clouds(
            cfg.n_train + cfg.n_test, cfg.n_points, d, cfg.n_classes, k=cfg.k,
            seed=cfg.data_seed + 1000 * d, deform=0.3, noise=0.01,
        )  # fmt: skip
        xtr, ytr, xte, yte = x[: cfg.n_train], y[: cfg.n_train], x[cfg.n_train :], y[cfg.n_train :]

    def rotate(x, seed):
        x = x - x.mean(axis=1, keepdims=True)
        r = random_rotations(len(x), x.shape[-1], seed=seed)
        return np.einsum("npd,ned->npe", x, r).astype(np.float32)

    return rotate(xtr, cfg.data_seed + 1), ytr, rotate(xte, cfg.data_seed + 2), yte


def run(cfg: RotationsConfig, run: Run) -> dict[str, float]:
    import numpy as np

    from geomopt.canon._classify import fit
    from geomopt.canon._rotations import rotation_covering_proxy
    from geomopt.canon.exp_classify import stats

    seeds = list(range(cfg.n_seeds))
    bar = run.progress(total=len(cfg.dims) * len(cfg.canons) * 2, desc="rotations", unit="step")
    out: dict[str, float] = {}
    n_classes = cfg.n_classes
    for d in cfg.dims:
        xtr, ytr, xte, yte = _data(cfg, d)
        n_classes = int(max(ytr.max(), yte.max())) + 1
        ctr, cte = cfg.cover_clouds
        seen = np.isin(yte[:cte], ytr[:ctr])  # test clouds whose class has a training cloud
        for canon in cfg.canons:
            bar.set_description(f"d={d}, {canon}, training {cfg.n_seeds} seeds")
            (r,) = fit(f"rot_{canon}", xtr, ytr, xte, yte, n_classes, cfg.train, seeds)
            bar.update(1)
            bar.set_description(f"d={d}, {canon}, covering proxy")
            if seen.any():
                cover = rotation_covering_proxy(
                    xte[:cte][seen], yte[:cte][seen], xtr[:ctr], ytr[:ctr], canon
                )
            else:
                cover = float("nan")
                run.explain_nan(f"cover/{canon}/d{d}", "no covering test cloud has a training "
                                "cloud of its class among the first cover_clouds[0]")  # fmt: skip
            bar.update(1)
            row = dict(d=d, canon=canon, n_train=int(r["n_train"]), cover=cover)
            for key in ("train_acc", "train_acc_running", "test_acc", "gap"):
                row[key] = [float(v) for v in r[key]]
                row[key + "_mean"], row[key + "_std"] = stats(r[key])
            run.log(**row)
            out[f"acc/{canon}/d{d}"] = row["test_acc_mean"]
            out[f"gap/{canon}/d{d}"] = row["gap_mean"]
            out[f"cover/{canon}/d{d}"] = cover
    bar.close()
    run.details["n_classes"] = n_classes
    return out


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``rotations.png``: test accuracy, gap and covering proxy per canonization and d."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    rec = read_run(run_dir)
    rows = rec.metrics
    canons = [c for c in rec.config_values["canons"] if any(r["canon"] == c for r in rows)]
    dims = sorted({r["d"] for r in rows})
    fig, axes = plotting.figure(3, 1, width=3.0, height=2.6)
    width = 0.8 / len(dims)
    for j, d in enumerate(dims):
        rs = {r["canon"]: r for r in rows if r["d"] == d}
        pos = np.arange(len(canons)) + (j - (len(dims) - 1) / 2) * width
        c = plotting.color(f"d{d}")
        for ax, key in zip(axes[0, :2], ("test_acc", "gap"), strict=True):
            ax.bar(pos, [rs[k][key + "_mean"] for k in canons], width,
                   yerr=[rs[k][key + "_std"] for k in canons], capsize=2, color=c,
                   label=f"d = {d}")  # fmt: skip
        axes[0, 2].bar(pos, [rs[k]["cover"] for k in canons], width, color=c, label=f"d = {d}")
    for ax, lab in zip(axes[0], ("test accuracy", "gap (train - test)", "covering proxy"),
                       strict=True):  # fmt: skip
        ax.set_xticks(np.arange(len(canons)))
        ax.set_xticklabels(canons, rotation=30, ha="right")
        ax.set_ylabel(lab)
    axes[0, 2].legend(loc="best")
    src = "ModelNet40" if rec.config_values["data_root"] else "shape families"
    fig.suptitle(f"randomly rotated clouds ({src}), DeepSets backbone, mean +- std over seeds")
    return [plotting.save(fig, figure_path(run_dir, out, "rotations"))]


EXPERIMENT = Experiment(
    name="canon/rotations",
    description="PCA / frame averaging / skewness / random frames on rotated clouds (DeepSets), "
    "accuracy, gap and covering proxy",
    presets={
        "smoke": RotationsConfig(
            n_train=16,
            n_test=8,
            n_points=8,
            n_classes=2,
            n_seeds=2,
            cover_clouds=(4, 2),
            train=TrainConfig(epochs=1, batch=8, fast_compile=True),
        ),
        "quick": RotationsConfig(),
        "paper": RotationsConfig(
            dims=(2, 3, 4),
            n_train=4096,
            n_test=1024,
            n_points=256,
            n_classes=10,
            n_seeds=5,
            cover_clouds=(256, 64),
            train=TrainConfig(epochs=100, batch=32),
        ),
    },  # fmt: skip
    notes={
        "smoke": "tiny sizes, every canonization, 1 epoch",
        "quick": "d = 3, 512 rotated clouds of 64 points, 20 epochs, 3 seeds (CPU)",
        "paper": "d = 2/3/4, 4096 clouds of 256 points, 100 epochs, 5 seeds (GPU); "
        "--data-root DIR for ModelNet40",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "acc/none/d3",
        "acc/pca/d3",
        "acc/frame_avg/d3",
        "acc/skew/d3",
        "cover/pca/d3",
        "cover/frame_avg/d3",
    ),
    seconds={"smoke": 13.6, "quick": 1200.0},
)
