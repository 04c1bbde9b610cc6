"""QK-clip, the clipping half of MuonClip (Kimi K2, arXiv 2507.20534, section 2.1).

Muon at scale lets attention logits grow without bound. After every optimiser step QK-clip
rescales, head by head, the query and key weights of the heads whose largest attention logit in
the step's batch passed a threshold ``tau``:

    S_h   = max over the batch and the causal pairs (i, j) of  q_i^h . k_j^h / sqrt(head_dim)
    gamma = min(1, tau / S_h)
    W_q^h <- sqrt(gamma) W_q^h,   W_k^h <- sqrt(gamma) W_k^h

so the logit ``q . k`` of a clipped head shrinks by ``gamma`` and its largest one would be
exactly ``tau`` on the same batch; heads at or under ``tau`` are untouched. The weights scaled
are the ones after this step's update, ``W + u``; the logits are those of the forward pass
that produced the gradient (before the update), as in the paper.

Layout: the leaves whose key path contains ``match`` are fused attention input weights (a
kernel ``(..., d, 3 d)`` or a bias ``(3 d,)``) whose last axis is ``[q | k | v]``, each
``n_head`` heads of ``d / n_head`` columns (GPT-2's ``qkv``). The logits come as the extra
argument ``attn_logit_max`` of ``update``, an array ``(n_layer, n_head)``; the matched kernels,
in the order ``jax.tree`` flattens them, are the layers ``0 .. n_layer - 1`` (each layer's bias,
if any, shares its kernel's row). ``geomopt.lm`` computes it with ``GPT2.loss(...,
logit_max=True)``.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["QKClipState", "qk_clip", "muon_clip"]


class QKClipState(NamedTuple):
    """How often QK-clip acted: the head-clips summed over the steps so far, and the largest
    logit of the last step."""

    clipped_heads: jax.Array
    last_logit_max: jax.Array


def _layers_of(paths: list[str], match: str) -> list[int]:
    """The layer index of each matched leaf: kernels (and biases) numbered in flatten order,
    a bias taking the number of the kernel whose path it shares up to the last key."""
    parents: dict[str, int] = {}
    out = []
    for path in paths:
        parent = path[: path.rindex(match) + len(match)]
        out.append(parents.setdefault(parent, len(parents)))
    return out


def qk_clip(threshold: float = 100.0, match: str = "qkv") -> optax.GradientTransformationExtraArgs:
    """QK-clip at ``threshold`` (module doc); chain it after the optimiser (its updates are the
    final ones, learning rate included). ``update(updates, state, params, attn_logit_max=...)``
    needs the params and the logits; the other leaves pass through unchanged.

    Raises:
        ValueError: ``threshold`` not positive; at update, no ``attn_logit_max``, no leaf
            matching ``match``, a number of matched layers other than ``attn_logit_max``'s
            rows, or a last axis not ``3 * n_head * head_dim``.
    """
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or threshold <= 0:
        raise ValueError(f"qk_clip threshold={threshold!r}: expected a number > 0")
    tau = float(threshold)

    def init_fn(params):
        del params
        return QKClipState(jnp.zeros([], jnp.int32), jnp.zeros([], jnp.float32))

    def update_fn(updates, state, params=None, *, attn_logit_max=None, **extra):
        del extra
        if params is None or attn_logit_max is None:
            raise ValueError("qk_clip needs params and attn_logit_max=(n_layer, n_head) in update")
        s_LxN = jnp.asarray(attn_logit_max, jnp.float32)
        if s_LxN.ndim != 2:
            raise ValueError(f"attn_logit_max of shape {s_LxN.shape}: expected (n_layer, n_head)")
        n_layer, n_head = s_LxN.shape
        gamma_LxN = jnp.minimum(1.0, tau / jnp.maximum(s_LxN, 1e-30))
        flat_u, treedef = jax.tree_util.tree_flatten_with_path(updates)
        flat_p = treedef.flatten_up_to(params)
        paths = [jax.tree_util.keystr(path) for path, _ in flat_u]
        hits = [i for i, p in enumerate(paths) if match in p]
        if not hits:
            raise ValueError(f"qk_clip: no parameter path contains {match!r}")
        layers = _layers_of([paths[i] for i in hits], match)
        if max(layers) + 1 != n_layer:
            raise ValueError(
                f"qk_clip: {max(layers) + 1} layers of {match!r} weights, but attn_logit_max "
                f"has {n_layer} rows"
            )
        out = [u for _, u in flat_u]
        for i, layer in zip(hits, layers, strict=True):
            u, w = out[i], flat_p[i]
            cols = u.shape[-1]
            if cols % (3 * n_head):
                raise ValueError(f"qk_clip: {paths[i]} has {cols} columns, not 3 x {n_head} heads")
            root = jnp.sqrt(gamma_LxN[layer])  # (N,)
            head = jnp.repeat(root, cols // (3 * n_head))
            factor = jnp.concatenate([head, head, jnp.ones_like(head)]).astype(u.dtype)
            factor = factor.reshape((1,) * (u.ndim - 1) + (cols,))
            # unclipped columns keep u itself (not (w + u) - w): no clip, the same update
            out[i] = jnp.where(factor == 1, u, (w + u) * factor - w)
        clipped = jnp.sum(s_LxN > tau).astype(jnp.int32)
        state = QKClipState(state.clipped_heads + clipped, jnp.max(s_LxN))
        return jax.tree.unflatten(treedef, out), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def muon_clip(
    learning_rate: optax.ScalarOrSchedule = 0.02, qk_threshold: float = 100.0, **muon_options: Any
) -> optax.GradientTransformationExtraArgs:
    """MuonClip: :func:`geomopt.optim.muon` (``muon_options`` are its options) followed by
    :func:`qk_clip` at ``qk_threshold`` (Kimi K2 uses 100). Its ``update`` takes
    ``attn_logit_max``."""
    from geomopt.optim._muon import muon

    return optax.chain(muon(learning_rate, **muon_options), qk_clip(qk_threshold))


def _muon_clip_signature() -> inspect.Signature:
    """``muon``'s parameters and ``qk_threshold``: what ``muon_clip`` takes, so that
    :func:`geomopt.optim.make_optimizer` checks its options as it does ``muon``'s."""
    from geomopt.optim._muon import muon

    params = list(inspect.signature(muon).parameters.values())
    threshold = inspect.Parameter("qk_threshold", inspect.Parameter.KEYWORD_ONLY, default=100.0)
    first, rest = params[0], [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params[1:]]
    return inspect.Signature([first, threshold, *rest])


muon_clip.__signature__ = _muon_clip_signature()
