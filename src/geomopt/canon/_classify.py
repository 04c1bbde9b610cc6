"""Training of the point-cloud classifiers and the classification experiment (vs d, vs data).

Recipe (official, canon.md): AdamW, cosine decay of the learning rate to ``lr * 1e-3``,
label-smoothed softmax cross-entropy. All seeds of one setting are trained together: the models
are stacked (``eqx.filter_vmap`` over init keys) and one jitted ``lax.scan`` runs the steps of
every seed at once. Minibatches are drawn uniformly *with replacement* from the first
``n_train`` clouds (``n_train`` is a traced value, so the training-set-size sweep reuses one
compilation per model and d). Reported: train / test accuracy and the generalization gap
``train accuracy - test accuracy``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from geomopt.canon._data import synthetic_clouds
from geomopt.canon._models import MODEL_KINDS, ORDER_PRESETS, ModelConfig, make_model
from geomopt.runs import Run, load_run

__all__ = [
    "TrainConfig",
    "ClassifyConfig",
    "model_config",
    "init_models",
    "train_models",
    "accuracy",
    "fit",
    "run_classify",
    "plot_classify",
]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings shared by every model of a sweep."""

    steps: int = 300
    """Optimiser steps."""
    batch: int = 64
    """Minibatch size (official: 256)."""
    use_order_presets: bool = True
    """Take dropout / Fourier scale / label smoothing / lr / weight decay from the official
    per-order settings (``ORDER_PRESETS``) instead of ``model``."""
    model: ModelConfig = ModelConfig()
    """Architecture (and hyperparameters when ``use_order_presets`` is False)."""


