"""``canon/rotated_digits``: the official rotated-MNIST comparison — a plain CNN, the CNN
averaged over the four quarter turns, and a p4-equivariant canonizer in front of the CNN — and
the official distance-to-bank numbers, with the upright images as the control.

    uv run experiments/canon/rotated_digits.py [smoke|quick|paper] [--field value ...]

Data (``data``): ``digits`` (offline: scikit-learn's 1,797 8 x 8 digits, resized onto a MNIST-like
canvas, :func:`geomopt.vision.sklearn_digits`; each image turned by an angle drawn uniformly in
[0, 360), as the official rotated MNIST), ``mnist_rot`` (the official data,
:func:`geomopt.vision.fetch_mnist_rot`: 10,000 train / 2,000 valid / 50,000 test) or ``mnist``
(:func:`geomopt.vision.fetch_mnist`, turned by uniform angles here). ``rotation="quarter"``
turns by multiples of 90 degrees only (the group the models are invariant to).

Models (:mod:`geomopt.canon._rotated_cnn`): ``cnn``, ``average`` and ``learned_can``; AdamW at
1e-3, batch 256 (official), validation every ``eval_every`` epochs and the test accuracy of
the best validation epoch (the official keeps the best checkpoint; its early stopping with
patience 20 of 100 epochs is not reproduced: the epochs are fixed here). Seeds are the unit of
replication (model initialisation and batch order; the data and its rotations are fixed by
``data_seed``), as in the official 5-seed runs.

Distances (the official ``compute_distances.py``): for each test image ``x``, the RMS pixel
distance to its nearest training image (``plain``), to the nearest quarter turn of a training
image (``group``: the covering quantity for C4) and between canonized images
(``canonized``: ``min_y d(c(x), c(y))`` with each seed's canonizer; officially an untrained one).
``group <= canonized`` always holds (a canonization picks one turn of each).

The control (``control=True``): the same models and distances on the upright images. The
theory's cause of an advantage of the invariant models is the data's rotation symmetry; with the
rotations removed it is gone (and invariance to quarter turns can only cost, e.g. 6 vs 9).

Headline: ``<rotated|upright>/<model>/test_acc`` (``/lo``, ``/hi``: 95 % over seeds),
``.../train_acc``, ``.../gap``; ``<cond>/<model>_minus_cnn/test_acc`` (paired by seed);
``<cond>/distance/<plain|group|canonized>``; ``invariance/<model>/max_logit_change`` (largest
change of a logit when the test images are turned by a quarter turn: 0 up to float error for
``average`` and ``learned_can``). Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_one_of, check_positive
from geomopt.experiment import Experiment, Run, figure_path

MODELS = ("cnn", "average", "learned_can")
DATA = ("digits", "mnist_rot", "mnist")
ROTATIONS = ("arbitrary", "quarter")


@dataclasses.dataclass(frozen=True)
class RotatedDigitsConfig:
    """Plain / averaged / canonized CNNs on rotated digits, with the upright control.

    Paper command: ``uv run experiments/canon/rotated_digits.py paper`` (fetches rotated MNIST;
    a GPU is advisable)."""

    data: Literal["digits", "mnist_rot", "mnist"] = "digits"
    """Images: "digits" (scikit-learn, offline), "mnist_rot" (official rotated MNIST) or
    "mnist" (IDX files, rotated here)."""
    rotation: Literal["arbitrary", "quarter"] = "arbitrary"
    """How "digits" / "mnist" images are turned: uniform angles in [0, 360) (as the official
    data) or uniform quarter turns."""
    control: bool = True
    """Also run on the upright images (the rotations removed)."""
    models: tuple[str, ...] = MODELS
    """Models: cnn, average (over the 4 quarter turns), learned_can (p4 canonizer + CNN)."""
    n_seeds: int = 3
    """Seeds (official: 5)."""
    data_seed: int = 0
    """Seed of the split and of the rotation angles."""
    canvas: int = 20
    """Canvas side of "digits" (the digit fills 5/7 of it, as MNIST's 20 in 28; >= 20 for the
    official CNN)."""
    channels: int = 32
    """The CNN's first width (official: 32; doubled twice)."""
    epochs: int = 30
    """Training epochs."""
    eval_every: int = 5
    """Validation every this many epochs; the test accuracy is the best validation epoch's."""
    batch_size: int = 256
    """Mini-batch (official: 256)."""
    lr: float = 1e-3
    """AdamW learning rate (official: 1e-3, weight decay 0.01, torch's default)."""
    n_train: int = 1000
    """Training images ("digits": of 1,797; MNIST: of 10,000)."""
    n_val: int = 200
    """Validation images."""
    n_test: int = 597
    """Test images."""
    n_distance: int = 597
    """Test images of the distance computation (the bank is the whole training set)."""
    train_canonizer: bool = False
    """Train the canonizer through a straight-through softmax (official: frozen at init)."""


