"""``canon/modelnet``: the official permutation-canonization experiment on ModelNet10/40.

    uv run experiments/canon/modelnet.py paper --data-root DIR [--dataset modelnet40]

Reads the standard ``ply_data_{train,test}*.h5`` shards (keys ``data`` N x 2048 x 3 and
``label``) from ``DIR/modelnet10_ply_hdf5_2048/`` (or ``modelnet40_...``, or ``DIR`` itself) with
the official preprocessing: 1024 points by stride 2 (``pc[::2][:1024]``; farthest-point sampling
with ``--sampling fps``), per-cloud normalisation inside the models (per-axis minimum, one global
scale). Settings per order as the official ``configs/modelnet.json`` (``ORDER_PRESETS``), AdamW,
cosine per epoch to lr * 1e-3, batch 256 with drop-last, 100 epochs, 5 seeds, point dropout 0.2
and input dropout 0.2; the test set is the validation set and the last epoch is reported; the
data-scarcity table trains on every stride-th training cloud (fractions 1, 1/2, 1/4, 1/8).
Reported: test accuracy and gap (train - test accuracy), mean +- std (ddof 1) over seeds.

Without the data the ``paper`` preset stops before creating a run folder and says where to put
the files. The ``smoke`` / ``quick`` presets write small *synthetic* HDF5 shards of the same
layout (3-D shape families, ``--demo``) into the run folder and read them back through the same
loader: they test the pipeline, not ModelNet.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.canon._checks import check_modelnet, check_train
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig, TrainConfig
from geomopt.checks import check_ints, check_names, check_tuples
from geomopt.experiment import Experiment, Run, figure_path

MODELNET_DATASETS = ("modelnet10", "modelnet40")


@dataclasses.dataclass(frozen=True)
class ModelNetConfig:
    """Canonized / unsorted classifiers on ModelNet, with the data-scarcity fractions.

    Paper launch: ``uv run experiments/canon/modelnet.py paper --data-root DIR``.
    """

    data_root: str = "data"
    """Folder holding modelnet10_ply_hdf5_2048/ or modelnet40_ply_hdf5_2048/ (or the
    ply_data_*.h5 files themselves)."""
    dataset: Literal["modelnet10", "modelnet40"] = "modelnet10"
    """Which data set (official default: ModelNet10)."""
    kinds: tuple[str, ...] = ("lex", "hilbert", "unsorted")
    """Models (official: lex, hilbert, unsorted = the official "ply"; also morton, perm_sample_avg,
    deepsets, transformer_*)."""
    strides: tuple[int, ...] = (1, 2, 4, 8)
    """Train on every stride-th training cloud (official data-scarcity table: 1, 2, 4, 8)."""
    n_points: int = 1024
    """Points per cloud (official 1024 of the 2048 in the files)."""
    sampling: Literal["stride", "fps"] = "stride"
    """"stride": pc[::2][:1024] (official default); "fps": farthest-point sampling."""
    n_seeds: int = 5
    """Seeds (official 5), trained together."""
    train: TrainConfig = TrainConfig()
    """Training recipe (official by default)."""
    demo: bool = False
    """Write small synthetic HDF5 shards of the ModelNet layout into the run folder and use them
    instead of `data_root` (tests the pipeline without the data; not ModelNet)."""
    demo_clouds: tuple[int, int] = (256, 128)
    """Training and test clouds of the synthetic shards."""
    demo_classes: int = 10
    """Classes of the synthetic shards (>= 2)."""


def validate(cfg: ModelNetConfig) -> None:
    check_names(cfg, "kinds", MODEL_KINDS)
    check_tuples(cfg, "strides")
    check_ints(cfg, "strides", "n_points", "n_seeds", "demo_clouds")
    check_ints(cfg, "demo_classes", minimum=2)
    check_train(cfg.train)
    if cfg.dataset not in MODELNET_DATASETS:
        raise ValueError(f"dataset={cfg.dataset!r}: expected one of {MODELNET_DATASETS}")
    if cfg.sampling not in ("stride", "fps"):
        raise ValueError(f"sampling={cfg.sampling!r}: expected 'stride' or 'fps'")
    window = cfg.train.model.tf_window
    if any(k.startswith("transformer_") for k in cfg.kinds) and cfg.n_points % window:
        raise ValueError(
            f"train.model.tf_window={window!r}: expected a divisor of n_points={cfg.n_points}"
        )
    if cfg.demo:
        field, n_tr = "demo_clouds", cfg.demo_clouds[0]
    else:
        field = "data_root"
        n_tr = check_modelnet("data_root", cfg.data_root, cfg.dataset, "n_points", cfg.n_points)
    if -(-n_tr // max(cfg.strides)) < cfg.train.batch:
        raise ValueError(
            f"{field}={getattr(cfg, field)!r}: {n_tr} training clouds at stride "
            f"{max(cfg.strides)} are fewer than one batch of {cfg.train.batch}; expected at "
            f"least {cfg.train.batch * max(cfg.strides)} (or a smaller train.batch / strides)"
        )


def write_demo_shards(folder: Path, cfg: ModelNetConfig) -> Path:
    """Synthetic ``ply_data_{train,test}0.h5`` (3-D shape families, ``2 * n_points`` points,
    labels ``(N, 1)`` uint8) in ``folder/<dataset dir>/``; returns ``folder``."""
    import h5py

    from geomopt.canon._data import MODELNET_DIRS, shape_family_clouds

    where = folder / MODELNET_DIRS[cfg.dataset]
    where.mkdir(parents=True, exist_ok=True)
    for i, (split, n) in enumerate(zip(("train", "test"), cfg.demo_clouds, strict=True)):
        x, y = shape_family_clouds(
            n, 2 * cfg.n_points, 3, cfg.demo_classes, k=2, seed=100 + i, deform=0.3, noise=0.01
        )
        with h5py.File(where / f"ply_data_{split}0.h5", "w") as f:
            f["data"] = x
            f["label"] = y.astype("uint8")[:, None]
    return folder


def run(cfg: ModelNetConfig, run: Run) -> dict[str, float]:
    import numpy as np

    from geomopt.canon._classify import fit
    from geomopt.canon._data import load_modelnet
    from geomopt.canon.exp_classify import sweep_rows

    root = write_demo_shards(run.file("demo_data"), cfg) if cfg.demo else Path(cfg.data_root)
    xtr, ytr, xte, yte = load_modelnet(root, cfg.dataset, n_points=cfg.n_points,
                                       sampling=cfg.sampling)  # fmt: skip
    n_classes = int(max(ytr.max(), yte.max())) + 1
    run.details.update(
        n_train=len(ytr), n_test=len(yte), n_classes=n_classes, source=str(root), demo=cfg.demo
    )
    run.print(f"{len(ytr)} training / {len(yte)} test clouds, {n_classes} classes from {root}")
    bar = run.progress(total=len(cfg.kinds) * len(cfg.strides), desc="modelnet", unit="fit")
    rows: list[dict] = []
    for kind in cfg.kinds:
        bar.set_description(f"{kind}, {cfg.n_seeds} seeds")
        res = fit(
            kind, xtr, ytr, xte, yte, n_classes, cfg.train, list(range(cfg.n_seeds)),
            strides=cfg.strides, on_stride=lambda _: bar.update(1),
        )  # fmt: skip
        rows += sweep_rows(run, bar, kind=kind, results=res, strides=cfg.strides, d=3)
    bar.close()
    out: dict[str, float] = {}
    for r in rows:
        frac = "" if r["stride"] == 1 else f"/frac1_{r['stride']}"
        out[f"acc/{r['kind']}{frac}"] = r["test_acc_mean"]
        out[f"acc_std/{r['kind']}{frac}"] = r["test_acc_std"]
        out[f"gap/{r['kind']}{frac}"] = r["gap_mean"]
    out["n_train"] = float(np.asarray(len(ytr)))
    return out


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``modelnet.png``: test accuracy and gap vs training fraction per model."""
    from geomopt import plotting
    from geomopt.canon.exp_classify import draw_sweep
    from geomopt.experiment import read_run

    rec = read_run(run_dir)
    cfg = rec.config_values
    rows = rec.metrics
    kinds = [k for k in cfg["kinds"] if any(r["kind"] == k for r in rows)]
    fig, axes = plotting.figure(2, 1, width=3.6, height=2.7)
    fracs = sorted({r["fraction"] for r in rows})
    draw_sweep(rows, kinds, "fraction", axes[0], xs_ticks=fracs, log2=True)
    for ax in axes[0]:
        ax.set_xlabel("training fraction")
    src = "synthetic demo shards (not ModelNet)" if cfg["demo"] else cfg["dataset"]
    fig.suptitle(f"{src}, {cfg['n_points']} points, {cfg['n_seeds']} seeds")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return [plotting.save(fig, figure_path(run_dir, out, "modelnet"))]


