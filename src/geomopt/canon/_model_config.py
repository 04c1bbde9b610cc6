"""Configs of the point-cloud classifiers and their training (no JAX: experiment files import
these at ``--help`` time).

The official per-order settings (``../shared/papers/canon.md``, ``configs/modelnet.json`` of
yonatansverdlov/Canonization) are in :data:`ORDER_PRESETS`.
"""

from __future__ import annotations

import dataclasses

__all__ = ["ModelConfig", "TrainConfig", "ORDER_PRESETS", "MODEL_KINDS", "model_config"]

MODEL_KINDS = (
    "lex",
    "hilbert",
    "morton",
    "unsorted",
    "perm_sample_avg",
    "deepsets",
    "transformer_lex",
    "transformer_hilbert",
    "transformer_morton",
    "transformer_random",
    "rot_none",
    "rot_pca",
    "rot_frame_avg",
    "rot_skew",
    "rot_random_frame",
)
"""Every classifier: the canonized MLPs (``lex`` / ``hilbert`` / ``morton``), the unsorted MLP
(official ``ply``), the MLP averaged over random permutations, DeepSets, and the serialized point
transformer with each serialization; ``rot_<canon>``: the rotation canonizations of
``geomopt.canon._rotations`` on the official DeepSets backbone."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture and per-order training settings of one classifier."""

    mlp_dims: tuple[int, ...] = (256, 128, 64)
    """Widths of the residual blocks of the canonized MLP (official 256 -> 128 -> 64)."""
    n_bands: int = 3
    """Fourier bands: B has shape d x (n_bands * d), 2 * n_bands * d features per point
    (official: 3 bands, 18 features in 3-D)."""
    fourier_scale: float = 0.1
    """Standard deviation of the fixed Fourier matrix B."""
    dropout: float = 0.1
    """Dropout inside the residual blocks (official: per order)."""
    point_dropout: float = 0.2
    """Probability of zeroing a whole point's features (official 0.2)."""
    input_dropout: float = 0.2
    """Dropout on the flattened input vector (official 0.2)."""
    bits: int = 12
    """Bits per axis of the Hilbert / Morton quantisation (official 12)."""
    n_perms: int = 8
    """K, random permutations averaged by `perm_sample_avg` (not invariant for K < P!)."""
    deepsets_width: int = 128
    """Width of the DeepSets per-point and head MLPs."""
    deepsets_depth: int = 2
    """Hidden layers of the DeepSets per-point MLP."""
    tf_dim: int = 64
    """Serialized transformer: feature width."""
    tf_depth: int = 2
    """Serialized transformer: attention blocks (curves alternate between blocks)."""
    tf_heads: int = 4
    """Serialized transformer: attention heads."""
    tf_window: int = 16
    """Serialized transformer: points per attention window (must divide the number of points)."""
    lr: float = 1e-3
    """Peak AdamW learning rate (cosine decay per epoch to lr * 1e-3)."""
    weight_decay: float = 0.05
    """AdamW weight decay."""
    label_smoothing: float = 0.1
    """Label smoothing of the cross-entropy."""


# Official per-order settings: dropout, fourier scale, label smoothing, lr, weight decay.
ORDER_PRESETS: dict[str, dict[str, float]] = {
    "unsorted": dict(
        dropout=0.1,
        fourier_scale=1.0,
        label_smoothing=0.1,
        lr=0.0014988353560536768,
        weight_decay=0.05,
    ),
    "lex": dict(
        dropout=0.1,
        fourier_scale=0.1,
        label_smoothing=0.2,
        lr=0.0006407203395820919,
        weight_decay=0.05,
    ),
    "hilbert": dict(
        dropout=0.3,
        fourier_scale=0.1,
        label_smoothing=0.2,
        lr=0.0009614328324244756,
        weight_decay=0.01,
    ),
}
# Not in the official experiment: these reuse the closest official setting (stated in the README).
ORDER_PRESETS["morton"] = ORDER_PRESETS["hilbert"]
ORDER_PRESETS["perm_sample_avg"] = ORDER_PRESETS["unsorted"]
ORDER_PRESETS["deepsets"] = ORDER_PRESETS["unsorted"]
for _s in ("lex", "hilbert", "morton"):
    ORDER_PRESETS[f"transformer_{_s}"] = ORDER_PRESETS[_s]
ORDER_PRESETS["transformer_random"] = ORDER_PRESETS["unsorted"]
# Rotation experiment (official configs/PCA.json: lr and weight decay per model; the official
# batch sizes 32 / 64 / 32 / 128 are not per model here). Head dropout 0.5, no label smoothing
# (the official models return log-probabilities trained with the NLL loss).
_ROT = dict(dropout=0.5, label_smoothing=0.0, point_dropout=0.0, input_dropout=0.0)
ORDER_PRESETS["rot_pca"] = dict(_ROT, lr=0.001118604121563404, weight_decay=0.000012114201421212455)
ORDER_PRESETS["rot_frame_avg"] = dict(
    _ROT, lr=0.0038344263314129216, weight_decay=0.00044667107132415485
)
ORDER_PRESETS["rot_skew"] = dict(_ROT, lr=0.002379819526548229, weight_decay=0.00018254150092374713)
ORDER_PRESETS["rot_random_frame"] = dict(
    _ROT, lr=0.0004116019180557964, weight_decay=0.0002776919628599624
)
ORDER_PRESETS["rot_none"] = ORDER_PRESETS["rot_pca"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The official recipe: AdamW, cosine per epoch to lr * 1e-3, shuffled batches, drop-last."""

    epochs: int = 100
    """Epochs (official 100)."""
    batch: int = 256
    """Batch size (official 256; the last incomplete batch of an epoch is dropped)."""
    use_order_presets: bool = True
    """Take dropout / Fourier scale / label smoothing / lr / weight decay from the official
    per-order settings (`geomopt.canon.ORDER_PRESETS`) instead of `model`."""
    model: ModelConfig = ModelConfig()
    """Architecture (and the hyperparameters when `use_order_presets` is False)."""
    equal_steps: bool = False
    """Train every fraction 1/stride for as many optimizer steps as the full training set
    (each epoch passes over the 1/stride subset `stride` times, reshuffled each pass), so that
    scarce fractions are trained to the same degree. False: the official recipe, the same number
    of epochs (1/stride of the steps) at every fraction."""
    fast_compile: bool = False
    """Compile the training and prediction loops with XLA's LLVM optimisations off: about half
    the compile time, slower steps (for smoke runs, where compiling dominates)."""


def model_config(kind: str, train: TrainConfig) -> ModelConfig:
    """``train.model`` with the per-order settings of ``kind`` when ``use_order_presets``."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")
    if not train.use_order_presets:
        return train.model
    return dataclasses.replace(train.model, **ORDER_PRESETS[kind])
