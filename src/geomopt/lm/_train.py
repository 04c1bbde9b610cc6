"""GPT-2 pretraining in named pieces: build (data, mesh, shardings, optimiser and jitted
functions, once), step, evaluation, noise density, checkpoints, metric sinks, and the loop.

The training state is the model's parameters split off once with ``nnx.split`` plus the optax
state; one pure, jitted step maps ``(params, opt_state, batch, step, lr)`` to the next state with
the state donated. The optimiser is built once per run from a traced peak learning rate, so runs
that differ only in the learning rate or the seed (sweeps) reuse one compiled step. Batches are
``(grad_accum, micro_batch, seq_len + 1)`` token windows sharded over the ``data`` axis of a
one-axis mesh; parameters are replicated or FSDP-sharded (largest axis divisible by the device
count). Everything that decides a run's numbers — the initial parameters, the batches, the
dropout keys — is a function of ``(seed, step)``, so a run resumed from a checkpoint continues
exactly as the uninterrupted one.

The run folder belongs to :mod:`geomopt.experiment`; :func:`train` gets its ``Run`` handle and
keeps checkpoints in ``<run folder>/checkpoints``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping
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
from geomopt.lm._checkpoints import Checkpoints
from geomopt.lm._config import GPT2Config, OptimConfig, TrainConfig
from geomopt.lm._data import BatchLoader, ShardError, TokenData, build_offline_corpus, open_tokens
from geomopt.lm._data import _expand as _expand_token_files
from geomopt.lm._model import GPT2, flops_per_token, param_label
from geomopt.lm._noise import noise_density, noise_groups, welford_variance
from geomopt.runs import METRICS_FILE, atomic_write_bytes, load_metrics

__all__ = [
    "NonFiniteLossError",
    "Trainer",
    "MetricSinks",
    "build_optimizer",
    "check_optim_config",
    "check_train_config",
    "device_peak_flops",
    "lr_schedule",
    "make_mesh",
    "measured_matmul_flops",
    "peak_flops_per_device",
    "train",
    "wandb_available",
]


class NonFiniteLossError(FloatingPointError, ValueError):
    """Training produced a non-finite loss or gradient norm; the message names the step and the
    last good checkpoint. (A ``ValueError`` too: the runner reports it as a bad setting, e.g. a
    learning rate that diverges, without a traceback.)"""


# ---------------------------------------------------------------------------------------------
# Peak FLOP/s for MFU

_PEAK_BF16 = {
    "b200": 2250e12,
    "h200": 989e12,
    "h100": 989e12,
    "a100": 312e12,
    "l40s": 362e12,
    "l4": 121e12,
    "a10": 125e12,
    "v6": 918e12,
    "v5p": 459e12,
    "v5": 197e12,
    "v4": 275e12,
}
"""Dense bf16 peak FLOP/s per device by device-kind substring (vendor data sheets, no sparsity);
checked in order, so ``v5p`` is matched before ``v5`` (TPU v5e reports ``TPU v5 lite``)."""


def peak_flops_per_device(device=None) -> float:
    """Dense bf16 peak FLOP/s of a known accelerator (from its device kind); NaN otherwise."""
    device = device or jax.devices()[0]
    kind = getattr(device, "device_kind", "").lower().replace(" ", "")
    for name, flops in _PEAK_BF16.items():
        if name in kind:
            return flops
    return math.nan


@functools.cache
def measured_matmul_flops(n: int = 1024, repeats: int = 5, dtype: str = "float32") -> float:
    """FLOP/s of a jitted ``n x n`` matmul on the default device, median of ``repeats`` timed
    calls after one warm-up (measured once per process). Not used for MFU (it moves with the
    machine's load: 28 %-102 % MFU for one speed); benchmarks report it next to MFU."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.dtype(dtype))
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(a).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2.0 * n**3 / statistics.median(times)


def device_peak_flops(override: float = 0.0, device=None) -> tuple[float, str]:
    """``(peak FLOP/s per device, where it comes from)`` for MFU.

    ``override`` > 0 wins; a known GPU/TPU gets its dense bf16 peak from :data:`_PEAK_BF16`
    (a fixed data-sheet number, so MFU cannot exceed 100 % and does not move with a rate
    re-measured each run); anything else (a CPU, an unknown accelerator) gets NaN, and MFU is
    shown as n/a: a CPU has no one documented peak (it depends on the cores, vector units and
    clock), so pass ``--peak-flops`` to get one there.
    """
    if override > 0:
        return float(override), "given by --peak-flops"
    device = device or jax.devices()[0]
    table = peak_flops_per_device(device)
    kind = getattr(device, "device_kind", device.platform)
    if math.isfinite(table):
        return table, f"dense bf16 peak of {kind} (data sheet)"
    return math.nan, f"no known peak for {kind}: MFU n/a (set --peak-flops)"


def _mfu_text(mfu: float, peak: float) -> str:
    if not math.isfinite(mfu):
        return "MFU n/a"
    if mfu > 1.0:  # only with a --peak-flops below the device's real peak
        return f"MFU {100 * mfu:.1f}% (above 100 %: --peak-flops {peak:.3g} is below the peak)"
    return f"MFU {100 * mfu:.1f}%"


# ---------------------------------------------------------------------------------------------
# Optimiser


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


def _registered_options(ocfg: OptimConfig) -> dict:
    """The ``OptimConfig`` fields that the factory of a registered (not built-in) optimiser takes;
    a weight decay it cannot take is refused, not dropped."""
    if ocfg.algorithm not in optim.OPTIMIZERS:
        raise ValueError(
            f"optim.algorithm={ocfg.algorithm!r}: expected one of {sorted(optim.OPTIMIZERS)} "
            "(register others with geomopt.optim.register_optimizer)"
        )
    factory = optim.OPTIMIZERS[ocfg.algorithm]
    try:
        takes = set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes = set()
    given = dict(momentum=ocfg.momentum, nesterov=ocfg.nesterov, b1=ocfg.b1, b2=ocfg.b2)
    kwargs = {k: v for k, v in given.items() if k in takes}
    if "weight_decay" in takes:
        kwargs["weight_decay"] = ocfg.weight_decay
        if "mask" in takes:
            kwargs["mask"] = _matrix_mask
    elif ocfg.weight_decay:
        raise ValueError(
            f"optim.weight_decay={ocfg.weight_decay!r}: optimiser {ocfg.algorithm!r} takes no "
            "weight_decay; expected 0"
        )
    return kwargs


def build_optimizer(ocfg: OptimConfig, total_steps: int, lr=None) -> optax.GradientTransformation:
    """The optax transformation of ``ocfg`` (``lr`` overrides ``ocfg.lr``; may be traced, so
    one compiled step serves several learning rates)."""
    lr = ocfg.lr if lr is None else lr
    sched = lr_schedule(ocfg.schedule, lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac)
    wd = ocfg.weight_decay
    decay = dict(weight_decay=wd, mask=_matrix_mask)
    if ocfg.algorithm == "muon":
        adam_sched = lr_schedule(
            ocfg.schedule, ocfg.adam_lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac
        )
    # the options of each algorithm's factory in geomopt.optim.OPTIMIZERS
    options = {
        "adamw": lambda: dict(b1=ocfg.b1, b2=ocfg.b2, **decay),
        "sgd": lambda: dict(momentum=ocfg.momentum, nesterov=ocfg.nesterov, **decay),
        "sign_sgd": lambda: decay,
        "signum": lambda: dict(momentum=ocfg.momentum, **decay),
        "muon": lambda: dict(
            momentum=ocfg.momentum,
            nesterov=ocfg.nesterov,
            weight_decay=wd,
            adam_learning_rate=adam_sched,
            adam_b1=ocfg.b1,
            adam_b2=ocfg.b2,
            label_fn=_muon_label,
        ),
    }
    if ocfg.algorithm in options:
        kwargs = options[ocfg.algorithm]()
    else:
        kwargs = _registered_options(ocfg)
    tx = optim.make_optimizer(ocfg.algorithm, sched, **kwargs)
    if ocfg.clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(ocfg.clip), tx)
    return tx


