"""The jitted functions of a pretraining run (loss, train step, evaluation, gradient-noise
samples), cached across the runs of a sweep that share shapes and optimiser."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from geomopt.lm._config import GPT2Config, OptimConfig
from geomopt.lm._model import GPT2
from geomopt.lm._noise import welford_variance
from geomopt.lm._optimizer import build_optimizer, lr_schedule, uses_qk_clip

__all__ = ["StepKey", "model_fns", "optim_fns"]


def _loss_and_accuracy(graphdef, params, tokens_BxT1, key):
    """Mean next-token cross-entropy and accuracy (``GPT2.loss``: chunked output head)."""
    return nnx.merge(graphdef, params).loss(tokens_BxT1, key=key)


def _loss(graphdef, params, tokens, key):
    return _loss_and_accuracy(graphdef, params, tokens, key)[0]


def _loss_and_logit_max(graphdef, params, tokens, key):
    """The loss, with the largest attention logit of every layer and head as aux (QK-clip)."""
    loss, _, s_LxN = nnx.merge(graphdef, params).loss(tokens, key=key, logit_max=True)
    return loss, s_LxN


@dataclasses.dataclass(frozen=True)
class StepKey:
    """What a compiled train step depends on (the cache key of :func:`optim_fns`)."""

    graphdef: Any
    optim: OptimConfig
    total_steps: int
    dropout: bool
    mesh: Any
    n_layer_head: tuple[int, int] = (0, 0)
    """``(n_layer, n_head)`` of the model (the shape of the attention logits QK-clip reads)."""


@functools.lru_cache(maxsize=8)
def model_fns(config: GPT2Config, graphdef, param_sh_leaves, param_treedef):
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
def optim_fns(k: StepKey, param_sh_leaves, param_treedef, opt_sh_leaves, opt_treedef):
    """Jitted optimiser init and train step. The optimiser is built once, as a function of the
    traced peak learning rate, and serves both; the cache key holds the optimiser config with
    ``lr=0``, so runs that differ only in the learning rate or the seed share one compilation."""
    graphdef, ocfg = k.graphdef, k.optim
    param_sh = jax.tree.unflatten(param_treedef, param_sh_leaves)
    opt_sh = jax.tree.unflatten(opt_treedef, opt_sh_leaves)
    rep = NamedSharding(k.mesh, P())
    clips = uses_qk_clip(ocfg)
    if clips:
        grad_fn = jax.value_and_grad(functools.partial(_loss_and_logit_max, graphdef), has_aux=True)
    else:
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
            logit_max = carry[2]
            if clips:  # the largest logit over the micro-batches
                loss, s_LxN = loss
                logit_max = jnp.maximum(logit_max, s_LxN)
            return (carry[0] + loss, jax.tree.map(jnp.add, carry[1], g), logit_max), None

        zeros = jax.tree.map(jnp.zeros_like, params)
        n_layer, n_head = k.n_layer_head
        start = (jnp.float32(0.0), zeros, jnp.full((n_layer, n_head), -jnp.inf, jnp.float32))
        (loss_sum, g_sum, s_LxN), _ = jax.lax.scan(
            micro, start, (batch_AxBxT1, jnp.arange(n_acc))
        )
        grads = jax.tree.map(lambda g: g / n_acc, g_sum)
        extra = {"attn_logit_max": s_LxN} if clips else {}
        updates, opt_state = tx_of(lr).update(grads, opt_state, params, **extra)
        params = optax.apply_updates(params, updates)
        metrics = {
            "loss": loss_sum / n_acc,
            "grad_norm": optax.tree.norm(grads),
            "lr": sched_of(lr)(step),
        }
        if clips:
            metrics["attn_logit_max"] = jnp.max(s_LxN)
        return params, opt_state, metrics

    metric_names = ("loss", "grad_norm", "lr") + (("attn_logit_max",) if clips else ())
    opt_init = jax.jit(lambda params, lr: tx_of(lr).init(params), out_shardings=opt_sh)
    step_jit = jax.jit(
        train_step,
        donate_argnums=(0, 1),
        out_shardings=(param_sh, opt_sh, dict.fromkeys(metric_names, rep)),
    )
    return opt_init, step_jit
