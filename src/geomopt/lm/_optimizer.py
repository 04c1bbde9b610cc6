"""The optimiser of a pretraining run: learning-rate schedules and the optax chain built from an
:class:`OptimConfig` (Muon and friends on the matrices, AdamW on the rest, as the config says)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import optax

from geomopt import optim
from geomopt.lm._config import OptimConfig
from geomopt.lm._model import param_label

__all__ = ["build_optimizer", "lr_schedule", "uses_qk_clip"]


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


def _options_of(name: str) -> set[str]:
    """The keyword options the registered factory ``name`` takes (empty if unknown)."""
    factory = optim.OPTIMIZERS.get(name)
    try:
        return set(inspect.signature(factory).parameters) if factory else set()
    except (TypeError, ValueError):
        return set()


def uses_qk_clip(ocfg: OptimConfig) -> bool:
    """Whether the optimiser of ``ocfg`` clips attention logits, so its ``update`` needs
    ``attn_logit_max`` (``qk_clip > 0``, or a factory with its own QK-clip, ``muon_clip``)."""
    return ocfg.qk_clip > 0 or "qk_threshold" in _options_of(ocfg.algorithm)


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


_BUILTIN = {
    "adamw": lambda ocfg, decay: dict(b1=ocfg.b1, b2=ocfg.b2, **decay),
    "sgd": lambda ocfg, decay: dict(momentum=ocfg.momentum, nesterov=ocfg.nesterov, **decay),
    "sign_sgd": lambda ocfg, decay: decay,
    "signum": lambda ocfg, decay: dict(momentum=ocfg.momentum, **decay),
}
"""The OptimConfig fields each built-in non-Muon factory of geomopt.optim.OPTIMIZERS gets."""


def build_optimizer(ocfg: OptimConfig, total_steps: int, lr=None) -> optax.GradientTransformation:
    """The optax transformation of ``ocfg`` (``lr`` overrides ``ocfg.lr``; may be traced, so
    one compiled step serves several learning rates)."""
    lr = ocfg.lr if lr is None else lr
    sched = lr_schedule(ocfg.schedule, lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac)
    wd = ocfg.weight_decay
    decay = dict(weight_decay=wd, mask=_matrix_mask)
    takes = _options_of(ocfg.algorithm)
    if {"label_fn", "adam_learning_rate"} <= takes:  # muon and its variants: Muon's options
        adam_sched = lr_schedule(
            ocfg.schedule, ocfg.adam_lr, total_steps, ocfg.warmup_frac, ocfg.decay_frac
        )
        kwargs = dict(
            momentum=ocfg.momentum,
            nesterov=ocfg.nesterov,
            weight_decay=wd,
            adam_learning_rate=adam_sched,
            adam_b1=ocfg.b1,
            adam_b2=ocfg.b2,
            label_fn=_muon_label,
        )
    elif ocfg.algorithm in _BUILTIN:  # the options of each algorithm's factory
        kwargs = _BUILTIN[ocfg.algorithm](ocfg, decay)
    else:
        kwargs = _registered_options(ocfg)
    clip_inside = "qk_threshold" in takes  # muon_clip: its own QK-clip at ocfg.qk_clip
    if clip_inside and ocfg.qk_clip > 0:
        kwargs["qk_threshold"] = ocfg.qk_clip
    tx = optim.make_optimizer(ocfg.algorithm, sched, **kwargs)
    if ocfg.qk_clip > 0 and not clip_inside:
        tx = optax.chain(tx, optim.qk_clip(ocfg.qk_clip))
    if ocfg.clip > 0:
        tx = optax.chain(optax.clip_by_global_norm(ocfg.clip), tx)
    return tx