# ---------------------------------------------------------------------------------------------
# Mesh and shardings


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


# ---------------------------------------------------------------------------------------------
# Jitted functions (cached across runs of a sweep)


def _loss_and_accuracy(graphdef, params, tokens_BxT1, key):
    """Mean next-token cross-entropy and accuracy (``GPT2.loss``: chunked output head)."""
    return nnx.merge(graphdef, params).loss(tokens_BxT1, key=key)


def _loss(graphdef, params, tokens, key):
    return _loss_and_accuracy(graphdef, params, tokens, key)[0]


@dataclasses.dataclass(frozen=True)
class _StepKey:
    graphdef: Any
    optim: OptimConfig
    total_steps: int
    dropout: bool
    mesh: Any


@functools.lru_cache(maxsize=8)
def _model_fns(config: GPT2Config, graphdef, param_sh_leaves, param_treedef):
    """Jitted parameter init, validation and noise-density functions (optimiser-independent,
    so a sweep over optimisers compiles them once)."""
    param_sh = jax.tree.unflatten(param_treedef, param_sh_leaves)

    def init(key):
        return nnx.split(GPT2(config, rngs=nnx.Rngs(params=key)), nnx.Param)[1]

    def evaluate(params, batches_ExBxT1):
        def body(_, tokens):
            return None, _loss_and_accuracy(graphdef, params, tokens, None)

        _, (losses, accs) = jax.lax.scan(body, None, batches_ExBxT1)
        return jnp.mean(losses), jnp.mean(accs)

    def noise(params, batches_KxBxT1):
        def grads_of(tokens, p):
            return jax.grad(_loss, argnums=1)(graphdef, p, tokens, None)

        return welford_variance(grads_of, batches_KxBxT1, params)[1]

    return (
        jax.jit(init, out_shardings=param_sh),
        jax.jit(evaluate),
        jax.jit(noise, out_shardings=param_sh),
    )