def model_config(kind: str, train: TrainConfig) -> ModelConfig:
    """The model config of ``kind``: ``train.model`` with the official per-order settings."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")
    if not train.use_order_presets:
        return train.model
    return dataclasses.replace(train.model, **ORDER_PRESETS[kind])


def init_models(kind: str, n_points: int, d: int, n_classes: int, cfg: ModelConfig, seeds):
    """Stacked models, one per seed (leading axis = seed)."""
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
    return eqx.filter_vmap(
        lambda k: make_model(kind, n_points, d, n_classes, cfg, key=jax.random.wrap_key_data(k))
    )(keys)


def _optimizer(cfg: ModelConfig, steps: int):
    sched = optax.cosine_decay_schedule(cfg.lr, max(steps, 1), alpha=1e-3)
    return optax.adamw(sched, weight_decay=cfg.weight_decay)


def _loss(model, x, y, n_classes: int, smoothing: float, key):
    keys = jax.random.split(key, x.shape[0])
    logits = jax.vmap(lambda c, k: model(c, key=k))(x, keys)
    labels = optax.smooth_labels(jax.nn.one_hot(y, n_classes), smoothing)
    return jnp.mean(optax.softmax_cross_entropy(logits, labels))


@eqx.filter_jit
def _train(models, x, y, n_train, keys, *, cfg: ModelConfig, steps: int, batch: int, n_classes):
    opt = _optimizer(cfg, steps)
    params, static = eqx.partition(models, eqx.is_inexact_array)
    opt_state = jax.vmap(opt.init)(params)

    def one_seed_step(p, s, key):
        kb, kd = jax.random.split(key)
        idx = jax.random.randint(kb, (batch,), 0, n_train)
        loss, g = jax.value_and_grad(
            lambda q: _loss(
                eqx.combine(q, static),
                x[idx],
                y[idx],
                n_classes,
                cfg.label_smoothing,
                kd,
            )
        )(p)
        upd, s = opt.update(g, s, p)
        upd = _freeze_fourier(upd)  # no weight decay on the fixed Fourier matrix either
        return eqx.apply_updates(p, upd), s, loss

    def step(carry, step_keys):
        p, s = carry
        p, s, loss = jax.vmap(one_seed_step)(p, s, step_keys)
        return (p, s), loss

    step_keys = jax.vmap(lambda k: jax.random.split(k, steps))(keys).swapaxes(0, 1)
    (params, _), losses = jax.lax.scan(step, (params, opt_state), step_keys)
    return eqx.combine(params, static), losses.T


def _freeze_fourier(grads):
    def where(m):
        return [
            leaf.B
            for leaf in jax.tree_util.tree_leaves(
                m, is_leaf=lambda n: type(n).__name__ == "FourierFeatures"
            )
            if type(leaf).__name__ == "FourierFeatures" and leaf.B is not None
        ]

    nodes = where(grads)
    if not nodes:
        return grads
    return eqx.tree_at(where, grads, [jnp.zeros_like(b) for b in nodes])


def train_models(
    kind: str,
    x_train,
    y_train,
    n_classes: int,
    train: TrainConfig,
    seeds,
    *,
    n_train: int | None = None,
):
    """Train one model per seed on the first ``n_train`` clouds; returns ``(models, losses)``
    with losses ``(n_seeds, steps)`` (the minibatch training loss of every step)."""
    x_train, y_train = jnp.asarray(x_train), jnp.asarray(y_train)
    if x_train.ndim != 3:
        raise ValueError(f"x_train of shape {x_train.shape}: expected (N, P, d)")
    n = x_train.shape[0] if n_train is None else n_train
    if not 1 <= n <= x_train.shape[0]:
        raise ValueError(f"n_train {n}: expected 1..{x_train.shape[0]}")
    if train.steps < 1 or train.batch < 1:
        raise ValueError(f"steps {train.steps}, batch {train.batch}: expected positive integers")
    cfg = model_config(kind, train)
    _, p, d = x_train.shape
    models = init_models(kind, p, d, n_classes, cfg, seeds)
    keys = jnp.stack(
        [jax.random.key_data(jax.random.fold_in(jax.random.key(int(s)), 1)) for s in seeds]
    )
    keys = jax.vmap(jax.random.wrap_key_data)(keys)
    return _train(
        models,
        x_train,
        y_train,
        jnp.asarray(n, jnp.int32),
        keys,
        cfg=cfg,
        steps=train.steps,
        batch=train.batch,
        n_classes=n_classes,
    )


@eqx.filter_jit
def _predict(models, x):
    return eqx.filter_vmap(lambda m: jnp.argmax(jax.vmap(m)(x), axis=-1))(models)


def accuracy(models, x, y, *, n: int | None = None, chunk: int = 512) -> np.ndarray:
    """Accuracy of each stacked model on the first ``n`` clouds of ``(x, y)``; ``(n_seeds,)``."""
    n = len(y) if n is None else n
    preds = [
        np.asarray(_predict(models, jnp.asarray(x[i : i + chunk]))) for i in range(0, n, chunk)
    ]
    pred = np.concatenate(preds, axis=1)[:, :n]
    return (pred == np.asarray(y[:n])[None]).mean(axis=1)


def fit(kind, x_train, y_train, x_test, y_test, n_classes, train: TrainConfig, seeds, *, n_train):
    """Train and evaluate; returns per-seed train / test accuracy, gap and final loss."""
    models, losses = train_models(kind, x_train, y_train, n_classes, train, seeds, n_train=n_train)
    tr = accuracy(models, x_train, y_train, n=n_train)
    te = accuracy(models, x_test, y_test)
    return dict(train_acc=tr, test_acc=te, gap=tr - te, loss=np.asarray(losses[:, -20:]).mean(1))


@dataclasses.dataclass(frozen=True)
class ClassifyConfig:
    """Generalization of the four model families vs d and vs training-set size."""

    kinds: tuple[str, ...] = ("hilbert", "lex", "unsorted", "group_avg", "deepsets")
    """Models compared (canonized: hilbert / lex / morton; unsorted; group_avg; deepsets)."""
    dims: tuple[int, ...] = (2, 3, 5)
    """Point dimensions of the sweep over d (at the full training set)."""
    fractions: tuple[float, ...] = (1.0, 0.25)
    """Training-set fractions of the data-scarcity sweep (official: 1, 1/2, 1/4, 1/8)."""
    fraction_dim: int = 3
    """Dimension of the data-scarcity sweep."""
    n_train: int = 256
    """Training clouds at fraction 1."""
    n_test: int = 256
    """Test clouds."""
    n_points: int = 32
    """Points per cloud (official ModelNet40: 1024)."""
    n_classes: int = 4
    """Synthetic classes."""
    n_seeds: int = 3
    """Seeds per setting (official: 5), trained together (vmapped)."""
    train: TrainConfig = TrainConfig()
    """Optimisation settings."""
    data_seed: int = 0
    """Seed of the synthetic data."""
    name: str = "quick"
    """Run-folder name under ``<root>/canon/classify``."""


def run_classify(cfg: ClassifyConfig, root: str | Path, *, overwrite: bool = False) -> Path:
    """Run both sweeps; one metrics row per (sweep, kind, d, fraction) with per-seed values."""
    for k in cfg.kinds:
        if k not in MODEL_KINDS:
            raise ValueError(f"model kind {k!r}: expected one of {MODEL_KINDS}")
    for f in cfg.fractions:
        if not 0 < f <= 1:
            raise ValueError(f"fraction {f!r}: expected in (0, 1]")
    run = Run.create("classify", cfg.name, cfg, root=Path(root) / "canon", overwrite=overwrite)
    seeds = list(range(cfg.n_seeds))
    settings = [("d", d, 1.0) for d in cfg.dims]
    settings += [("fraction", cfg.fraction_dim, f) for f in cfg.fractions]
    data = {}
    summary = {}
    for sweep, d, frac in settings:
        if d not in data:
            x, y = synthetic_clouds(
                cfg.n_train + cfg.n_test, cfg.n_points, d, cfg.n_classes, seed=cfg.data_seed + d
            )
            data[d] = (x[: cfg.n_train], y[: cfg.n_train], x[cfg.n_train :], y[cfg.n_train :])
        xtr, ytr, xte, yte = data[d]
        n = max(1, int(round(frac * cfg.n_train)))
        for kind in cfg.kinds:
            r = fit(kind, xtr, ytr, xte, yte, cfg.n_classes, cfg.train, seeds, n_train=n)
            row = dict(sweep=sweep, kind=kind, d=d, fraction=frac, n_train=n)
            for k, v in r.items():
                row[k] = [float(a) for a in v]
                row[k + "_mean"] = float(np.mean(v))
                row[k + "_std"] = float(np.std(v))
            run.log(**row)
            summary[f"{sweep}/{kind}/d={d}/frac={frac:g}"] = {
                "test_acc": row["test_acc_mean"],
                "gap": row["gap_mean"],
            }
    run.finish(summary)
    return run.path


_COLORS = {
    "hilbert": "tab:red",
    "lex": "tab:orange",
    "morton": "tab:brown",
    "unsorted": "tab:purple",
    "group_avg": "tab:blue",
    "deepsets": "tab:green",
}


def plot_classify(run_dir: str | Path, out: str | Path) -> Path:
    """Figure: test accuracy and generalization gap vs d and vs training fraction (mean +- std)."""
    from geomopt import plotting

    _, rows, _ = load_run(run_dir)
    fig, axes = plotting.figure(2, 2, width=3.4, height=2.5)
    for col, (sweep, xkey, xlabel) in enumerate(
        [("d", "d", "point dimension d"), ("fraction", "fraction", "training fraction")]
    ):
        sub = [r for r in rows if r["sweep"] == sweep]
        for kind in dict.fromkeys(r["kind"] for r in sub):
            rs = sorted((r for r in sub if r["kind"] == kind), key=lambda r: r[xkey])
            xs = [r[xkey] for r in rs]
            for row, metric in enumerate(("test_acc", "gap")):
                ax = axes[row, col]
                m = np.array([r[metric + "_mean"] for r in rs])
                s = np.array([r[metric + "_std"] for r in rs])
                c = _COLORS.get(kind, plotting.color(kind))
                ax.plot(xs, m, marker="o", ms=3, color=c, label=kind)
                plotting.band(ax, xs, m - s, m + s, label_color=c)
                ax.set_xlabel(xlabel)
                ax.set_ylabel("test accuracy" if metric == "test_acc" else "train - test accuracy")
                if sweep == "fraction":
                    ax.set_xscale("log", base=2)
    axes[0, 0].legend(fontsize=6)
    return plotting.save(fig, out)
