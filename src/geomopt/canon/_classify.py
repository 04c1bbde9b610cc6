"""Training and evaluation of the point-cloud classifiers with the official recipe.

Recipe (official, canon.md / ``ModelNet/training/train.py``): AdamW; the learning rate follows a
cosine per epoch from ``lr`` to ``lr * 1e-3`` (``CosineAnnealingLR(T_max=epochs)``); each epoch
visits the training clouds in a fresh random order in batches of ``batch``, dropping the last
incomplete batch; label-smoothed cross-entropy. The data-scarcity table trains on every
``stride``-th training cloud (the official ``dataset_stride``: fraction ``1/stride``) for the same
number of epochs.

All seeds of one setting train together: the models are stacked (``eqx.filter_vmap`` over init
keys) and one jitted loop runs every seed's steps. Hyperparameters (lr, weight decay, label
smoothing, dropout rates), the number of clouds and the stride are traced values, so one
compilation serves every stride, and the lex / Hilbert / Morton / unsorted MLPs (whose inputs are
put in canonical order once, by :func:`geomopt.canon._factory.prepare_inputs`) share one.

Reported per seed: test accuracy; train accuracy of the final model in evaluation mode on the
clouds it trained on (``train_acc``); the official code's train accuracy, i.e. the running
accuracy over the last epoch's batches in training mode with dropout (``train_acc_running``);
and the generalization gap ``train_acc - test_acc``.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from geomopt.canon._factory import prepare_inputs, trainable_filter, training_model
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig, TrainConfig, model_config

__all__ = ["TrainConfig", "init_models", "train_models", "predict", "fit", "hyperparams"]


def hyperparams(cfg: ModelConfig) -> dict[str, jax.Array]:
    """The traced hyperparameters of one training run."""
    for n in ("dropout", "point_dropout", "input_dropout", "label_smoothing"):
        v = getattr(cfg, n)
        if not 0.0 <= v < 1.0:
            raise ValueError(f"{n} {v!r}: expected a value in [0, 1)")
    for n in ("lr", "weight_decay"):
        v = getattr(cfg, n)
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{n} {v!r}: expected a finite value >= 0")
    names = ("lr", "weight_decay", "label_smoothing", "dropout", "point_dropout", "input_dropout")
    return {n: jnp.asarray(getattr(cfg, n), jnp.float32) for n in names}


def init_models(kind: str, n_points: int, d: int, n_classes: int, cfg: ModelConfig, seeds):
    """Stacked training models, one per seed (leading axis = seed). Dropout rates are zeroed in
    the static structure (they are passed to ``apply`` as traced values), so kinds that differ
    only in rates share a compilation."""
    structural = dataclasses.replace(cfg, dropout=0.0, point_dropout=0.0, input_dropout=0.0)
    keys = jnp.stack([jax.random.key_data(jax.random.key(int(s))) for s in seeds])
    return eqx.filter_vmap(
        lambda k: training_model(
            kind, n_points, d, n_classes, structural, key=jax.random.wrap_key_data(k)
        )
    )(keys)


def _take(tree, idx):
    return jax.tree_util.tree_map(lambda a: a[idx], tree)


FAST_COMPILE = {"xla_backend_optimization_level": 0}
"""XLA options of ``TrainConfig.fast_compile``: LLVM's optimisations off, so the training and
prediction loops compile in about half the time and run slower (smoke runs, where compiling
dominates)."""


def _cosine_schedule(lr, epochs: int, steps_per_epoch):
    """The learning rate at step ``count``: a cosine per epoch from ``lr`` to ``lr * 1e-3``
    (``CosineAnnealingLR(T_max=epochs)``, stepped once per epoch of ``steps_per_epoch``)."""
    lr_min = lr * 1e-3

    def schedule(count):
        epoch = count // steps_per_epoch
        return lr_min + (lr - lr_min) * 0.5 * (1 + jnp.cos(jnp.pi * epoch / epochs))

    return schedule


def _epoch_orders(okeys, n_total: int, n_sub, batch: int, max_passes: int):
    """One epoch's visiting order per seed key, ``(seeds, max_passes, batches, batch)``: indices
    into the subset of the first ``n_sub`` of ``n_total`` clouds."""

    def seed_order(k):
        # `passes` shuffles of the subset, each cut to whole batches, one after the other
        def one_pass(kp):
            u = jax.random.uniform(kp, (n_total,))
            return jnp.argsort(jnp.where(jnp.arange(n_total) < n_sub, u, 2.0))

        pass_keys = k[None] if max_passes == 1 else jax.random.split(k, max_passes)
        orders = jax.vmap(one_pass)(pass_keys)
        return orders[:, : (n_total // batch) * batch].reshape(max_passes, -1, batch)

    return jax.vmap(seed_order)(okeys)


def _train_loop(
    models,
    inputs,
    y,
    n_sub,
    stride,
    passes,
    keys,
    hp,
    *,
    epochs: int,
    batch: int,
    n_classes: int,
    max_passes: int,
):
    filt = trainable_filter(models)
    params, rest = eqx.partition(models, filt)
    frozen, static = eqx.partition(rest, eqx.is_array)  # the fixed Fourier matrices, per seed
    per_pass = n_sub // batch  # batches of one pass over the subset (drop-last)
    spe = per_pass * passes  # steps per epoch
    opt = optax.adamw(_cosine_schedule(hp["lr"], epochs, spe), weight_decay=hp["weight_decay"])
    opt_state = jax.vmap(opt.init)(params)
    n_total = y.shape[0]
    rates = {k: hp[k] for k in ("dropout", "point_dropout", "input_dropout")}

    def loss_fn(p, fz, inp, yb, key):
        model = eqx.combine(p, fz, static)
        ks = jax.random.split(key, yb.shape[0])
        logits = jax.vmap(lambda i, k: model.apply(i, key=k, rates=rates))(inp, ks)
        labels = optax.smooth_labels(jax.nn.one_hot(yb, n_classes), hp["label_smoothing"])
        loss = jnp.mean(optax.softmax_cross_entropy(logits, labels))
        return loss, jnp.sum(jnp.argmax(logits, -1) == yb)

    def seed_step(p, s, fz, order, b, key):
        idx = order[b // per_pass, b % per_pass] * stride
        (loss, correct), g = jax.value_and_grad(loss_fn, has_aux=True)(
            p, fz, _take(inputs, idx), y[idx], key
        )
        upd, s = opt.update(g, s, p)
        return eqx.apply_updates(p, upd), s, loss, correct

    def epoch_fn(carry, e):
        p, s = carry
        ekeys, okeys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, e)))(
            keys
        ).swapaxes(0, 1)
        orders = _epoch_orders(okeys, n_total, n_sub, batch, max_passes)

        def body(b, c):
            p, s, loss_sum, correct = c
            bkeys = jax.vmap(lambda k: jax.random.fold_in(k, b))(ekeys)
            p, s, loss, corr = jax.vmap(seed_step, in_axes=(0, 0, 0, 0, None, 0))(
                p, s, frozen, orders, b, bkeys
            )
            return p, s, loss_sum + loss, correct + corr

        zeros = jnp.zeros(orders.shape[0], jnp.float32)
        p, s, loss_sum, correct = jax.lax.fori_loop(
            0, spe, body, (p, s, zeros, zeros.astype(jnp.int32))
        )
        return (p, s), (loss_sum / spe, correct / (spe * batch))

    (params, _), (losses, accs) = jax.lax.scan(epoch_fn, (params, opt_state), jnp.arange(epochs))
    return eqx.combine(params, frozen, static), losses.T, accs.T


_train = eqx.filter_jit(_train_loop)
_train_fast_compile = eqx.filter_jit(_train_loop, compiler_options=FAST_COMPILE)


def train_models(
    kind: str,
    inputs,
    y_train,
    n_classes: int,
    train: TrainConfig,
    seeds,
    *,
    stride: int = 1,
    n_points: int,
    d: int,
    max_passes: int = 1,
):
    """Train one model per seed on every ``stride``-th cloud of the prepared ``inputs``.

    With ``train.equal_steps`` each epoch passes ``stride`` times over the subset (as many steps
    as the full set); ``max_passes`` (static) bounds the passes of every call that should share
    one compilation (a sweep passes its largest stride).

    Returns ``(models, losses, running_acc)``; ``losses`` / ``running_acc`` are ``(n_seeds,
    epochs)``: the mean training loss and the training-mode accuracy of each epoch's batches.
    """
    y_train = jnp.asarray(y_train, jnp.int32)
    n = y_train.shape[0]
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride {stride!r}: expected an integer >= 1")
    n_sub = -(-n // stride)
    passes = stride if train.equal_steps else 1
    if train.epochs < 1 or train.batch < 1:
        raise ValueError(f"epochs {train.epochs}, batch {train.batch}: expected integers >= 1")
    if n_sub < train.batch:
        raise ValueError(
            f"stride {stride} leaves {n_sub} of {n} training clouds, fewer than one batch of "
            f"{train.batch} (drop-last would train on nothing); lower batch or stride"
        )
    cfg = model_config(kind, train)
    models = init_models(kind, n_points, d, n_classes, cfg, seeds)
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(s), 1))(jnp.asarray(seeds))
    return (_train_fast_compile if train.fast_compile else _train)(
        models,
        inputs,
        y_train,
        jnp.asarray(n_sub, jnp.int32),
        jnp.asarray(stride, jnp.int32),
        jnp.asarray(passes, jnp.int32),
        keys,
        hyperparams(cfg),
        epochs=train.epochs,
        batch=train.batch,
        n_classes=n_classes,
        max_passes=max(passes, max_passes),
    )


def _predict_chunk(models, inputs):
    return eqx.filter_vmap(lambda m: jnp.argmax(jax.vmap(m.apply)(inputs), axis=-1))(models)


_predict = eqx.filter_jit(_predict_chunk)
_predict_fast_compile = eqx.filter_jit(_predict_chunk, compiler_options=FAST_COMPILE)


def predict(
    models, inputs, *, idx=None, chunk: int = 256, fast_compile: bool = False
) -> np.ndarray:
    """Predicted classes ``(n_seeds, n)`` of the stacked models on (the ``idx`` rows of) the
    prepared ``inputs`` (``fast_compile``: see :data:`FAST_COMPILE`)."""
    step = _predict_fast_compile if fast_compile else _predict
    n = jax.tree_util.tree_leaves(inputs)[0].shape[0]
    idx = np.arange(n) if idx is None else np.asarray(idx)
    out = []
    for i in range(0, len(idx), chunk):
        part = idx[i : i + chunk]
        if len(part) < chunk:  # pad to one shape: no recompilation
            part = np.concatenate([part, np.full(chunk - len(part), part[-1])])
        out.append(np.asarray(step(models, _take(inputs, jnp.asarray(part)))))
    return np.concatenate(out, axis=1)[:, : len(idx)]


def fit(
    kind: str,
    x_train,
    y_train,
    x_test,
    y_test,
    n_classes: int,
    train: TrainConfig,
    seeds,
    *,
    strides=(1,),
    data_seed: int = 0,
    on_stride=None,
):
    """Train ``kind`` on every ``stride``-th training cloud for each stride and evaluate.

    Returns a list (one per stride) of dicts of per-seed arrays: ``train_acc``,
    ``train_acc_running``, ``test_acc``, ``gap``, ``loss`` (final epoch), plus ``n_train`` and the
    per-epoch ``loss_curve`` ``(n_seeds, epochs)``. ``on_stride(i)`` is called after each stride.
    """
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")
    x_train, x_test = np.asarray(x_train, np.float32), np.asarray(x_test, np.float32)
    if x_train.ndim != 3 or x_test.shape[1:] != x_train.shape[1:]:
        raise ValueError(f"clouds {x_train.shape} / {x_test.shape}: expected (N, P, d) both")
    _, p, d = x_train.shape
    cfg = model_config(kind, train)
    inp_tr = prepare_inputs(kind, x_train, cfg, seed=data_seed)
    inp_te = prepare_inputs(kind, x_test, cfg, seed=data_seed + 1)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    results = []
    for i, stride in enumerate(strides):
        models, losses, running = train_models(
            kind, inp_tr, y_train, n_classes, train, seeds, stride=stride, n_points=p, d=d,
            max_passes=max(strides) if train.equal_steps else 1,
        )  # fmt: skip
        sub = np.arange(0, len(y_train), stride)
        fast = train.fast_compile
        tr = (predict(models, inp_tr, idx=sub, fast_compile=fast) == y_train[sub][None]).mean(1)
        te = (predict(models, inp_te, fast_compile=fast) == y_test[None]).mean(1)
        losses = np.asarray(losses)
        results.append(
            dict(
                n_train=len(sub),
                train_acc=tr,
                train_acc_running=np.asarray(running)[:, -1],
                test_acc=te,
                gap=tr - te,
                loss=losses[:, -1],
                loss_curve=losses,
            )
        )
        if on_stride is not None:
            on_stride(i)
    return results
