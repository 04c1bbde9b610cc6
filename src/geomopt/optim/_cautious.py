"""Cautious weight decay: decoupled weight decay applied only where it agrees with the update.

Chen et al. 2025 (arXiv 2510.12402), as the modded-nanogpt GPT-2 records use it with Muon: with
``u`` the optimiser's update direction (the step is ``W <- W - lr u``),

    W <- W - lr (u + wd * 1[u * W >= 0] * W)   (elementwise),

so a weight is pulled towards zero only where the update already moves it that way; where the
update pushes a weight away from zero the decay leaves it alone. In an optax chain the
direction ``u`` is the incoming update before ``scale_by_learning_rate``, exactly where
``optax.add_decayed_weights`` sits; this transformation takes its place.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from geomopt.optim._validate import check_nonnegative

__all__ = ["add_cautious_decayed_weights"]


def add_cautious_decayed_weights(weight_decay: float = 0.0, mask: Any = None):
    """``u + wd * 1[u * W >= 0] * W`` for every leaf (``mask`` as in
    ``optax.add_decayed_weights``: a pytree of booleans or a callable of the params; leaves
    masked out keep ``u``). Needs ``params`` in ``update``."""
    check_nonnegative("weight_decay", weight_decay)

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("add_cautious_decayed_weights needs params in update(...)")

        def decay(u, w):
            agree = (u * w >= 0).astype(u.dtype)
            return u + weight_decay * agree * w.astype(u.dtype)

        return jax.tree.map(decay, updates, params), state

    inner = optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)
    if mask is not None:
        return optax.masked(inner, mask)
    return inner