@functools.lru_cache(maxsize=16)
def _optim_fns(k: _StepKey, param_sh_leaves, param_treedef, opt_sh_leaves, opt_treedef):
    """Jitted optimiser init and train step. The optimiser is built once, as a function of the
    traced peak learning rate, and serves both; the cache key holds the optimiser config with
    ``lr=0``, so runs that differ only in the learning rate or the seed share one compilation."""
    graphdef, ocfg = k.graphdef, k.optim
    param_sh = jax.tree.unflatten(param_treedef, param_sh_leaves)
    opt_sh = jax.tree.unflatten(opt_treedef, opt_sh_leaves)
    rep = NamedSharding(k.mesh, P())
    grad_fn = jax.value_and_grad(functools.partial(_loss, graphdef))
    tx_of = functools.partial(build_optimizer, ocfg, k.total_steps)
    sched_of = functools.partial(
        lr_schedule, ocfg.schedule, total_steps=k.total_steps,
        warmup_frac=ocfg.warmup_frac, decay_frac=ocfg.decay_frac,
    )  # fmt: skip

    def train_step(params, opt_state, batch_AxBxT1, step, lr, dropout_key):
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
        updates, opt_state = tx_of(lr).update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        metrics = {
            "loss": loss_sum / n_acc,
            "grad_norm": optax.tree.norm(grads),
            "lr": sched_of(lr)(step),
        }
        return params, opt_state, metrics

    opt_init = jax.jit(lambda params, lr: tx_of(lr).init(params), out_shardings=opt_sh)
    step_jit = jax.jit(
        train_step,
        donate_argnums=(0, 1),
        out_shardings=(param_sh, opt_sh, {"loss": rep, "grad_norm": rep, "lr": rep}),
    )
    return opt_init, step_jit


