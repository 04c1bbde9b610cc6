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
The headline and table are :mod:`geomopt.canon._exp_classify_report`, the figure
:mod:`geomopt.canon._exp_classify_plot`.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from geomopt.canon._checks import check_train
from geomopt.canon._exp_classify_plot import draw_sweep as draw_sweep
from geomopt.canon._exp_classify_plot import plot
from geomopt.canon._exp_classify_report import contrast_table, summarise
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig, TrainConfig
from geomopt.checks import (
    check_ints,
    check_names,
    check_nonnegative,
    check_one_of,
    check_tuples,
)
from geomopt.experiment import Experiment, Run


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
