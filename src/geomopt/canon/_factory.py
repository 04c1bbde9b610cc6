"""The model factory of the point-cloud experiments: :func:`make_model` builds any kind of
:data:`MODEL_KINDS` (MLPs, group average, DeepSets, transformers, rotation classifiers),
:func:`training_model` the network that consumes :func:`prepare_inputs` (the inputs put in
canonical order once per data set), and :func:`trainable_filter` what training updates."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from geomopt.canon._layers import FourierMap, model_order
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig
from geomopt.canon._models import CanonMLP, DeepSets, PermutationSampleAverage
from geomopt.canon._orders import normalize_cloud
from geomopt.canon._rotations import RotationClassifier, canonize_rotation
from geomopt.canon._transformer import SerializedTransformer, serializations

__all__ = ["make_model", "prepare_inputs", "trainable_filter", "training_model"]

def make_model(
    kind: str, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key
) -> eqx.Module:
    """Build model ``kind`` (one of :data:`MODEL_KINDS`) for clouds ``(n_points, d)``."""
    if kind in ("lex", "hilbert", "morton"):
        return CanonMLP(n_points, d, n_classes, cfg, order=kind, key=key)
    if kind == "unsorted":
        return CanonMLP(n_points, d, n_classes, cfg, order="identity", key=key)
    if kind == "perm_sample_avg":
        return PermutationSampleAverage(n_points, d, n_classes, cfg, key=key)
    if kind == "deepsets":
        return DeepSets(n_points, d, n_classes, cfg, key=key)
    if kind.startswith("transformer_") and kind in MODEL_KINDS:
        return SerializedTransformer(
            n_points, d, n_classes, cfg, serialization=kind.removeprefix("transformer_"), key=key
        )
    if kind.startswith("rot_") and kind in MODEL_KINDS:
        return RotationClassifier(
            n_points, d, n_classes, cfg, canon=kind.removeprefix("rot_"), key=key
        )
    raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")


def training_model(kind: str, n_points: int, d: int, n_classes: int, cfg, *, key) -> eqx.Module:
    """The model whose ``apply`` consumes :func:`prepare_inputs` (``kind``'s architecture; the
    canonized MLPs are built with the identity order since their inputs come pre-sorted, so that
    all four share one compiled training step; likewise the PCA / skewness rotation models and
    the four transformer serializations)."""
    if kind in ("lex", "hilbert", "morton"):
        return CanonMLP(n_points, d, n_classes, cfg, order="identity", key=key)
    if kind in ("rot_pca", "rot_skew"):  # inputs come canonized: same network as rot_none
        return make_model("rot_none", n_points, d, n_classes, cfg, key=key)
    if kind.startswith("transformer_"):  # serializations come with the inputs: one network
        return make_model("transformer_lex", n_points, d, n_classes, cfg, key=key)
    return make_model(kind, n_points, d, n_classes, cfg, key=key)


@jax.jit
def _normalize_all(x):
    return normalize_cloud(x, "per_axis")


def prepare_inputs(kind: str, x, cfg: ModelConfig, *, seed: int = 0, chunk: int = 4096):
    """What ``training_model(kind).apply`` takes, for every cloud of ``x`` ``(N, P, d)``: the
    normalised cloud in ``kind``'s canonical order (MLPs), the normalised cloud (group average,
    DeepSets), or the normalised cloud and its two serializations (transformers)."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")
    x = jnp.asarray(x, jnp.float32)
    if x.ndim != 3:
        raise ValueError(f"clouds of shape {x.shape}: expected (N, P, d)")
    if not bool(jnp.isfinite(x).all()):
        raise ValueError("clouds contain non-finite coordinates")
    if kind.startswith("rot_"):
        # lax.map, not vmap: under jit(vmap) skew_frame gave a different third axis than one
        # cloud at a time (seen on CPU, jax 0.10.2); lax.map matches the unbatched result
        f = jax.jit(
            lambda z: jax.lax.map(lambda c: canonize_rotation(kind.removeprefix("rot_"), c), z)
        )
        return jnp.concatenate([f(x[i : i + chunk]) for i in range(0, len(x), chunk)])
    xn = _normalize_all(x)
    if kind in ("lex", "hilbert", "morton", "unsorted"):
        order = "identity" if kind == "unsorted" else kind
        if order == "identity":
            return xn
        f = jax.jit(jax.vmap(lambda c: c[model_order(order, c, cfg.bits)]))
        return jnp.concatenate([f(xn[i : i + chunk]) for i in range(0, len(xn), chunk)])
    if kind.startswith("transformer_"):
        ser = kind.removeprefix("transformer_")
        perms = serializations(ser, xn, cfg.bits, seed=seed)
        return (xn, perms)
    return xn


def trainable_filter(model) -> object:
    """``eqx.partition`` filter: every inexact array except the fixed Fourier matrices."""
    return jax.tree_util.tree_map(
        lambda n: (
            jax.tree_util.tree_map(lambda _: False, n)
            if isinstance(n, FourierMap)
            else eqx.is_inexact_array(n)
        ),
        model,
        is_leaf=lambda n: isinstance(n, FourierMap),
    )