def validate(cfg: RotatedDigitsConfig) -> None:
    check_one_of(cfg, "data", DATA)
    check_one_of(cfg, "rotation", ROTATIONS)
    check_names(cfg, "models", MODELS)
    check_ints(cfg, "n_seeds", "epochs", "eval_every", "batch_size", "n_train", "n_val",
               "n_test", "n_distance", "channels")  # fmt: skip
    check_positive(cfg, "lr")
    if cfg.canvas < 20:
        raise ValueError(f"canvas={cfg.canvas}: expected >= 20 (the official CNN's two stride-2 "
                         "convolutions need it)")  # fmt: skip
    if cfg.batch_size > cfg.n_train:
        raise ValueError(f"batch_size={cfg.batch_size}: expected <= n_train={cfg.n_train}")
    if cfg.data == "digits" and cfg.n_train + cfg.n_val + cfg.n_test > 1797:
        raise ValueError(f"n_train + n_val + n_test = {cfg.n_train + cfg.n_val + cfg.n_test}: "
                         "scikit-learn's digits has 1797 images")  # fmt: skip
    if cfg.n_distance > cfg.n_test:
        raise ValueError(f"n_distance={cfg.n_distance}: expected <= n_test={cfg.n_test}")


def load_splits(cfg: RotatedDigitsConfig, *, rotated: bool):
    """``(train, val, test)`` :class:`geomopt.vision.ImageSet` of the configured data, turned
    (``rotated``) or upright."""
    import numpy as np

    from geomopt import vision

    rng = np.random.default_rng(cfg.data_seed)
    if cfg.data == "mnist_rot":
        if not rotated:
            raise ValueError("data='mnist_rot' has no upright images: use data='mnist' for the "
                             "control")  # fmt: skip
        d = vision.fetch_mnist_rot()
        train, test = d["train"].take(slice(0, 10_000)), d["test"]
        val = d["train"].take(slice(10_000, 12_000))
        return (train.take(slice(0, cfg.n_train)), val.take(slice(0, cfg.n_val)),
                test.take(slice(0, cfg.n_test)))  # fmt: skip
    if cfg.data == "digits":
        full = vision.sklearn_digits(canvas=cfg.canvas, box=round(cfg.canvas * 20 / 28))
        idx = rng.permutation(len(full))
        parts = np.split(idx[: cfg.n_train + cfg.n_val + cfg.n_test],
                         [cfg.n_train, cfg.n_train + cfg.n_val])  # fmt: skip
        sets = [full.take(p) for p in parts]
    else:
        d = vision.fetch_mnist()
        sets = [d["train"].take(slice(0, cfg.n_train)),
                d["train"].take(slice(50_000, 50_000 + cfg.n_val)),
                d["test"].take(slice(0, cfg.n_test))]  # fmt: skip
    if not rotated:
        return tuple(sets)
    out = []
    for s in sets:
        if cfg.rotation == "quarter":
            ang = 90.0 * rng.integers(0, 4, len(s))
        else:
            ang = rng.uniform(0.0, 360.0, len(s))
        out.append(vision.ImageSet(vision.rotate(s.x, ang), s.y, s.name + " rotated"))
    return tuple(out)


def build_model(name: str, cfg: RotatedDigitsConfig, side: int, seed: int):
    from flax import nnx

    from geomopt.canon._rotated_cnn import CNN, AveragedCNN, CanonizedCNN

    kw = dict(side=side, channels=cfg.channels, rngs=nnx.Rngs(params=seed, dropout=seed + 1))
    if name == "cnn":
        return CNN(**kw)
    if name == "average":
        return AveragedCNN(**kw)
    return CanonizedCNN(train_canonizer=cfg.train_canonizer, **kw)


