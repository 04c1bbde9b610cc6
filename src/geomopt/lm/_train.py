"""GPT-2 pretraining: the :class:`Trainer` (data, mesh, shardings, optimiser and jitted functions,
built once per run) and the loop of :func:`train` (steps, evaluation, noise density, checkpoints,
progress).

The training state is the model's parameters split off once with ``nnx.split`` plus the optax
state; one pure, jitted step maps ``(params, opt_state, batch, step, lr)`` to the next state with
the state donated. The optimiser is built once per run from a traced peak learning rate, so runs
that differ only in the learning rate or the seed (sweeps) reuse one compiled step. Batches are
``(grad_accum, micro_batch, seq_len + 1)`` token windows sharded over the ``data`` axis of a
one-axis mesh; parameters are replicated or FSDP-sharded (largest axis divisible by the device
count). Everything that decides a run's numbers — the initial parameters, the batches, the
dropout keys — is a function of ``(seed, step)``, so a run resumed from a checkpoint continues
exactly as the uninterrupted one.

The pieces, one module each: the config checks (:mod:`._config_checks`), the optimiser
(:mod:`._optimizer`), mesh, shardings and batches (:mod:`._sharding`), the jitted functions
(:mod:`._steps`), checkpoints (:mod:`._checkpoints`), metric sinks, MFU and console helpers
(:mod:`._metrics`), multi-process start (:mod:`._distributed`).

The run folder belongs to :mod:`geomopt.experiment`; :func:`train` gets its ``Run`` handle and
keeps checkpoints in ``<run folder>/checkpoints``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from geomopt.lm._checkpoints import Checkpoints
from geomopt.lm._config import TrainConfig
from geomopt.lm._config_checks import check_train_config
from geomopt.lm._data import BatchLoader, TokenData, build_offline_corpus
from geomopt.lm._metrics import (
    MetricSinks,
    _Clock,
    _duration,
    _mfu_text,
    _si,
    _truncate_metrics,
    device_peak_flops,
)
from geomopt.lm._model import GPT2, flops_per_token
from geomopt.lm._noise import noise_density, noise_groups
from geomopt.lm._optimizer import build_optimizer
from geomopt.lm._sharding import make_mesh, stacked_batches, state_shardings, train_batch
from geomopt.lm._steps import StepKey, model_fns, optim_fns

__all__ = ["NonFiniteLossError", "Trainer", "train"]


class NonFiniteLossError(FloatingPointError, ValueError):
    """Training produced a non-finite loss or gradient norm; the message names the step and the
    last good checkpoint. (A ``ValueError`` too: the runner reports it as a bad setting, e.g. a
    learning rate that diverges, without a traceback.)"""


# ---------------------------------------------------------------------------------------------
# Data


def _default_offline_dir(max_bytes: int) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "geomopt" / f"offline_stdlib_{max_bytes}"


def _token_data(cfg: TrainConfig) -> tuple[TokenData, TokenData]:
    vocab = cfg.model.vocab_size
    if cfg.data.resolved_source == "offline":
        if vocab < 256:
            raise ValueError(
                f"the offline corpus is byte-level (vocab 256); model vocab is {vocab}"
            )
        folder = cfg.data.offline_dir or _default_offline_dir(cfg.data.offline_bytes)
        tr, va = build_offline_corpus(folder, max_bytes=cfg.data.offline_bytes)
        return TokenData(str(tr), vocab_size=vocab), TokenData(str(va), vocab_size=vocab)
    if not cfg.data.train or not cfg.data.val:
        raise ValueError("training on token files needs both --data.train and --data.val globs")
    kw = dict(vocab_size=vocab, format=cfg.data.format)
    return TokenData(cfg.data.train, **kw), TokenData(cfg.data.val, **kw)


# ---------------------------------------------------------------------------------------------
# The trainer: everything built once per run


@dataclasses.dataclass
class Trainer:
    """Data loaders, mesh, shardings and the jitted functions of one run, built once by
    :meth:`build`; :meth:`init`, :meth:`step`, :meth:`validate` and :meth:`noise` use them."""

    cfg: TrainConfig
    mesh: Any
    train_loader: BatchLoader
    val_batches: jax.Array | None
    noise_loader: BatchLoader
    init_fn: Callable
    opt_init_fn: Callable
    step_fn: Callable
    eval_fn: Callable
    noise_fn: Callable
    groups: Any
    flops_per_token: float

    @classmethod
    def build(cls, cfg: TrainConfig) -> Trainer:
        mesh = make_mesh(cfg.n_devices)
        check_train_config(cfg, mesh.shape["data"])
        train_data, val_data = _token_data(cfg)
        T = cfg.sequence_length
        train_loader = BatchLoader(train_data, batch_size=cfg.batch_size, seq_len=T, seed=cfg.seed)
        eval_bs = cfg.eval_batch_size or cfg.micro_batch
        noise_bs = cfg.noise_batch_size or cfg.micro_batch
        noise_loader = BatchLoader(train_data, batch_size=noise_bs, seq_len=T, seed=cfg.seed + 7919)
        val_batches = None
        if cfg.eval_batches:
            val_loader = BatchLoader(val_data, batch_size=eval_bs, seq_len=T, seed=10_007)
            val_batches = stacked_batches(val_loader, list(range(cfg.eval_batches)), mesh)

        graphdef, abstract_params = nnx.split(
            nnx.eval_shape(lambda: GPT2(cfg.model, rngs=nnx.Rngs(params=0))), nnx.Param
        )
        param_sh = state_shardings(abstract_params, mesh, cfg.fsdp)
        abstract_opt = jax.eval_shape(build_optimizer(cfg.optim, cfg.steps).init, abstract_params)
        opt_sh = state_shardings(abstract_opt, mesh, cfg.fsdp)
        p_leaves, p_def = jax.tree.flatten(param_sh)
        o_leaves, o_def = jax.tree.flatten(opt_sh)
        key = StepKey(
            graphdef,
            dataclasses.replace(cfg.optim, lr=0.0),
            cfg.steps,
            cfg.model.dropout > 0,
            mesh,
            (cfg.model.n_layer, cfg.model.n_head),
        )
        init_fn, eval_fn, noise_fn = model_fns(cfg.model, graphdef, tuple(p_leaves), p_def)
        opt_init, step_fn = optim_fns(key, tuple(p_leaves), p_def, tuple(o_leaves), o_def)
        return cls(
            cfg=cfg,
            mesh=mesh,
            train_loader=train_loader,
            val_batches=val_batches,
            noise_loader=noise_loader,
            init_fn=init_fn,
            opt_init_fn=opt_init,
            step_fn=step_fn,
            eval_fn=eval_fn,
            noise_fn=noise_fn,
            groups=noise_groups(abstract_params),
            flops_per_token=flops_per_token(cfg.model, T),
        )

    @property
    def n_devices(self) -> int:
        return self.mesh.shape["data"]

    @property
    def tokens_per_step(self) -> int:
        return self.cfg.batch_size * self.cfg.sequence_length

    def init(self) -> tuple[Any, Any]:
        """Initial ``(params, opt_state)`` from the seed."""
        params = self.init_fn(jax.random.key(self.cfg.seed))
        return params, self.opt_init_fn(params, jnp.float32(self.cfg.optim.lr))

    def step(self, params, opt_state, step: int):
        """One optimiser step (asynchronous: the metrics are device arrays)."""
        batch = train_batch(self.train_loader, step, self.cfg.grad_accum, self.mesh)
        return self.step_fn(
            params,
            opt_state,
            batch,
            jnp.int32(step),
            jnp.float32(self.cfg.optim.lr),
            jax.random.key(self.cfg.seed + 1),
        )

    def validate(self, params) -> dict[str, float]:
        """Mean loss and next-token accuracy over the fixed validation batches."""
        if self.val_batches is None:
            return {}
        loss, acc = jax.device_get(self.eval_fn(params, self.val_batches))
        return {"val_loss": float(loss), "val_acc": float(acc)}

    def noise(self, params, step: int) -> dict[str, float]:
        """Noise density phi (overall and per group) from ``noise_samples`` mini-batch
        gradients at ``params``; the mini-batches are a function of ``(seed, step)``."""
        n = self.cfg.noise_samples
        ids = [step * n + j for j in range(n)]
        var = self.noise_fn(params, stacked_batches(self.noise_loader, ids, self.mesh))
        return noise_density(var, self.groups)


# ---------------------------------------------------------------------------------------------
# The loop


def train(
    cfg: TrainConfig,
    run,
    *,
    tag: Mapping[str, Any] | None = None,
    checkpoints: bool = True,
    hellaswag: Callable[[Any, Any], dict[str, float]] | None = None,
) -> dict[str, float]:
    """Train GPT-2 as configured, logging into ``run`` (a :class:`geomopt.experiment.Run`).

    Resumes from the newest undamaged checkpoint in ``<run>/checkpoints`` when
    ``run.resumed`` (damaged ones are named and set aside: :mod:`geomopt.lm._checkpoints`).
    ``tag`` is added to every metric row (sweeps: several runs in one folder, no checkpoints
    with ``checkpoints=False``). ``hellaswag(trainer, params) -> {name: number}`` scores
    HellaSwag when ``cfg.hellaswag`` is set. Returns the headline numbers.

    Raises:
        NonFiniteLossError: a step produced a non-finite loss or gradient norm; the newest
            checkpoint on disk is the last one with finite loss.
        CheckpointWriteError: a checkpoint could not be written (a full disk); the earlier
            ones are intact and the same command resumes from the newest.
    """
    tag = dict(tag or {})
    trainer = Trainer.build(cfg)
    main = jax.process_index() == 0
    say = run.print if main else (lambda _msg: None)
    peak, peak_source = device_peak_flops(cfg.peak_flops)
    label = " ".join(f"{v:g}" if isinstance(v, float) else f"{v}" for v in tag.values())
    say(
        f"{label + ': ' if label else ''}{cfg.optim.algorithm} lr {cfg.optim.lr:g}, "
        f"{cfg.steps} steps of {cfg.batch_size} x {cfg.sequence_length} tokens on "
        f"{trainer.n_devices} device(s); "
        + (
            f"MFU relative to {_si(peak)}FLOP/s per device ({peak_source})"
            if math.isfinite(peak)
            else peak_source
        )
    )
    run.details.setdefault("peak_flops", {})[label or "run"] = {
        "flops": peak if math.isfinite(peak) else None,
        "source": peak_source,
    }
    sinks = MetricSinks(run, cfg, tag=tag)
    sinks.text("peak_flops", f"{peak:.4g} FLOP/s per device: {peak_source}")
    store = None
    if checkpoints:
        store = Checkpoints(
            run.path / "checkpoints", cfg.ckpt_keep, fresh=not run.resumed, say=say
        )
    params, opt_state = trainer.init()
    start = 0
    summary: dict[str, float] = {}
    try:
        if run.resumed:
            latest = None
            if store is not None:
                latest, params, opt_state = store.restore_latest(params, opt_state)
            if latest is not None:
                start = latest
                say(f"resumed {run.path} from the checkpoint of step {start}")
            else:
                say(f"no checkpoint in {run.path}; starting from step 0")
            if main:
                _truncate_metrics(run.path, start if latest is not None else -1, tag)
        loop = _Loop(trainer, run, sinks, store, say, peak, hellaswag)
        summary = loop.loop(params, opt_state, start, label)
    finally:
        sinks.close()
        if store is not None:
            store.close()
    return summary


def _due(every: int, step: int) -> bool:
    return bool(every) and step % every == 0


@dataclasses.dataclass
class _Loop:
    """The training loop's state between steps: queued metric rows, the headline summary, the
    step clock and the measured token rates; :meth:`run` is the loop."""

    trainer: Trainer
    run: Any
    sinks: MetricSinks
    store: Checkpoints | None
    say: Callable[[str], None]
    peak: float
    hellaswag: Callable | None
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    summary: dict[str, float] = dataclasses.field(default_factory=dict)
    clock: _Clock = dataclasses.field(default_factory=_Clock)
    rates: list[float] = dataclasses.field(default_factory=list)

    def row(self, step: int, **values) -> dict[str, Any]:
        r = {"step": step, "tokens": step * self.trainer.tokens_per_step, **values}
        self.rows.append(r)
        return r

    def flush(self) -> None:
        self.sinks.write(self.rows)
        self.rows.clear()

    def evaluate(self, params, step: int, *, val: bool, noise: bool, hs: bool) -> None:
        """Validation, HellaSwag and noise density at ``step`` (off the step clock)."""
        trainer, summary = self.trainer, self.summary
        self.clock.pause()
        parts = []
        if val:
            v = trainer.validate(params)
            if v:
                self.row(step, **v)
                summary.update(final_val_loss=v["val_loss"], final_val_acc=v["val_acc"])
                parts.append(f"val loss {v['val_loss']:.4f} acc {v['val_acc']:.3f}")
        if hs and self.hellaswag is not None:
            h = self.hellaswag(trainer, params)
            self.row(step, **h)
            summary.update({f"final_{k}": v for k, v in h.items()})
            parts.append(" ".join(f"{k} {v:.4f}" for k, v in h.items()))
        if noise:
            phis = trainer.noise(params, step)
            self.row(step, **phis)
            summary["final_phi"] = phis["phi"]
            parts.append(f"phi {phis['phi']:.4f}")
        if parts:
            self.say(f"step {step:>6} | " + " | ".join(parts))
        self.flush()
        self.clock.resume()

    def settle(self, step: int, metrics) -> dict[str, Any]:
        """Fetch a finished step's metrics, check them, queue its row."""
        m = {k: float(v) for k, v in jax.device_get(metrics).items()}
        r = self.row(step, **m)
        self.summary["final_train_loss"] = m["loss"]
        if "attn_logit_max" in m:  # QK-clip runs: the largest logit seen before clipping
            seen = self.summary.get("max_attn_logit", -math.inf)
            self.summary["max_attn_logit"] = max(seen, m["attn_logit_max"])
        if not (math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"])):
            self.flush()
            store = self.store
            good = store.latest() if store is not None else None
            where = f"step {good} in {store.path}" if good is not None else "none written"
            raise NonFiniteLossError(
                f"non-finite loss {m['loss']} (grad norm {m['grad_norm']}) at step {step}; "
                f"training stopped. Last good checkpoint: {where}"
            )
        return r

    def log(self, done: int, last: dict[str, Any]) -> None:
        """The console line of step ``done``, with the rate, MFU and ETA of the steps since
        the last line (their timing also goes into ``last``)."""
        cfg, trainer, peak = self.trainer.cfg, self.trainer, self.peak
        n, secs = self.clock.window()
        line = f"step {done:>6}/{cfg.steps} | loss {last['loss']:.4f} | lr {last['lr']:.3g}"
        if n > 0 and secs > 0:
            tps = n * trainer.tokens_per_step / secs
            mfu = trainer.flops_per_token * tps / (peak * trainer.n_devices)
            last.update(step_time=secs / n, tokens_per_s=tps)
            if math.isfinite(mfu):
                last["mfu"] = mfu
            self.rates.append(tps)
            eta = (cfg.steps - done) * secs / n
            line += f" | {_si(tps)} tok/s | {_mfu_text(mfu, peak)} | ETA {_duration(eta)}"
        self.say(line)

    def loop(self, params, opt_state, start: int, label: str) -> dict[str, float]:
        trainer, cfg, store = self.trainer, self.trainer.cfg, self.store
        hs_every = cfg.hellaswag_every or cfg.eval_every
        if start == 0:
            self.evaluate(params, 0, val=bool(cfg.eval_every), noise=bool(cfg.noise_every),
                          hs=bool(cfg.hellaswag and hs_every))  # fmt: skip
        desc = f"{label + ', ' if label else ''}steps {start}->{cfg.steps}"
        bar = self.run.progress(total=cfg.steps - start, desc=desc, unit="step")
        pending = None
        try:
            for step in range(start, cfg.steps):
                params, opt_state, metrics = trainer.step(params, opt_state, step)
                done = step + 1
                if self.clock.t0 is None:  # the first step compiles: start timing after it
                    jax.block_until_ready(metrics)
                    self.clock.start()
                else:
                    self.clock.steps += 1
                if pending is not None:
                    self.settle(*pending)
                pending = (done, metrics)
                bar.update(1)
                is_last = done == cfg.steps
                do_val = is_last or _due(cfg.eval_every, done)
                do_hs = bool(cfg.hellaswag) and (is_last or _due(hs_every, done))
                do_noise = _due(cfg.noise_every, done)
                do_ckpt = store is not None and (is_last or _due(cfg.ckpt_every, done))
                do_log = is_last or _due(cfg.log_every, done)
                if not (do_val or do_hs or do_noise or do_ckpt or do_log):
                    continue
                last = self.settle(*pending)
                pending = None
                if do_log:
                    self.log(done, last)
                self.flush()
                if do_val or do_hs or do_noise:
                    self.evaluate(params, done, val=do_val, noise=do_noise, hs=do_hs)
                if do_ckpt:
                    self.clock.pause()
                    store.save(done, params, opt_state)
                    self.clock.resume()
            if pending is not None:
                self.settle(*pending)
            self.flush()
        finally:
            bar.close()
        return self.finish(params)

    def finish(self, params) -> dict[str, float]:
        trainer, cfg, summary = self.trainer, self.trainer.cfg, self.summary
        tokens_per_s = float(np.median(self.rates)) if self.rates else math.nan
        summary.update(
            steps=cfg.steps,
            tokens=cfg.steps * trainer.tokens_per_step,
            tokens_per_s=tokens_per_s,
            params=int(sum(x.size for x in jax.tree.leaves(params))),
        )
        mfu = trainer.flops_per_token * tokens_per_s / (self.peak * trainer.n_devices)
        if math.isfinite(mfu):  # n/a without a known peak: no number at all
            summary["mfu"] = mfu
        return summary
