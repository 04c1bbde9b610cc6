"""SignSGD, Signum and the paper's momentum SGD, as optax GradientTransformations.

The update rules come from optax (``scale_by_sign``, ``ema``, ``trace``); what is added here is
what the paper's GPT-2 recipe needs: weight decay restricted to a mask (Linear weights only),
decoupled for the sign methods and coupled (L2) for SGD, plus argument checks.
"""

from collections.abc import Callable
from typing import Any

import optax

from geomopt.optim._validate import (
    check_learning_rate,
    check_momentum,
    check_nonnegative,
    is_zero,
)

Mask = Any | Callable[[optax.Params], Any] | None


def _decoupled_decay(weight_decay, mask: Mask) -> list[optax.GradientTransformation]:
    """``u <- u + wd * p`` on masked leaves, placed before the learning-rate scaling, so that the
    step is ``p <- p - lr * (u + wd * p)``: decoupled decay ``p *= 1 - lr * wd``."""
    if is_zero(weight_decay):
        return []
    return [optax.add_decayed_weights(weight_decay, mask)]


def sign_sgd(
    learning_rate: optax.ScalarOrSchedule = 1e-3,
    weight_decay: float = 0.0,
    mask: Mask = None,
) -> optax.GradientTransformation:
    """SignSGD: ``p <- p - lr * (sign(g) + wd * p)`` (decay only where ``mask`` is True).

    ``sign(0) = 0``. With ``weight_decay=0`` this is exactly ``optax.sign_sgd(learning_rate)``.
    ``mask`` is a pytree of bools (or a prefix) or a callable ``params -> mask``, as in
    ``optax.add_decayed_weights``; None decays every leaf. ``learning_rate`` may be a float, a
    schedule or a (traced) array.
    """
    check_learning_rate("learning_rate", learning_rate)
    check_nonnegative("weight_decay", weight_decay)
    if is_zero(weight_decay):
        return optax.sign_sgd(learning_rate)
    return optax.chain(
        optax.scale_by_sign(),
        *_decoupled_decay(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )


def signum(
    learning_rate: optax.ScalarOrSchedule = 1e-3,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    mask: Mask = None,
) -> optax.GradientTransformation:
    """Signum: ``m <- beta m + (1 - beta) g``, ``p <- p - lr * (sign(m) + wd * p)``.

    With ``weight_decay=0`` this is exactly ``optax.signum(learning_rate, momentum)``.
    """
    check_learning_rate("learning_rate", learning_rate)
    check_momentum("momentum", momentum)
    check_nonnegative("weight_decay", weight_decay)
    if is_zero(weight_decay):
        return optax.signum(learning_rate, momentum)
    return optax.chain(
        optax.ema(momentum, debias=False),
        optax.scale_by_sign(),
        *_decoupled_decay(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )


def sgd(
    learning_rate: optax.ScalarOrSchedule = 1e-2,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    mask: Mask = None,
    nesterov: bool = False,
) -> optax.GradientTransformation:
    """The paper's "SGD": heavy-ball momentum with COUPLED L2 weight decay (PyTorch's SGD).

    ``g <- g + wd * p`` (masked leaves), ``m <- momentum * m + g``, ``p <- p - lr * m``
    (Nesterov: ``p <- p - lr * (g + momentum * m)``). Unlike the sign methods the decay enters
    the gradient, so it is accumulated by the momentum.
    """
    check_learning_rate("learning_rate", learning_rate)
    check_momentum("momentum", momentum)
    check_nonnegative("weight_decay", weight_decay)
    parts = []
    if not is_zero(weight_decay):
        parts.append(optax.add_decayed_weights(weight_decay, mask))
    if not is_zero(momentum):
        parts.append(optax.trace(decay=momentum, nesterov=nesterov))
    parts.append(optax.scale_by_learning_rate(learning_rate))
    return optax.chain(*parts)
