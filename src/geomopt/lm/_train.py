"""GPT-2 pretraining: optimisers, a sharded jitted train step, validation, checkpoints, resume,
and the gradient-noise-density probe of the SignSGD paper.

The training state is the model's parameters split off once with ``nnx.split`` plus the optax
state; one pure, jitted step maps ``(params, opt_state, batch, step, lr)`` to the next state with
the state donated. Batches are ``(grad_accum, micro_batch, seq_len + 1)`` token windows, sharded
over the ``data`` axis of a one-axis mesh; parameters are replicated or FSDP-sharded (largest
axis divisible by the device count) by a flag. Everything that decides a run's numbers — the
initial parameters, the batches, the dropout keys — is a function of ``(seed, step)``, so a run
resumed from a checkpoint continues exactly as the uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from geomopt import optim
from geomopt.lm._config import DataConfig, GPT2Config, OptimConfig, TrainConfig
from geomopt.lm._data import BatchLoader, TokenData, build_offline_corpus
from geomopt.lm._model import GPT2, flops_per_token, param_label
from geomopt.lm._noise import noise_density, noise_groups, welford_variance
from geomopt.runs import METRICS_FILE, Progress, Run, atomic_write_bytes, load_metrics

__all__ = [
    "OptimConfig",
    "DataConfig",
    "TrainConfig",
    "NonFiniteLossError",
    "build_optimizer",
    "lr_schedule",
    "make_mesh",
    "peak_flops_per_device",
    "train",
]


class NonFiniteLossError(FloatingPointError):
    """Training produced a non-finite loss or gradient norm; the message names the step."""


_PEAK_BF16 = {
    "h200": 989e12,
    "h100": 989e12,
    "a100": 312e12,
    "l4": 121e12,
    "a10": 125e12,
    "v6": 918e12,
    "v5p": 459e12,
    "v5": 197e12,
    "v4": 275e12,
}


def peak_flops_per_device(device=None) -> float:
    """Dense bf16 peak FLOP/s of a known accelerator (from its device kind); NaN otherwise."""
    device = device or jax.devices()[0]
    kind = getattr(device, "device_kind", "").lower()
    for name, flops in _PEAK_BF16.items():
        if name in kind.replace(" ", ""):
            return flops
    return math.nan


def lr_schedule(kind: str, peak, total_steps: int, warmup_frac: float, decay_frac: float):
    """The learning-rate schedule by name; ``peak`` may be a traced array."""
    warmup = int(round(warmup_frac * total_steps))
    if kind == "one_cycle":
        return optim.one_cycle_schedule(peak, total_steps, warmup_frac=warmup_frac)
    if kind == "wsd":
        return optim.wsd_schedule(peak, total_steps, warmup, decay_frac)
    if kind == "cosine":
        return optim.cosine_schedule(peak, total_steps, warmup)
    if kind == "constant":
        return lambda step: peak * jnp.ones_like(jnp.asarray(step, jnp.float32))
    raise ValueError(f"schedule {kind!r}: expected one_cycle, wsd, cosine or constant")


def _matrix_mask(params):
    return jax.tree_util.tree_map_with_path(lambda p, _: param_label(p) == "matrix", params)


def _muon_label(params):
    return jax.tree_util.tree_map_with_path(
        lambda p, _: "muon" if param_label(p) == "matrix" else "adam", params
    )


def build_optimizer(ocfg: OptimConfig, total_steps: int, lr=None) -> optax.GradientTransformation:
    """The optax transformation of ``ocfg`` (``lr`` overrides ``ocfg.lr``; may be traced, so
    one compiled step serves several learning rates)."""
    lr = ocfg.lr if lr is None else lr
    sched = lr_schedule(ocfg.schedule, lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac)
    wd = ocfg.weight_decay
    if ocfg.name == "adamw":
        tx = optax.adamw(sched, b1=ocfg.b1, b2=ocfg.b2, weight_decay=wd, mask=_matrix_mask)
    elif ocfg.name == "sgd":
        tx = optim.sgd(sched, ocfg.momentum, wd, mask=_matrix_mask, nesterov=ocfg.nesterov)
    elif ocfg.name == "sign_sgd":
        tx = optim.sign_sgd(sched, wd, mask=_matrix_mask)
    elif ocfg.name == "signum":
        tx = optim.signum(sched, ocfg.momentum, wd, mask=_matrix_mask)
    elif ocfg.name == "muon":
        adam_sched = lr_schedule(
            ocfg.schedule, ocfg.adam_lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac
        )
        tx = optim.muon(
            sched,
            momentum=ocfg.momentum,
            nesterov=ocfg.nesterov,
            weight_decay=wd,
            adam_learning_rate=adam_sched,
            adam_b1=ocfg.b1,
            adam_b2=ocfg.b2,
            label_fn=_muon_label,
        )
    else:
        raise ValueError(f"optimiser {ocfg.name!r}: expected adamw, sgd, sign_sgd, signum or muon")
    if ocfg.clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(ocfg.clip), tx)
    return tx


def make_mesh(n_devices: int = 0) -> jax.sharding.Mesh:
    """A one-axis ``data`` mesh over the first ``n_devices`` devices (0: all)."""
    n = n_devices or jax.device_count()
    if n > jax.device_count():
        raise ValueError(f"n_devices={n}: only {jax.device_count()} devices are visible")
    return jax.make_mesh((n,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def _fsdp_spec(shape, n: int) -> P:
    axes = sorted(range(len(shape)), key=lambda a: -shape[a])
    for a in axes:
        if shape[a] % n == 0 and shape[a] >= n:
            spec = [None] * len(shape)
            spec[a] = "data"
            return P(*spec)
    return P()


def _state_shardings(tree, mesh, fsdp: bool):
    n = mesh.shape["data"]

    def one(x):
        shape = getattr(x, "shape", ())
        spec = _fsdp_spec(shape, n) if fsdp and len(shape) >= 1 else P()
        return NamedSharding(mesh, spec)

    return jax.tree.map(one, tree)


def _cross_entropy(graphdef, params, tokens_BxT1, key):
    model = nnx.merge(graphdef, params)
    logits_BxTxV = model(tokens_BxT1[:, :-1], key=key)
    targets_BxT = tokens_BxT1[:, 1:]
    loss = optax.softmax_cross_entropy_with_integer_labels(logits_BxTxV, targets_BxT).mean()
    correct = jnp.mean((jnp.argmax(logits_BxTxV, axis=-1) == targets_BxT).astype(jnp.float32))
    return loss, correct


@dataclasses.dataclass(frozen=True)
class _StepKey:
    graphdef: Any
    optim: OptimConfig
    total_steps: int
    dropout: bool
    mesh: Any


_TRACES = {"train_step": 0}


def _loss_only(graphdef, params, tokens, key):
    return _cross_entropy(graphdef, params, tokens, key)[0]


@functools.lru_cache(maxsize=8)
def _model_fns(config: GPT2Config, graphdef, param_sh_leaves, param_treedef):
    """Jitted parameter init, validation and noise-density functions (optimiser-independent,
    so a sweep over optimisers compiles them once)."""
    param_sh = jax.tree.unflatten(param_treedef, param_sh_leaves)

    def init(key):
        return nnx.split(GPT2(config, rngs=nnx.Rngs(params=key)), nnx.Param)[1]

    def evaluate(params, batches_ExBxT1):
        def body(_, tokens):
            return None, _cross_entropy(graphdef, params, tokens, None)

        _, (losses, accs) = jax.lax.scan(body, None, batches_ExBxT1)
        return jnp.mean(losses), jnp.mean(accs)

    def noise(params, batches_KxBxT1):
        def grads_of(tokens, p):
            return jax.grad(_loss_only, argnums=1)(graphdef, p, tokens, None)

        return welford_variance(grads_of, batches_KxBxT1, params)[1]

    return (
        jax.jit(init, out_shardings=param_sh),
        jax.jit(evaluate),
        jax.jit(noise, out_shardings=param_sh),
    )


@functools.lru_cache(maxsize=16)
def _optim_fns(k: _StepKey, param_sh_leaves, param_treedef, opt_sh_leaves, opt_treedef):
    """Jitted optimiser init and train step, cached so runs that differ only in the learning
    rate or the seed (sweeps) reuse one compilation: both are traced arguments."""
    graphdef, ocfg = k.graphdef, k.optim
    param_sh = jax.tree.unflatten(param_treedef, param_sh_leaves)
    opt_sh = jax.tree.unflatten(opt_treedef, opt_sh_leaves)
    rep = NamedSharding(k.mesh, P())
    grad_fn = jax.value_and_grad(functools.partial(_loss_only, graphdef))

    def train_step(params, opt_state, batch_AxBxT1, step, lr, dropout_key):
        _TRACES["train_step"] += 1
        n_acc = batch_AxBxT1.shape[0]
        step_key = jax.random.fold_in(dropout_key, step) if k.dropout else None

        def micro(carry, xs):
            tokens, i = xs
            key = None if step_key is None else jax.random.fold_in(step_key, i)
            loss, g = grad_fn(params, tokens, key)
            return (carry[0] + loss, jax.tree.map(jnp.add, carry[1], g)), None

        zeros = jax.tree.map(jnp.zeros_like, params)
        (loss_sum, g_sum), _ = jax.lax.scan(
            micro, (jnp.float32(0.0), zeros), (batch_AxBxT1, jnp.arange(n_acc))
        )
        grads = jax.tree.map(lambda g: g / n_acc, g_sum)
        tx = build_optimizer(ocfg, k.total_steps, lr)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        sched = lr_schedule(ocfg.schedule, lr, k.total_steps, ocfg.warmup_frac, ocfg.decay_frac)
        metrics = {
            "loss": loss_sum / n_acc,
            "grad_norm": optax.tree.norm(grads),
            "lr": sched(step),
        }
        return params, opt_state, metrics

    opt_init = jax.jit(build_optimizer(ocfg, k.total_steps).init, out_shardings=opt_sh)
    step_jit = jax.jit(
        train_step,
        donate_argnums=(0, 1),
        out_shardings=(param_sh, opt_sh, {"loss": rep, "grad_norm": rep, "lr": rep}),
    )
    return opt_init, step_jit


def _global_batch(loader: BatchLoader, steps: list[int], mesh, n_rows: int) -> jax.Array:
    """Stack the batches of loader steps ``steps`` into a ``(len(steps), n_rows, T+1)`` global
    array sharded over ``data`` on axis 1 (each process supplies its rows)."""
    pid, pcount = jax.process_index(), jax.process_count()
    local = np.stack([loader.local_batch(s, pid, pcount) for s in steps])
    return _assemble(local, mesh, (len(steps), n_rows, loader.seq_len + 1))


def _train_batch(loader: BatchLoader, step: int, grad_accum: int, mesh) -> jax.Array:
    """The global batch of ``step`` split into ``grad_accum`` micro-batches: the rows, hence
    the accumulated gradient, do not depend on ``grad_accum`` or the number of processes."""
    pid, pcount = jax.process_index(), jax.process_count()
    micro = loader.batch_size // grad_accum
    per = micro // pcount
    parts = [
        loader.rows(step, i * micro + pid * per, i * micro + (pid + 1) * per)
        for i in range(grad_accum)
    ]
    return _assemble(np.stack(parts), mesh, (grad_accum, micro, loader.seq_len + 1))


def _assemble(local: np.ndarray, mesh, shape) -> jax.Array:
    sharding = NamedSharding(mesh, P(None, "data", None))
    return jax.make_array_from_process_local_data(sharding, local, shape)


def _default_offline_dir(max_bytes: int) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "geomopt" / f"offline_stdlib_{max_bytes}"


def _data(cfg: TrainConfig) -> tuple[TokenData, TokenData]:
    vocab = cfg.model.vocab_size
    if cfg.data.source == "offline":
        if vocab < 256:
            raise ValueError(
                f"the offline corpus is byte-level (vocab 256); model vocab is {vocab}"
            )
        folder = cfg.data.offline_dir or _default_offline_dir(cfg.data.offline_bytes)
        tr, va = build_offline_corpus(folder, max_bytes=cfg.data.offline_bytes)
        return TokenData(str(tr), vocab_size=vocab), TokenData(str(va), vocab_size=vocab)
    if not cfg.data.train or not cfg.data.val:
        raise ValueError("data.source=shards needs --data.train and --data.val globs")
    kw = dict(vocab_size=vocab, format=cfg.data.format)
    return TokenData(cfg.data.train, **kw), TokenData(cfg.data.val, **kw)


def _check(cfg: TrainConfig, n_dev: int) -> None:
    def need(cond, msg):
        if not cond:
            raise ValueError(msg)

    need(cfg.steps >= 1, f"steps={cfg.steps}: expected >= 1")
    need(cfg.grad_accum >= 1, f"grad_accum={cfg.grad_accum}: expected >= 1")
    need(
        cfg.batch_size % cfg.grad_accum == 0,
        f"batch_size={cfg.batch_size} is not divisible by grad_accum={cfg.grad_accum}",
    )
    need(
        cfg.micro_batch % n_dev == 0,
        f"micro-batch {cfg.micro_batch} (batch_size/grad_accum) is not divisible by the "
        f"{n_dev} devices of the data axis",
    )
    need(
        cfg.sequence_length <= cfg.model.context,
        f"seq_len={cfg.sequence_length} exceeds the model context {cfg.model.context}",
    )
    for name in ("eval_batch_size", "noise_batch_size"):
        v = getattr(cfg, name) or cfg.micro_batch
        need(v % n_dev == 0, f"{name}={v} is not divisible by the {n_dev} devices")
    bad = [s for s in cfg.noise_steps if not 0 <= s <= cfg.steps]
    need(not bad, f"noise_steps {bad} outside [0, steps={cfg.steps}]")


def _checkpoint_manager(path: Path, keep: int):
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, create=True, enable_async_checkpointing=False
    )
    return ocp.CheckpointManager(path.resolve(), options=options)


def _truncate_metrics(run: Run, last_step: int) -> None:
    """Drop metric rows after ``last_step`` (written by the interrupted part of a run)."""
    rows = [r for r in load_metrics(run.path) if r.get("step", 0) <= last_step]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    atomic_write_bytes(run.path / METRICS_FILE, text.encode())


def train(cfg: TrainConfig, *, log=print) -> dict[str, Any]:
    """Train GPT-2 as configured; returns the summary (also written to the run folder).

    Raises:
        NonFiniteLossError: a step produced a non-finite loss or gradient norm; the newest
            checkpoint on disk is the last one with finite loss.
    """
    import orbax.checkpoint as ocp

    mesh = make_mesh(cfg.n_devices)
    n_dev = mesh.shape["data"]
    _check(cfg, n_dev)
    train_data, val_data = _data(cfg)
    T = cfg.sequence_length
    train_loader = BatchLoader(train_data, batch_size=cfg.batch_size, seq_len=T, seed=cfg.seed)
    eval_bs = cfg.eval_batch_size or cfg.micro_batch
    val_loader = BatchLoader(val_data, batch_size=eval_bs, seq_len=T, seed=10_007)
    noise_bs = cfg.noise_batch_size or cfg.micro_batch
    noise_loader = BatchLoader(train_data, batch_size=noise_bs, seq_len=T, seed=cfg.seed + 7919)

    # On several hosts only process 0 writes the run folder (metrics, summary); all of them
    # take part in the (collective) orbax saves and restores into the same, shared folder.
    main = jax.process_index() == 0
    if main:
        run = Run.create(
            cfg.experiment,
            cfg.run_name,
            cfg,
            root=cfg.root,
            overwrite=cfg.overwrite,
            resume=cfg.resume,
        )
    else:
        run = Run(Path(cfg.root) / cfg.experiment / cfg.run_name)
    ckpt_dir = run.path / "checkpoints"
    if main and not cfg.resume and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)

    graphdef, abstract_params = nnx.split(
        nnx.eval_shape(lambda: GPT2(cfg.model, rngs=nnx.Rngs(params=0))), nnx.Param
    )
    param_sh = _state_shardings(abstract_params, mesh, cfg.fsdp)
    tx0 = build_optimizer(cfg.optim, cfg.steps)
    opt_sh = _state_shardings(jax.eval_shape(tx0.init, abstract_params), mesh, cfg.fsdp)

    key = _StepKey(
        graphdef, dataclasses.replace(cfg.optim, lr=0.0), cfg.steps, cfg.model.dropout > 0, mesh
    )
    p_leaves, p_def = jax.tree.flatten(param_sh)
    o_leaves, o_def = jax.tree.flatten(opt_sh)
    init_fn, eval_fn, noise_fn = _model_fns(cfg.model, graphdef, tuple(p_leaves), p_def)
    opt_init, step_fn = _optim_fns(key, tuple(p_leaves), p_def, tuple(o_leaves), o_def)
    params = init_fn(jax.random.key(cfg.seed))
    opt_state = opt_init(params)
    dropout_key = jax.random.key(cfg.seed + 1)
    lr = jnp.float32(cfg.optim.lr)

    mngr = _checkpoint_manager(ckpt_dir, cfg.ckpt_keep)
    start = 0
    try:
        if cfg.resume and mngr.latest_step() is not None:
            start = int(mngr.latest_step())
            abstract = {
                "params": [
                    jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                    for x in jax.tree.leaves(params)
                ],
                "opt_state": [
                    jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                    for x in jax.tree.leaves(opt_state)
                ],
            }
            restored = mngr.restore(start, args=ocp.args.StandardRestore(abstract))
            params = jax.tree.unflatten(p_def, restored["params"])
            opt_state = jax.tree.unflatten(o_def, restored["opt_state"])
            if main:
                _truncate_metrics(run, start)
            log(f"[pretrain] resumed {run.path} from step {start}")

        val_batches = None
        if cfg.eval_batches:
            val_batches = _global_batch(val_loader, list(range(cfg.eval_batches)), mesh, eval_bs)
        flops_tok = flops_per_token(cfg.model, T)
        peak = cfg.peak_flops or peak_flops_per_device()
        tokens_per_step = cfg.batch_size * T
        groups = noise_groups(params)
        rows: list[dict] = []
        summary: dict[str, Any] = {}

        def validate(step):
            if val_batches is None:
                return
            vl, va = jax.device_get(eval_fn(params, val_batches))
            row = {"step": step, "tokens": step * tokens_per_step}
            row.update(val_loss=float(vl), val_acc=float(va))
            rows.append(row)
            summary.update(final_val_loss=float(vl), final_val_acc=float(va))

        def measure_noise(step):
            ids = [step * cfg.noise_samples + j for j in range(cfg.noise_samples)]
            var = noise_fn(params, _global_batch(noise_loader, ids, mesh, noise_bs))
            phis = noise_density(var, groups)
            rows.append({"step": step, "tokens": step * tokens_per_step, **phis})

        def flush():
            if rows and main:
                run.log_rows(rows)
            rows.clear()

        if start == 0 and 0 in cfg.noise_steps:
            measure_noise(0)
        if start == 0 and cfg.eval_every:
            validate(0)
        flush()

        progress = Progress(cfg.steps - start, run.path.name, enabled=cfg.progress and main)
        pending = None
        t_last, s_last = time.perf_counter(), start
        step_times: list[float] = []

        def settle(step, metrics):
            """Fetch a finished step's metrics, check them, queue its row."""
            m = {k: float(v) for k, v in jax.device_get(metrics).items()}
            row = {"step": step, "tokens": step * tokens_per_step, **m}
            rows.append(row)
            summary["final_train_loss"] = m["loss"]
            if not (math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"])):
                flush()
                good = mngr.latest_step()
                where = f"step {good} in {ckpt_dir}" if good is not None else "none written"
                raise NonFiniteLossError(
                    f"non-finite loss {m['loss']} (grad norm {m['grad_norm']}) at step {step}; "
                    f"training stopped. Last good checkpoint: {where}"
                )

        for step in range(start, cfg.steps):
            batch = _train_batch(train_loader, step, cfg.grad_accum, mesh)
            params, opt_state, metrics = step_fn(
                params, opt_state, batch, jnp.int32(step), lr, dropout_key
            )
            done = step + 1
            if pending is not None:
                settle(*pending)
            pending = (done, metrics)
            progress.update(done - start, {"loss": metrics["loss"]})

            is_last = done == cfg.steps
            do_eval = is_last or (cfg.eval_every and done % cfg.eval_every == 0)
            do_ckpt = is_last or (cfg.ckpt_every and done % cfg.ckpt_every == 0)
            do_log = is_last or done % cfg.log_every == 0
            halt = cfg.halt_at_step and done == cfg.halt_at_step
            if do_eval or do_ckpt or do_log or halt or done in cfg.noise_steps:
                settle(*pending)
                pending = None
            if do_log:
                now = time.perf_counter()
                dt = (now - t_last) / (done - s_last)
                if s_last > start or done - s_last > 1:
                    step_times.append(dt)
                tps = tokens_per_step / dt
                rows[-1].update(
                    step_time=dt, tokens_per_s=tps, mfu=flops_tok * tps / (peak * n_dev)
                )
                t_last, s_last = now, done
            if do_eval:
                validate(done)
            if done in cfg.noise_steps:
                measure_noise(done)
            if do_ckpt:
                flush()
                _save(mngr, done, params, opt_state)
            if do_log or do_eval:
                flush()
            if halt:
                flush()
                progress.close()
                return {"halted_at": done, **summary}
        flush()
        progress.close()
    finally:
        mngr.close()

    summary.update(
        steps=cfg.steps,
        tokens=cfg.steps * tokens_per_step,
        median_step_time=float(np.median(step_times)) if step_times else math.nan,
        params=int(sum(x.size for x in jax.tree.leaves(params))),
        flops_per_token=flops_tok,
        devices=n_dev,
        train_step_compilations=step_fn._cache_size(),
    )
    if main:
        run.finish(summary)
    return summary


def _save(mngr, step: int, params, opt_state) -> None:
    """Write checkpoint ``step`` (orbax writes into a temporary folder and renames it when
    complete, so an interrupted save leaves the previous checkpoints intact and usable).
    On one process the arrays are fetched to host first, which avoids compiling a per-device
    slicing program for every parameter shape."""
    import orbax.checkpoint as ocp

    state = {"params": jax.tree.leaves(params), "opt_state": jax.tree.leaves(opt_state)}
    if jax.process_count() == 1:
        state = jax.device_get(state)
    mngr.save(step, args=ocp.args.StandardSave(state))
    mngr.wait_until_finished()