def nearest_distances(test, bank, *, chunk: int = 256):
    """Per test image, the RMS pixel distance to its nearest bank image: ``(M,)``. ``test``
    ``(M, P)``, ``bank`` ``(N, P)`` or ``(N, G, P)`` (the minimum also over ``G``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    bank = jnp.asarray(bank).reshape(-1, bank.shape[-1])
    bn = jnp.sum(bank**2, -1)

    @jax.jit
    def one(x):
        d2 = jnp.sum(x**2, -1)[:, None] + bn[None, :] - 2 * x @ bank.T
        return jnp.sqrt(jnp.maximum(jnp.min(d2, -1), 0.0) / bank.shape[-1])

    return np.concatenate([np.asarray(one(jnp.asarray(test[i : i + chunk])))
                           for i in range(0, len(test), chunk)])  # fmt: skip


def _train_one(cfg, name, seed, train, val, test, run, bar, tag, tx):
    import numpy as np

    from geomopt.vision import Classifier

    # one optimiser object for every model: nnx.jit's cache is keyed by it (no re-trace per seed)
    clf = Classifier(build_model(name, cfg, train.x.shape[1], seed), tx)
    rng = np.random.default_rng(seed)
    best = (-1.0, None, None)
    for epoch in range(1, cfg.epochs + 1):
        tr = clf.fit_epoch(train.x, train.y, batch_size=cfg.batch_size, rng=rng)
        bar.update(1)
        if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
            va = clf.evaluate(val.x, val.y)
            run.log(**dict(tag, model=name, seed=seed, epoch=epoch, train_loss=tr["loss"],
                         train_batch_acc=tr["acc"], val_acc=va["acc"]))  # fmt: skip
            if va["acc"] > best[0]:
                best = (va["acc"], epoch, (clf.evaluate(test.x, test.y)["acc"],
                                           clf.evaluate(train.x, train.y)["acc"]))  # fmt: skip
    return clf, dict(val_acc=best[0], best_epoch=best[1], test_acc=best[2][0],
                     train_acc=best[2][1])  # fmt: skip


def run(cfg: RotatedDigitsConfig, run: Run) -> dict[str, float]:
    import numpy as np
    import optax

    from geomopt.canon._rotated_cnn import quarter_turns
    from geomopt.stats import put_mean_ci

    tx = optax.adamw(cfg.lr, weight_decay=0.01)  # torch's AdamW default decay, as official
    headline: dict[str, float] = {}
    conds = [("rotated", True)] + ([("upright", False)] if cfg.control else [])
    total = len(conds) * len(cfg.models) * cfg.n_seeds * cfg.epochs
    bar = run.progress(total=total, desc="train")
    table = []
    for cond, rotated in conds:
        train, val, test = load_splits(cfg, rotated=rotated)
        flat = train.x.reshape(len(train), -1)
        xd = test.x[: cfg.n_distance]
        turns = np.stack([np.asarray(quarter_turns(train.x, k)) for k in range(4)], 1)
        dist = {"plain": nearest_distances(xd.reshape(len(xd), -1), flat),
                "group": nearest_distances(xd.reshape(len(xd), -1),
                                           turns.reshape(len(train), 4, -1))}  # fmt: skip
        canon_d, res = [], {m: [] for m in cfg.models}
        for name in cfg.models:
            for seed in range(cfg.n_seeds):
                bar.set_description(f"{cond}: {name}, seed {seed}")
                clf, r = _train_one(cfg, name, seed, train, val, test, run, bar,
                                    dict(condition=cond), tx)  # fmt: skip
                model = clf.model
                model.eval()
                lg = clf.logits(test.x)
                change = max(float(np.max(np.abs(clf.logits(np.asarray(quarter_turns(test.x, k)))
                                                  - lg))) for k in (1, 2, 3))  # fmt: skip
                r["max_logit_change"] = change
                if name == "learned_can":
                    c_train = np.asarray(model.canonize(train.x)[0]).reshape(len(train), -1)
                    c_test = np.asarray(model.canonize(xd)[0]).reshape(len(xd), -1)
                    canon_d.append(float(np.mean(nearest_distances(c_test, c_train))))
                res[name].append(r)
                run.log(**dict(condition=cond, model=name, seed=seed, final=True, **r))
        for name, rs in res.items():
            key = f"{cond}/{name}"
            put_mean_ci(headline, f"{key}/test_acc", [r["test_acc"] for r in rs])
            put_mean_ci(headline, f"{key}/train_acc", [r["train_acc"] for r in rs])
            put_mean_ci(headline, f"{key}/gap", [r["train_acc"] - r["test_acc"] for r in rs])
            if cond == "rotated":
                headline[f"invariance/{name}/max_logit_change"] = max(
                    r["max_logit_change"] for r in rs)
            table.append(dict(condition=cond, model=name, **{
                k: float(np.mean([r[k] for r in rs])) for k in ("test_acc", "train_acc")}))
            if name != "cnn" and "cnn" in res:
                diff = [a["test_acc"] - b["test_acc"] for a, b in zip(rs, res["cnn"], strict=True)]
                put_mean_ci(headline, f"{cond}/{name}_minus_cnn/test_acc", diff)
        headline[f"{cond}/distance/plain"] = float(np.mean(dist["plain"]))
        headline[f"{cond}/distance/group"] = float(np.mean(dist["group"]))
        if canon_d:
            put_mean_ci(headline, f"{cond}/distance/canonized", canon_d)
    bar.close()
    run.details["table"] = table
    run.print(_markdown(cfg, headline))
    return headline


def _markdown(cfg, h) -> str:
    conds = ["rotated"] + (["upright"] if cfg.control else [])
    lines = ["| data | model | test accuracy | train accuracy | minus cnn |", "|---|---|" +
             "---:|" * 3]  # fmt: skip
    for c in conds:
        for m in cfg.models:
            acc = h.get(f"{c}/{m}/test_acc", float("nan"))
            lo, hi = h.get(f"{c}/{m}/test_acc/lo"), h.get(f"{c}/{m}/test_acc/hi")
            band = f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""
            d = h.get(f"{c}/{m}_minus_cnn/test_acc")
            lines.append(f"| {c} | {m} | {acc:.3f}{band} | "
                         f"{h.get(f'{c}/{m}/train_acc', float('nan')):.3f} | "
                         f"{'' if d is None else f'{d:+.3f}'} |")  # fmt: skip
    lines += ["", "| data | plain | group (C4) | canonized |", "|---|---:|---:|---:|"]
    for c in conds:
        lines.append(f"| {c} | {h[f'{c}/distance/plain']:.4f} | {h[f'{c}/distance/group']:.4f} | "
                     f"{h.get(f'{c}/distance/canonized', float('nan')):.4f} |")  # fmt: skip
    return "\n".join(lines)


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``rotated_digits.png``: test accuracy per model (mean and 95 % interval over seeds), on
    the rotated images and on the upright control; and the three nearest-image distances."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg, h = record.config_values, record.headline
    conds = ["rotated"] + (["upright"] if cfg.get("control") else [])
    fig, axes = plotting.figure(2, 1, width=3.4, height=2.6)
    ax, ax2 = np.asarray(axes).ravel()
    models = list(cfg["models"])
    x = np.arange(len(models))
    for j, c in enumerate(conds):
        y = np.array([h[f"{c}/{m}/test_acc"] for m in models])
        lo = np.array([h.get(f"{c}/{m}/test_acc/lo", np.nan) for m in models])
        hi = np.array([h.get(f"{c}/{m}/test_acc/hi", np.nan) for m in models])
        err = np.nan_to_num(np.stack([y - lo, hi - y]))
        ax.bar(x + 0.38 * (j - 0.5 * (len(conds) - 1)), y, 0.36, yerr=err, capsize=3, label=c)
    ax.set_xticks(x, models)
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=7)
    kinds = ["plain", "group", "canonized"]
    for j, c in enumerate(conds):
        y = [h.get(f"{c}/distance/{k}", np.nan) for k in kinds]
        ax2.bar(np.arange(3) + 0.38 * (j - 0.5 * (len(conds) - 1)), y, 0.36, label=c)
    ax2.set_xticks(np.arange(3), kinds)
    ax2.set_ylabel("RMS distance to the nearest training image")
    return [plotting.save(fig, figure_path(run_dir, out, "rotated_digits"))]


EXPERIMENT = Experiment(
    name="canon/rotated_digits",
    description="plain CNN vs CNN averaged over quarter turns vs p4 canonizer + CNN on rotated "
    "digits (the official rotated-MNIST models), distances to the training bank, upright control",
    presets={
        "smoke": RotatedDigitsConfig(
            n_seeds=2, channels=4, epochs=2, eval_every=1, batch_size=64, n_train=128, n_val=64,
            n_test=64, n_distance=32,
        ),  # fmt: skip
        "quick": RotatedDigitsConfig(channels=16),
        "paper": RotatedDigitsConfig(
            data="mnist_rot", control=False, n_seeds=5, canvas=28, epochs=100, eval_every=10,
            n_train=10_000, n_val=2_000, n_test=50_000, n_distance=2_000,
        ),  # fmt: skip
    },
    notes={
        "smoke": "4-channel CNNs, 128 training digits, 2 epochs, 2 seeds (seconds)",
        "quick": "scikit-learn digits on a 20 x 20 canvas at uniform angles, 16-channel CNNs, "
        "1000 train / 200 val / 597 test, 30 epochs, 3 seeds, with the upright control",
        "paper": "the official rotated MNIST (fetched), official CNNs, 100 epochs, 5 seeds",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "rotated/average_minus_cnn/test_acc",
        "rotated/learned_can_minus_cnn/test_acc",
        "upright/average_minus_cnn/test_acc",
        "invariance/learned_can/max_logit_change",
    ),
    paper_source="the official repository reports no rotated-MNIST numbers (README: commands "
    "only)",
    # smoke and quick measured (quick 623 s); paper an estimate
    seconds={"smoke": 38.0, "quick": 623.0, "paper": 7200.0},
)
