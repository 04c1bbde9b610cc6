"""Learning-rate schedules used by the paper's GPT-2 recipe and by Muon pretraining.

All are optax schedules: ``step -> lr``, pure ``jnp`` so they can be jitted and ``peak_lr`` may be
a traced array (one compiled step serves a sweep over peak learning rates).
"""

import jax.numpy as jnp
import optax

from geomopt.optim._validate import check_learning_rate


def _check_steps(total_steps: int, warmup_steps: int | None = None) -> None:
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps={total_steps!r}: expected an int >= 1")
    if warmup_steps is not None and (
        not isinstance(warmup_steps, int) or not 0 <= warmup_steps <= total_steps
    ):
        raise ValueError(f"warmup_steps={warmup_steps!r}: expected an int in [0, {total_steps}]")


def _check_frac(name: str, value: float) -> None:
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}={value!r}: expected a fraction in [0, 1]")


def _cosine_ramp(frac, start, end):
    """start -> end along half a cosine as frac goes 0 -> 1."""
    return end + (start - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))


def one_cycle_schedule(
    peak_lr, total_steps: int, warmup_frac: float = 0.1, div: float = 100.0
) -> optax.Schedule:
    """The paper's one-cycle schedule (SignSGD vs SGD on GPT-2).

    lr(t) rises from ``peak_lr/div`` to ``peak_lr`` along a half cosine over the first
    ``warmup_frac * total_steps`` steps, then falls back to ``peak_lr/div`` along a half cosine
    at ``t = total_steps`` (held there afterwards).
    """
    check_learning_rate("peak_lr", peak_lr)
    _check_steps(total_steps)
    _check_frac("warmup_frac", warmup_frac)
    if not float(div) >= 1.0:
        raise ValueError(f"div={div!r}: expected a divisor >= 1")
    warmup = float(warmup_frac) * total_steps

    def schedule(step):
        t = jnp.asarray(step, jnp.float32)
        low = peak_lr / div
        up = _cosine_ramp(jnp.clip(t / max(warmup, 1e-12), 0.0, 1.0), low, peak_lr)
        down_frac = jnp.clip((t - warmup) / max(total_steps - warmup, 1e-12), 0.0, 1.0)
        down = _cosine_ramp(down_frac, peak_lr, low)
        return jnp.where(t < warmup, up, down)

    return schedule


def wsd_schedule(
    peak_lr, total_steps: int, warmup_steps: int, decay_frac: float, final_frac: float = 0.0
) -> optax.Schedule:
    """Warmup-stable-decay: linear warmup 0 -> peak over ``warmup_steps``, constant ``peak_lr``,
    then a linear decay to ``final_frac * peak_lr`` over the last ``decay_frac * total_steps``
    steps (reached at ``t = total_steps`` and held afterwards)."""
    check_learning_rate("peak_lr", peak_lr)
    _check_steps(total_steps, warmup_steps)
    _check_frac("decay_frac", decay_frac)
    _check_frac("final_frac", final_frac)
    decay_steps = float(decay_frac) * total_steps
    if warmup_steps + decay_steps > total_steps:
        raise ValueError(
            f"warmup_steps={warmup_steps} + decay_frac*total_steps={decay_steps:g} exceed "
            f"total_steps={total_steps}"
        )
    decay_start = total_steps - decay_steps

    def schedule(step):
        t = jnp.asarray(step, jnp.float32)
        warm = jnp.clip(t / max(warmup_steps, 1e-12), 0.0, 1.0) if warmup_steps else 1.0
        frac = jnp.clip((t - decay_start) / max(decay_steps, 1e-12), 0.0, 1.0)
        decay = 1.0 - (1.0 - final_frac) * frac
        return peak_lr * warm * decay

    return schedule


def cosine_schedule(
    peak_lr, total_steps: int, warmup_steps: int, final_frac: float = 0.0
) -> optax.Schedule:
    """Linear warmup 0 -> ``peak_lr`` over ``warmup_steps``, then a half cosine down to
    ``final_frac * peak_lr`` at ``t = total_steps`` (held afterwards)."""
    check_learning_rate("peak_lr", peak_lr)
    _check_steps(total_steps, warmup_steps)
    _check_frac("final_frac", final_frac)

    def schedule(step):
        t = jnp.asarray(step, jnp.float32)
        warm = peak_lr * jnp.clip(t / max(warmup_steps, 1e-12), 0.0, 1.0)
        frac = jnp.clip((t - warmup_steps) / max(total_steps - warmup_steps, 1e-12), 0.0, 1.0)
        down = _cosine_ramp(frac, peak_lr, final_frac * peak_lr)
        return jnp.where(t < warmup_steps, warm, down)

    return schedule