# ---------------------------------------------------------------------------------------------
# Data


def _assemble(local: np.ndarray, mesh, shape) -> jax.Array:
    sharding = NamedSharding(mesh, P(None, "data", None))
    return jax.make_array_from_process_local_data(sharding, local, shape)


def _stacked_batches(loader: BatchLoader, steps: list[int], mesh) -> jax.Array:
    """The batches of loader steps ``steps`` as one ``(len(steps), batch, T+1)`` global array
    sharded over ``data`` on axis 1 (each process supplies its rows)."""
    pid, pcount = jax.process_index(), jax.process_count()
    local = np.stack([loader.local_batch(s, pid, pcount) for s in steps])
    return _assemble(local, mesh, (len(steps), loader.batch_size, loader.seq_len + 1))


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


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(str, choices))}")


def check_optim_config(ocfg: OptimConfig, steps: int | None = None, prefix: str = "optim") -> None:
    """Raise ``ValueError`` naming the first bad field of ``ocfg`` as ``<prefix>.<field>``
    (the command-line name, e.g. ``optim.lr``). With ``steps``, also that the warm-up and
    decay of the schedule fit in the run."""

    def name(field: str) -> str:
        return f"{prefix}.{field}" if prefix else field

    _check_choice(name("algorithm"), ocfg.algorithm, tuple(sorted(optim.OPTIMIZERS)))
    _check_choice(name("schedule"), ocfg.schedule, ("one_cycle", "wsd", "cosine", "constant"))
    for field in ("lr", "adam_lr"):
        v = getattr(ocfg, field)
        if not (_is_real(v) and v > 0):
            raise ValueError(f"{name(field)}={v!r}: expected a finite learning rate > 0")
    for field in ("weight_decay", "clip"):
        v = getattr(ocfg, field)
        if not (_is_real(v) and v >= 0):
            raise ValueError(f"{name(field)}={v!r}: expected a finite value >= 0")
    for field in ("momentum", "b1", "b2"):
        v = getattr(ocfg, field)
        if not (_is_real(v) and 0 <= v < 1):
            raise ValueError(f"{name(field)}={v!r}: expected a value in [0, 1)")
    for field in ("warmup_frac", "decay_frac"):
        v = getattr(ocfg, field)
        if not (_is_real(v) and 0 <= v <= 1):
            raise ValueError(f"{name(field)}={v!r}: expected a fraction in [0, 1]")
    if not isinstance(ocfg.nesterov, bool):
        raise ValueError(f"{name('nesterov')}={ocfg.nesterov!r}: expected True or False")
    if steps is not None and ocfg.schedule == "wsd":
        warmup, decay = round(ocfg.warmup_frac * steps), ocfg.decay_frac * steps
        if warmup + decay > steps:
            raise ValueError(
                f"{name('warmup_frac')}={ocfg.warmup_frac!r} and {name('decay_frac')}="
                f"{ocfg.decay_frac!r}: warm-up ({warmup} steps) and decay ({decay:g} steps) "
                f"exceed the {steps} steps; expected them to fit"
            )


def _prepare_hint(pattern: str) -> str:
    """The command that writes the token shards a data glob expects."""
    for preset, folder in (("c4", "data/c4/"), ("fineweb", "data/fineweb10B/")):
        if pattern.startswith(folder):
            return (f"write them with: uv run --with datasets experiments/signsgd/prepare_data.py "
                    f"{preset}")  # fmt: skip
    return ("write token shards matching it with experiments/signsgd/prepare_data.py (see: uv run "
            "experiments/signsgd/prepare_data.py --help)")  # fmt: skip


