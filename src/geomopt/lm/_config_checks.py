"""Checks of a pretraining config before anything runs: each bad field is named in one line
with what was expected (:func:`check_train_config`, :func:`check_optim_config`)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from geomopt import optim
from geomopt.lm._config import OptimConfig, TrainConfig
from geomopt.lm._data import ShardError, open_tokens
from geomopt.lm._data import _expand as _expand_token_files

__all__ = [
    "check_data_config",
    "check_devices",
    "check_optim_config",
    "check_train_config",
    "wandb_available",
]


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
    for field in ("weight_decay", "clip", "qk_clip"):
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

    need = _need
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
    check_data_config(cfg)
    if cfg.hellaswag:
        need(Path(cfg.hellaswag).is_file(), f"hellaswag={cfg.hellaswag!r}: no such file")
    if cfg.wandb and not wandb_available():
        raise ValueError(
            "wandb=True but the wandb package is not installed (geomopt does not depend on "
            "it): `uv pip install wandb`, or drop --wandb"
        )
    if n_devices is not None:
        check_devices(cfg, n_devices)


def _need(cond, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def check_data_config(cfg: TrainConfig) -> None:
    """Raise ``ValueError`` naming the first bad ``data.*`` field: the source and format, and
    for token files that every glob matches files whose header, magic and size are right (a
    file cut short or whose token count disagrees with its size is named; tokens not read)."""
    data = cfg.data
    _check_choice("data.source", data.source, ("auto", "offline", "shards"))
    _check_choice("data.format", data.format, ("auto", "shard", "llama3", "nanogpt"))
    _need(
        _is_int(data.offline_bytes) and data.offline_bytes >= 1,
        f"data.offline_bytes={data.offline_bytes!r}: expected an integer >= 1",
    )
    given = [f"data.{n}={getattr(data, n)!r}" for n in ("train", "val") if getattr(data, n)]
    _need(
        not (given and data.source == "offline"),
        f"{' and '.join(given)} given, but data.source='offline' trains on the offline "
        "corpus and would ignore it; drop --data.source offline (or pass --data.source shards) "
        "to train on the token files",
    )
    if data.resolved_source == "offline":
        _need(
            cfg.model.vocab_size >= 256,
            f"model.vocab_size={cfg.model.vocab_size}: the offline corpus is byte-level; "
            "expected >= 256",
        )
        return
    for name in ("train", "val"):
        pattern = getattr(data, name)
        other = "val" if name == "train" else "train"
        _need(
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
        for f in files:
            try:
                open_tokens(f, format=data.format)
            except ShardError as e:
                raise ValueError(f"data.{name}: {e}") from None


def check_devices(cfg: TrainConfig, n_devices: int) -> None:
    """Raise ``ValueError`` unless the micro-batch and the evaluation and noise batches split
    evenly over the ``n_devices`` devices of the data axis."""
    _need(
        cfg.micro_batch % n_devices == 0,
        f"micro-batch {cfg.micro_batch} (batch_size/grad_accum) is not divisible by the "
        f"{n_devices} devices of the data axis",
    )
    for name in ("eval_batch_size", "noise_batch_size"):
        v = getattr(cfg, name) or cfg.micro_batch
        _need(v % n_devices == 0, f"{name}={v} is not divisible by the {n_devices} devices")


def wandb_available() -> bool:
    """Whether the optional ``wandb`` package can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("wandb") is not None
    except ValueError:  # wandb in sys.modules with no spec (e.g. blocked by a test)
        return False
