"""Muon: momentum orthogonalised by Newton-Schulz, with AdamW for the non-matrix parameters.

Update for a hidden weight matrix ``W`` (shape ``(fan_in, fan_out)``, i.e. ``y = x W``) with
gradient ``G`` at step ``t`` (the same recursion as ``optax.contrib.muon``):

    M_t = beta M_{t-1} + (1 - beta) G_t
    D_t = beta M_t / (1 - beta^(t+1)) + (1 - beta) G_t / (1 - beta^t)   (nesterov)
    D_t = M_t / (1 - beta^t)                                              (otherwise)
    W  <- W - lr * (scale(W) * msign(D_t) + wd * W)

``msign`` is :func:`geomopt.optim.orthogonalize`. ``scale`` is the shape scaling:
``"none"`` -> 1, ``"fan_ratio"`` -> sqrt(max(1, fan_out / fan_in)) (Jordan's Muon; optax's
default), ``"rms"`` -> ``rms_coeff * sqrt(max(fan_in, fan_out))`` (consistent RMS, Liu et al.
2025; optax's ``consistent_rms``). As in optax's ``MuonDimensionNumbers`` default, for a leaf of
shape ``(..., m, n)`` ``fan_in = m`` (second-to-last axis, the reduction axis of ``x @ W``) and
``fan_out = n`` (last axis); leading axes are a stack of independent matrices.

What this adds over ``optax.contrib.muon``: all Muon leaves whose matrices have the same shape up
to a transpose (GPT-2's 768x3072 and 3072x768 MLP matrices included) are stacked and
orthogonalised by ONE batched call, and by default (``method="auto"``) wide/tall matrices in
float32 use the Gram form of the same Newton-Schulz polynomial, which needs about 0.55x the
flops for a 768 x 3072 matrix (see :func:`orthogonalize`; in bfloat16 the Gram form restarts
every 3 steps).
With ``method="newton_schulz"`` the arithmetic is the same as optax's, only batched.
Non-Muon leaves (labels ``"adam"``) get ``optax.adamw`` with optax's muon defaults
(b1 0.9, b2 0.999, eps 1e-8, Nesterov as Muon's).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from geomopt.optim._cautious import add_cautious_decayed_weights
from geomopt.optim._normuon import scale_by_normuon
from geomopt.optim._orthogonalize import (
    METHODS,
    PRECONDITIONINGS,
    Coeffs,
    ns_coefficients,
    orthogonalize,
)
from geomopt.optim._sharded import sharded_orth
from geomopt.optim._validate import check_learning_rate, check_momentum, check_nonnegative

SHAPE_SCALINGS = ("none", "fan_ratio", "rms")
LABELS = ("muon", "adam")


class MuonState(NamedTuple):
    """Step count and momentum of the Muon leaves."""

    count: jax.Array
    mu: optax.Updates


def default_labels(params) -> Any:
    """2-D leaves -> ``"muon"``, everything else (biases, gains, ...) -> ``"adam"``.

    Embeddings and output heads are 2-D too: route them to Adam with a ``label_fn`` that looks
    at their path (see :func:`labels_by_path`).
    """
    return jax.tree.map(lambda p: "muon" if jnp.ndim(p) == 2 else "adam", params)


def labels_by_path(adam_if: Callable[[str], bool]) -> Callable[[Any], Any]:
    """A ``label_fn``: 2-D leaves whose key path (``jax.tree_util.keystr``) does not satisfy
    ``adam_if`` go to Muon, all other leaves to Adam.

    Example: ``labels_by_path(lambda path: "embed" in path or "head" in path)``.
    """

    def label_fn(params):
        def label(path, p):
            hidden = jnp.ndim(p) == 2 and not adam_if(jax.tree_util.keystr(path))
            return "muon" if hidden else "adam"

        return jax.tree_util.tree_map_with_path(label, params)

    return label_fn


def _shape_scale(shape, shape_scaling: str, rms_coeff: float) -> float:
    fan_in, fan_out = shape[-2], shape[-1]
    if shape_scaling == "none":
        return 1.0
    if shape_scaling == "fan_ratio":
        return max(1.0, fan_out / fan_in) ** 0.5
    return rms_coeff * max(fan_in, fan_out) ** 0.5


def blocks_by_path(match: str | Callable[[str], bool], n_blocks: int) -> Callable[[Any], Any]:
    """A ``blocks`` function for :func:`muon`: leaves whose key path (``jax.tree_util.keystr``)
    contains ``match`` (or satisfies it, if a callable) are orthogonalised as ``n_blocks``
    equal column blocks (the last axis split), the rest whole.

    GPT-2's fused attention input weight ``qkv`` (``d x 3d``, columns ``[q | k | v]``, each
    ``n_head`` heads of ``d / n_head``): ``blocks_by_path("qkv", 3)`` orthogonalises Q, K and V
    separately, ``blocks_by_path("qkv", 3 * n_head)`` every head of each.
    """
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 1:
        raise ValueError(f"n_blocks={n_blocks!r}: expected an integer >= 1")
    hit = match if callable(match) else (lambda path: match in path)

    def blocks(tree):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: n_blocks if hit(jax.tree_util.keystr(path)) else 1, tree
        )

    return blocks


def _split_columns(leaf, k: int):
    """``(..., m, n) -> (..., k, m, n / k)``: the ``k`` column blocks as a batch axis."""
    m, n = leaf.shape[-2:]
    if n % k:
        raise ValueError(f"muon leaf of shape {leaf.shape}: {n} columns do not split into {k} "
                         "equal blocks")  # fmt: skip
    x = leaf.reshape(leaf.shape[:-1] + (k, n // k))
    return jnp.moveaxis(x, -2, -3)


def _join_columns(x, shape):
    return jnp.moveaxis(x, -3, -2).reshape(shape)


def orthogonalize_grouped(
    updates, shape_scaling: str = "none", rms_coeff: float = 0.2, adaptive: bool = False,
    blocks: Any = None, orth: Any = None, **orth_kwargs,
) -> Any:  # fmt: skip
    """``scale * msign`` of every leaf of ``updates``, one batched :func:`orthogonalize` call
    per matrix shape (``(m, n)`` and ``(n, m)`` share a call: the tall ones are transposed).
    With ``adaptive`` each leaf's ``msign(G)`` is multiplied by ``<G, msign(G)>`` (summed over
    the whole leaf), the dual norm of ``G`` for the spectral norm (``optax.contrib.muon``'s
    ``adaptive``; Bernstein & Newhouse 2024), before the shape scale. ``blocks``: a pytree like
    ``updates`` of block counts (:func:`blocks_by_path`); a leaf with ``k > 1`` is split into
    ``k`` equal column blocks, each orthogonalised (and shape-scaled) as its own matrix.
    ``orth`` replaces :func:`orthogonalize` for the stacks (e.g. spread over devices:
    :func:`geomopt.optim.orthogonalize_sharded`).

    Leaves must have ndim >= 2 (leading axes are batch axes). Non-array leaves such as optax's
    ``MaskedNode`` are empty subtrees and are skipped.
    """
    leaves, treedef = jax.tree.flatten(updates)
    counts = [1] * len(leaves) if blocks is None else treedef.flatten_up_to(blocks)
    views = []
    for leaf, k in zip(leaves, counts, strict=True):
        if leaf.ndim < 2:
            raise ValueError(
                f"muon leaf of shape {leaf.shape}: expected a matrix (ndim >= 2); route it "
                "to 'adam' with label_fn"
            )
        views.append(leaf if int(k) == 1 else _split_columns(leaf, int(k)))
    groups: dict[tuple, list[int]] = {}
    for i, view in enumerate(views):
        m, n = view.shape[-2:]
        groups.setdefault((min(m, n), max(m, n), view.dtype), []).append(i)
    out = list(leaves)
    for idx in groups.values():
        wide = []
        for i in idx:
            view = views[i]
            x = view.reshape((-1,) + view.shape[-2:])
            wide.append(jnp.swapaxes(x, -1, -2) if view.shape[-2] > view.shape[-1] else x)
        sizes = [w.shape[0] for w in wide]
        stacked = wide[0] if len(wide) == 1 else jnp.concatenate(wide, axis=0)
        ortho = (orthogonalize if orth is None else orth)(stacked, **orth_kwargs)
        start = 0
        for i, size in zip(idx, sizes, strict=True):
            view = views[i]
            piece = ortho[start : start + size]
            start += size
            if view.shape[-2] > view.shape[-1]:
                piece = jnp.swapaxes(piece, -1, -2)
            piece = piece.reshape(view.shape)
            split = view.shape != leaves[i].shape
            if adaptive:  # a split leaf: each block by its own dual norm
                axes = (-2, -1) if split else None
                piece = jnp.sum(view * piece, axis=axes, keepdims=split) * piece
            if split:
                piece = _join_columns(piece, leaves[i].shape)
            scale = _shape_scale(view.shape, shape_scaling, rms_coeff)
            out[i] = (piece * scale).astype(leaves[i].dtype)
    return jax.tree.unflatten(treedef, out)


def scale_by_muon(
    momentum: float = 0.95,
    nesterov: bool = True,
    ns_steps: int = 5,
    coeffs: Coeffs = "quintic",
    method: str = "auto",
    shape_scaling: str = "fan_ratio",
    rms_coeff: float = 0.2,
    eps: float = 1e-8,
    compute_dtype=None,
    preconditioning: str = "frobenius",
    adaptive: bool = False,
    blocks: Callable[[Any], Any] | None = None,
    mesh: Any = None,
    mesh_axis: str = "data",
) -> optax.GradientTransformation:
    """Momentum, (Nesterov) bias-corrected direction, batched msign and shape scaling
    (module doc); every leaf it sees must be a matrix or a stack of matrices.
    ``preconditioning``, ``adaptive`` and ``blocks`` (a function of the updates, e.g.
    :func:`blocks_by_path`): :func:`orthogonalize`, :func:`orthogonalize_grouped`. With a
    ``mesh`` each matrix is orthogonalised on one device of ``mesh_axis`` and the results
    shared (:mod:`geomopt.optim._sharded`)."""
    check_momentum("momentum", momentum)
    if preconditioning not in PRECONDITIONINGS:
        raise ValueError(
            f"preconditioning={preconditioning!r}: expected one of {PRECONDITIONINGS}"
        )
    if not isinstance(adaptive, bool):
        raise ValueError(f"adaptive={adaptive!r}: expected True or False")
    if method not in METHODS:
        raise ValueError(f"method={method!r}: expected one of {METHODS}")
    if shape_scaling not in SHAPE_SCALINGS:
        raise ValueError(f"shape_scaling={shape_scaling!r}: expected one of {SHAPE_SCALINGS}")
    if method != "svd":
        ns_coefficients(coeffs, ns_steps)  # validate eagerly
    beta = momentum

    def init_fn(params):
        return MuonState(count=jnp.zeros([], jnp.int32), mu=optax.tree.zeros_like(params))

    def update_fn(updates, state, params=None):
        del params
        count = optax.safe_increment(state.count)
        mu = jax.tree.map(lambda m, g: beta * m + (1.0 - beta) * g, state.mu, updates)
        t = count.astype(jnp.float32)
        if nesterov:
            c_mu = beta / (1.0 - beta ** (t + 1.0))
            c_g = (1.0 - beta) / (1.0 - beta**t)
            direction = jax.tree.map(lambda m, g: (c_mu * m + c_g * g).astype(m.dtype), mu, updates)
        else:
            c_mu = 1.0 / (1.0 - beta**t)
            direction = jax.tree.map(lambda m: (c_mu * m).astype(m.dtype), mu)
        out = orthogonalize_grouped(
            direction,
            shape_scaling=shape_scaling,
            rms_coeff=rms_coeff,
            method=method,
            steps=ns_steps,
            coeffs=coeffs,
            dtype=compute_dtype,
            eps=eps,
            preconditioning=preconditioning,
            adaptive=adaptive,
            blocks=None if blocks is None else blocks(direction),
            orth=None if mesh is None else sharded_orth(mesh, mesh_axis),
        )
        return out, MuonState(count=count, mu=mu)

    return optax.GradientTransformation(init_fn, update_fn)


def _check_options(
    learning_rate, weight_decay, normuon, cautious_weight_decay, adam_weight_decay, adam_b1,
    adam_b2, adam_learning_rate,
) -> optax.ScalarOrSchedule:  # fmt: skip
    """Check :func:`muon`'s own options (:func:`scale_by_muon` checks the rest) and return the
    Adam learning rate (Muon's unless ``adam_learning_rate`` is given)."""
    check_learning_rate("learning_rate", learning_rate)
    check_nonnegative("weight_decay", weight_decay)
    if not isinstance(normuon, bool):
        raise ValueError(f"normuon={normuon!r}: expected True or False")
    if not isinstance(cautious_weight_decay, bool):
        raise ValueError(f"cautious_weight_decay={cautious_weight_decay!r}: expected True or False")
    check_nonnegative("adam_weight_decay", adam_weight_decay)
    check_momentum("adam_b1", adam_b1)
    check_momentum("adam_b2", adam_b2)
    if adam_learning_rate is None:
        adam_learning_rate = learning_rate
    check_learning_rate("adam_learning_rate", adam_learning_rate)
    return adam_learning_rate


def _checked_labels(label_fn: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """``label_fn`` (default :func:`default_labels`), raising on a label not in ``LABELS``."""
    labels = default_labels if label_fn is None else label_fn

    def checked_labels(params):
        tree = labels(params)
        for lab in jax.tree.leaves(tree):
            if lab not in LABELS:
                raise ValueError(f"label_fn returned label {lab!r}: expected one of {LABELS}")
        return tree

    return checked_labels


def _muon_chain(
    orth: optax.GradientTransformation, learning_rate, weight_decay, weight_decay_mask,
    cautious_weight_decay: bool, normuon: bool, normuon_beta2, neuron_axis,
) -> optax.GradientTransformation:  # fmt: skip
    """The Muon leaves' transformation: ``orth`` (:func:`scale_by_muon`), NorMuon's
    normalisation if ``normuon``, weight decay (cautious or plain), the learning rate."""
    decay = add_cautious_decayed_weights if cautious_weight_decay else optax.add_decayed_weights
    steps = [
        orth,
        decay(weight_decay, weight_decay_mask),
        optax.scale_by_learning_rate(learning_rate),
    ]
    if normuon:  # only then: the state of plain Muon (and its checkpoints) stays as it was
        steps.insert(1, scale_by_normuon(normuon_beta2, neuron_axis=neuron_axis))
    return optax.chain(*steps)


def muon(
    learning_rate: optax.ScalarOrSchedule = 0.02,
    momentum: float = 0.95, nesterov: bool = True,
    ns_steps: int = 5, coeffs: Coeffs = "quintic", method: str = "auto",
    shape_scaling: str = "fan_ratio", rms_coeff: float = 0.2,
    weight_decay: float = 0.0, weight_decay_mask: Any = None,
    eps: float = 1e-8,
    adam_learning_rate: optax.ScalarOrSchedule | None = None,
    adam_b1: float = 0.9, adam_b2: float = 0.999, adam_eps_root: float = 0.0,
    adam_weight_decay: float = 0.0,
    label_fn: Callable[[Any], Any] | None = None,
    compute_dtype=None,
    preconditioning: str = "frobenius",
    adaptive: bool = False,
    cautious_weight_decay: bool = False,
    blocks: Callable[[Any], Any] | None = None,
    normuon: bool = False, normuon_beta2: float = 0.95, neuron_axis: int = -1,
    mesh: Any = None, mesh_axis: str = "data",
) -> optax.GradientTransformation:  # fmt: skip
    """Muon for hidden matrices, AdamW for the rest (module doc for the update).

    Defaults follow ``optax.contrib.muon`` where the two overlap (quintic Newton-Schulz, 5 steps,
    momentum 0.95, Nesterov, eps 1e-8, ``fan_ratio`` scaling, Adam with the Muon learning rate
    unless ``adam_learning_rate`` is given), so ``muon(lr)`` and ``optax.contrib.muon(lr)``
    compute the same update (to float32 rounding, ~1e-6, since ``method="auto"`` evaluates the
    same polynomial in Gram form on non-square matrices).

    Args:
        learning_rate: Muon learning rate (float, schedule or traced array).
        momentum, nesterov: momentum coefficient and Nesterov direction.
        ns_steps, coeffs, method, compute_dtype: passed to :func:`orthogonalize`.
        shape_scaling: ``"none"``, ``"fan_ratio"`` or ``"rms"`` (``rms_coeff`` factor).
        weight_decay, weight_decay_mask: decoupled decay ``W -= lr * wd * W`` on Muon leaves
            (mask as in ``optax.add_decayed_weights``, over the Muon subtree).
        eps: Frobenius-normalisation epsilon and Adam's epsilon.
        adam_learning_rate, adam_b1, adam_b2, adam_eps_root, adam_weight_decay: AdamW for the
            leaves labelled ``"adam"``.
        label_fn: ``params -> pytree of "muon" | "adam"``; default :func:`default_labels`.
        preconditioning: the scaling before Newton-Schulz, ``"frobenius"`` (default),
            ``"spectral"``, ``"aol"`` or ``"schatten"``, as ``optax.contrib.muon``'s.
        adaptive: scale each update by the dual norm ``<G, msign(G)>`` of its direction, as
            ``optax.contrib.muon``'s ``adaptive``.
        cautious_weight_decay: decay a Muon weight only where the update moves it towards
            zero (:func:`geomopt.optim.add_cautious_decayed_weights`; modded-nanogpt's).
        blocks: ``params -> pytree of block counts`` (:func:`blocks_by_path`): orthogonalise a
            fused weight as separate column blocks, e.g. GPT-2's ``qkv`` as Q, K and V or per
            head.
        normuon, normuon_beta2, neuron_axis: NorMuon's neuron-wise normalisation of the
            orthogonalised update (:func:`geomopt.optim.scale_by_normuon`).
        mesh, mesh_axis: orthogonalise each matrix once, on one device of this mesh axis, and
            share the results (:func:`geomopt.optim.orthogonalize_sharded`), instead of every
            device orthogonalising every matrix.
    """
    adam_learning_rate = _check_options(
        learning_rate, weight_decay, normuon, cautious_weight_decay, adam_weight_decay, adam_b1,
        adam_b2, adam_learning_rate,
    )  # fmt: skip
    orth = scale_by_muon(
        momentum=momentum, nesterov=nesterov, ns_steps=ns_steps, coeffs=coeffs, method=method,
        shape_scaling=shape_scaling, rms_coeff=rms_coeff, eps=eps, compute_dtype=compute_dtype,
        preconditioning=preconditioning, adaptive=adaptive, blocks=blocks, mesh=mesh,
        mesh_axis=mesh_axis,
    )  # fmt: skip
    muon_part = _muon_chain(
        orth, learning_rate, weight_decay, weight_decay_mask, cautious_weight_decay, normuon,
        normuon_beta2, neuron_axis,
    )  # fmt: skip
    adam_part = optax.adamw(
        learning_rate=adam_learning_rate, b1=adam_b1, b2=adam_b2, eps=eps, eps_root=adam_eps_root,
        weight_decay=adam_weight_decay, nesterov=nesterov,
    )  # fmt: skip
    return optax.partition({"muon": muon_part, "adam": adam_part}, _checked_labels(label_fn))