def check_train_config(cfg: TrainConfig, n_devices: int | None = None) -> None:
    """Raise ``ValueError`` naming the first bad field (nested ones as ``optim.lr``,
    ``data.train``; device divisibility too when ``n_devices`` is given). Token files and the
    HellaSwag file must exist. Imports nothing heavy; the experiment's ``validate`` calls it."""

    def need(cond, msg):
        if not cond:
            raise ValueError(msg)

    for name in ("steps", "grad_accum", "batch_size", "log_every", "ckpt_keep", "noise_samples"):
        v = getattr(cfg, name)
        need(_is_int(v) and v >= 1, f"{name}={v!r}: expected an integer >= 1")
    for name in ("eval_every", "eval_batches", "ckpt_every", "noise_every", "hellaswag_every",
                 "hellaswag_examples", "seq_len", "eval_batch_size", "noise_batch_size",
                 "n_devices", "seed"):  # fmt: skip
        v = getattr(cfg, name)
        need(_is_int(v) and v >= 0, f"{name}={v!r}: expected an integer >= 0")
    need(
        cfg.noise_every == 0 or cfg.noise_samples >= 2,
        f"noise_samples={cfg.noise_samples!r}: expected >= 2 gradients per phi measurement "
        "(a variance needs two)",
    )
    need(
        cfg.batch_size % cfg.grad_accum == 0,
        f"batch_size={cfg.batch_size} is not divisible by grad_accum={cfg.grad_accum}",
    )
    need(
        cfg.sequence_length <= cfg.model.context,
        f"seq_len={cfg.sequence_length} exceeds the model context {cfg.model.context}",
    )
    need(
        _is_real(cfg.peak_flops) and cfg.peak_flops >= 0,
        f"peak_flops={cfg.peak_flops!r}: expected a finite value >= 0 (0: automatic)",
    )
    for name in ("fsdp", "distributed", "tensorboard", "wandb"):
        v = getattr(cfg, name)
        need(isinstance(v, bool), f"{name}={v!r}: expected True or False")
    _check_choice("wandb_mode", cfg.wandb_mode, ("offline", "online"))
    check_optim_config(cfg.optim, cfg.steps)
    data = cfg.data
    _check_choice("data.source", data.source, ("auto", "offline", "shards"))
    _check_choice("data.format", data.format, ("auto", "shard", "llama3", "nanogpt"))
    need(
        _is_int(data.offline_bytes) and data.offline_bytes >= 1,
        f"data.offline_bytes={data.offline_bytes!r}: expected an integer >= 1",
    )
    given = [f"data.{n}={getattr(data, n)!r}" for n in ("train", "val") if getattr(data, n)]
    need(
        not (given and data.source == "offline"),
        f"{' and '.join(given)} given, but data.source='offline' trains on the offline "
        "corpus and would ignore it; drop --data.source offline (or pass --data.source shards) "
        "to train on the token files",
    )
    if data.resolved_source == "offline":
        need(
            cfg.model.vocab_size >= 256,
            f"model.vocab_size={cfg.model.vocab_size}: the offline corpus is byte-level; "
            "expected >= 256",
        )
    else:
        for name in ("train", "val"):
            pattern = getattr(data, name)
            other = "val" if name == "train" else "train"
            need(
                pattern,
                f"data.{name}='': training on token files needs a {name} glob too"
                + (f" (data.{other}={getattr(data, other)!r} is given)" if getattr(data, other)
                   else " (data.source='shards')"),
            )  # fmt: skip
            try:
                files = _expand_token_files(pattern)
            except FileNotFoundError:
                raise ValueError(
                    f"data.{name}={pattern!r}: no token file matches; {_prepare_hint(pattern)}"
                ) from None
            for f in files:  # header, magic and size (a cut file, a wrong count), not tokens
                try:
                    open_tokens(f, format=data.format)
                except ShardError as e:
                    raise ValueError(f"data.{name}: {e}") from None
    if cfg.hellaswag:
        need(Path(cfg.hellaswag).is_file(), f"hellaswag={cfg.hellaswag!r}: no such file")
    if cfg.wandb and not wandb_available():
        raise ValueError(
            "wandb=True but the wandb package is not installed (geomopt does not depend on "
            "it): `uv pip install wandb`, or drop --wandb"
        )
    if n_devices is None:
        return
    need(
        cfg.micro_batch % n_devices == 0,
        f"micro-batch {cfg.micro_batch} (batch_size/grad_accum) is not divisible by the "
        f"{n_devices} devices of the data axis",
    )
    for name in ("eval_batch_size", "noise_batch_size"):
        v = getattr(cfg, name) or cfg.micro_batch
        need(v % n_devices == 0, f"{name}={v} is not divisible by the {n_devices} devices")