_SMOKE = TrainConfig(
    epochs=1,
    batch=8,
    model=ModelConfig(mlp_dims=(16,), n_bands=1, n_perms=2, deepsets_width=8),
    fast_compile=True,
)

EXPERIMENT = Experiment(
    name="canon/modelnet",
    description="lex / Hilbert / unsorted MLPs on ModelNet10/40 HDF5 (official preprocessing and "
    "recipe), with the data-scarcity fractions",
    presets={
        "smoke": ModelNetConfig(
            demo=True,
            demo_clouds=(32, 16),
            demo_classes=3,
            n_points=16,
            strides=(1, 2),
            n_seeds=2,
            train=_SMOKE,
        ),
        "quick": ModelNetConfig(
            demo=True,
            demo_clouds=(512, 256),
            n_points=64,
            n_seeds=3,
            train=TrainConfig(epochs=20, batch=32, model=ModelConfig(mlp_dims=(128, 64, 32))),
        ),
        "paper": ModelNetConfig(),
        "paper40": ModelNetConfig(dataset="modelnet40"),
    },  # fmt: skip
    notes={
        "smoke": "synthetic HDF5 shards of the ModelNet layout, tiny (pipeline check)",
        "quick": "synthetic HDF5 shards (512 / 256 clouds of 64 points), 20 epochs (pipeline "
        "check on a CPU; not ModelNet)",
        "paper": "ModelNet10 from --data-root, official recipe (GPU: 15 trainings of 100 epochs)",
        "paper40": "ModelNet40 from --data-root, official recipe",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "acc/lex",
        "acc/hilbert",
        "acc/unsorted",
        "gap/lex",
        "gap/hilbert",
        "gap/unsorted",
    ),
    seconds={"smoke": 4.6, "quick": 16.0},  # quick: the demo families (no ModelNet files)
)