def wandb_available() -> bool:
    """Whether the optional ``wandb`` package can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("wandb") is not None
    except ValueError:  # wandb in sys.modules with no spec (e.g. blocked by a test)
        return False


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
            val_batches = _stacked_batches(val_loader, list(range(cfg.eval_batches)), mesh)

        graphdef, abstract_params = nnx.split(
            nnx.eval_shape(lambda: GPT2(cfg.model, rngs=nnx.Rngs(params=0))), nnx.Param
        )
        param_sh = _state_shardings(abstract_params, mesh, cfg.fsdp)
        abstract_opt = jax.eval_shape(build_optimizer(cfg.optim, cfg.steps).init, abstract_params)
        opt_sh = _state_shardings(abstract_opt, mesh, cfg.fsdp)
        p_leaves, p_def = jax.tree.flatten(param_sh)
        o_leaves, o_def = jax.tree.flatten(opt_sh)
        key = _StepKey(
            graphdef,
            dataclasses.replace(cfg.optim, lr=0.0),
            cfg.steps,
            cfg.model.dropout > 0,
            mesh,
        )
        init_fn, eval_fn, noise_fn = _model_fns(cfg.model, graphdef, tuple(p_leaves), p_def)
        opt_init, step_fn = _optim_fns(key, tuple(p_leaves), p_def, tuple(o_leaves), o_def)
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
        batch = _train_batch(self.train_loader, step, self.cfg.grad_accum, self.mesh)
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
        var = self.noise_fn(params, _stacked_batches(self.noise_loader, ids, self.mesh))
        return noise_density(var, self.groups)


# ---------------------------------------------------------------------------------------------
# Metric sinks: metrics.jsonl, TensorBoard, Weights & Biases


class MetricSinks:
    """Where metric rows go: the run's ``metrics.jsonl``, TensorBoard event files in
    ``<run>/tensorboard[/<tag>]`` (``tensorboardX``), and Weights & Biases when enabled (the
    ``wandb`` package is imported only then). Only process 0 writes; ``tag`` (a dict) is added
    to every row, and its values name the TensorBoard subfolder and W&B prefix."""

    def __init__(self, run, cfg: TrainConfig, *, tag: Mapping[str, Any] | None = None):
        self.run = run
        self.tag = dict(tag or {})
        self.main = jax.process_index() == 0
        self.prefix = "_".join(f"{v}" for v in self.tag.values())
        self.tb = None
        self.wandb = None
        if not self.main:
            return
        if cfg.tensorboard:
            from tensorboardX import SummaryWriter

            logdir = run.path / "tensorboard"
            self.tb = SummaryWriter(str(logdir / self.prefix if self.prefix else logdir))
        if cfg.wandb:
            try:
                import wandb
            except ImportError as e:
                raise ValueError(
                    "wandb=True but the wandb package is not installed (geomopt does not "
                    "depend on it): `uv pip install wandb`, or drop --wandb"
                ) from e
            self.wandb = wandb.init(
                project=cfg.wandb_project,
                name=f"{run.path.name}{'-' + self.prefix if self.prefix else ''}",
                dir=str(run.path),
                mode=cfg.wandb_mode,
                config=json.loads(json.dumps(dataclasses.asdict(cfg), default=str)),
                resume="allow",
                id=f"{run.path.name}-{self.prefix}".strip("-").replace("/", "_"),
            )

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not (self.main and rows):
            return
        self.run.log_rows([{**r, **self.tag} for r in rows])
        for r in rows:
            step = int(r["step"])
            scalars = {
                k: float(v)
                for k, v in r.items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            if self.tb is not None:
                for k, v in scalars.items():
                    self.tb.add_scalar(k, v, step)
            if self.wandb is not None:
                self.wandb.log(scalars, step=step)
        if self.tb is not None:
            self.tb.flush()

    def text(self, name: str, value: str) -> None:
        if self.tb is not None:
            self.tb.add_text(name, value, 0)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _truncate_metrics(path: Path, last_step: int, tag: Mapping[str, Any]) -> None:
    """Drop this run's (``tag``) metric rows after ``last_step`` (written by the interrupted
    part of a run after its last checkpoint); ``last_step < 0`` drops all of them."""
    rows = load_metrics(path / METRICS_FILE)
    mine = [all(r.get(k) == v for k, v in tag.items()) for r in rows]
    keep = [r for r, m in zip(rows, mine, strict=True) if not m or r.get("step", 0) <= last_step]
    if len(keep) != len(rows):
        text = "".join(json.dumps(r) + "\n" for r in keep)
        atomic_write_bytes(path / METRICS_FILE, text.encode())


# ---------------------------------------------------------------------------------------------
# Console


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    h, m = divmod(s, 3600)
    m, s = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


class _Clock:
    """Training time only: the first step of a (resumed) run, which compiles, and everything
    between :meth:`pause` and :meth:`resume` (evaluation, noise, checkpoints) are excluded."""

    def __init__(self):
        self.t0: float | None = None
        self.steps = 0
        self.paused = 0.0
        self._pause_t: float | None = None

    def start(self) -> None:
        self.t0, self.steps, self.paused = time.perf_counter(), 0, 0.0

    def pause(self) -> None:
        self._pause_t = time.perf_counter()

    def resume(self) -> None:
        if self._pause_t is not None:
            self.paused += time.perf_counter() - self._pause_t
            self._pause_t = None

    def window(self) -> tuple[int, float]:
        """``(steps, seconds)`` since the last window, then start a new one."""
        steps, secs = self.steps, time.perf_counter() - self.t0 - self.paused
        self.start()
        return steps, secs


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
    label = " ".join(f"{v}" for v in tag.values())
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
        summary = _loop(
            trainer, params, opt_state, start, run, sinks, store, say, peak, hellaswag, label
        )
    finally:
        sinks.close()
        if store is not None:
            store.close()
    return summary


def _loop(trainer, params, opt_state, start, run, sinks, store, say, peak, hellaswag, label):
    cfg = trainer.cfg
    tps_step = trainer.tokens_per_step
    rows: list[dict[str, Any]] = []
    summary: dict[str, float] = {}
    clock = _Clock()
    rates: list[float] = []

    def row(step: int, **values) -> dict[str, Any]:
        r = {"step": step, "tokens": step * tps_step, **values}
        rows.append(r)
        return r

    def evaluate(step: int, *, val: bool, noise: bool, hs: bool) -> None:
        clock.pause()
        parts = []
        if val:
            v = trainer.validate(params)
            if v:
                row(step, **v)
                summary.update(final_val_loss=v["val_loss"], final_val_acc=v["val_acc"])
                parts.append(f"val loss {v['val_loss']:.4f} acc {v['val_acc']:.3f}")
        if hs and hellaswag is not None:
            h = hellaswag(trainer, params)
            row(step, **h)
            summary.update({f"final_{k}": v for k, v in h.items()})
            parts.append(" ".join(f"{k} {v:.4f}" for k, v in h.items()))
        if noise:
            phis = trainer.noise(params, step)
            row(step, **phis)
            summary["final_phi"] = phis["phi"]
            parts.append(f"phi {phis['phi']:.4f}")
        if parts:
            say(f"step {step:>6} | " + " | ".join(parts))
        sinks.write(rows)
        rows.clear()
        clock.resume()

    def due(every: int, step: int) -> bool:
        return bool(every) and step % every == 0

    hs_every = cfg.hellaswag_every or cfg.eval_every
    if start == 0:
        evaluate(
            0,
            val=bool(cfg.eval_every),
            noise=bool(cfg.noise_every),
            hs=bool(cfg.hellaswag and hs_every),
        )

    def settle(step, metrics):
        """Fetch a finished step's metrics, check them, queue its row."""
        m = {k: float(v) for k, v in jax.device_get(metrics).items()}
        r = row(step, **m)
        summary["final_train_loss"] = m["loss"]
        if not (math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"])):
            sinks.write(rows)
            rows.clear()
            good = store.latest() if store is not None else None
            where = f"step {good} in {store.path}" if good is not None else "none written"
            raise NonFiniteLossError(
                f"non-finite loss {m['loss']} (grad norm {m['grad_norm']}) at step {step}; "
                f"training stopped. Last good checkpoint: {where}"
            )
        return r

    desc = f"{label + ', ' if label else ''}steps {start}->{cfg.steps}"
    bar = run.progress(total=cfg.steps - start, desc=desc, unit="step")
    pending = None
    try:
        for step in range(start, cfg.steps):
            params, opt_state, metrics = trainer.step(params, opt_state, step)
            done = step + 1
            if clock.t0 is None:  # the first step compiles: start timing after it
                jax.block_until_ready(metrics)
                clock.start()
            else:
                clock.steps += 1
            if pending is not None:
                settle(*pending)
            pending = (done, metrics)
            bar.update(1)

            is_last = done == cfg.steps
            do_val = is_last or due(cfg.eval_every, done)
            do_hs = bool(cfg.hellaswag) and (is_last or due(hs_every, done))
            do_noise = due(cfg.noise_every, done)
            do_ckpt = store is not None and (is_last or due(cfg.ckpt_every, done))
            do_log = is_last or due(cfg.log_every, done)
            if not (do_val or do_hs or do_noise or do_ckpt or do_log):
                continue
            last = settle(*pending)
            pending = None
            if do_log:
                n, secs = clock.window()
                line = f"step {done:>6}/{cfg.steps} | loss {last['loss']:.4f} | lr {last['lr']:.3g}"
                if n > 0 and secs > 0:
                    tps = n * tps_step / secs
                    mfu = trainer.flops_per_token * tps / (peak * trainer.n_devices)
                    last.update(step_time=secs / n, tokens_per_s=tps)
                    if math.isfinite(mfu):
                        last["mfu"] = mfu
                    rates.append(tps)
                    eta = (cfg.steps - done) * secs / n
                    line += f" | {_si(tps)} tok/s | {_mfu_text(mfu, peak)} | ETA {_duration(eta)}"
                say(line)
            sinks.write(rows)
            rows.clear()
            if do_val or do_hs or do_noise:
                evaluate(done, val=do_val, noise=do_noise, hs=do_hs)
            if do_ckpt:
                clock.pause()
                store.save(done, params, opt_state)
                clock.resume()
        if pending is not None:
            settle(*pending)
        sinks.write(rows)
    finally:
        bar.close()

    tokens_per_s = float(np.median(rates)) if rates else math.nan
    summary.update(
        steps=cfg.steps,
        tokens=cfg.steps * tps_step,
        tokens_per_s=tokens_per_s,
        params=int(sum(x.size for x in jax.tree.leaves(params))),
    )
    mfu = trainer.flops_per_token * tokens_per_s / (peak * trainer.n_devices)
    if math.isfinite(mfu):  # n/a without a known peak: no number at all
        summary["mfu"] = mfu
    return summary
