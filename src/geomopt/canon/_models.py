"""Point-cloud classifiers: canonized MLP, unsorted MLP, group averaging, DeepSets.

Every model acts on ONE cloud ``(P, d)`` and returns class logits ``(n_classes,)``; the caller
vmaps over clouds. Dropout is active only when a ``key`` is passed (training).

- :class:`CanonMLP` (the official canonized MLP): per-cloud normalisation to ``[0, 1]``
  (per-axis minimum, one global scale), a canonical order (``lex``, ``hilbert``, ``morton``;
  Hilbert / Morton quantise the normalised cloud with ``bits`` per axis,
  ``floor(X * (2**bits - 1))``, official ``bits = 12``), fixed random Fourier features per
  point, whole-point dropout, flatten, residual MLP. With ``order="identity"`` it is the
  non-invariant *unsorted* MLP.
  Approximation: the official residual MLP tapers 256 -> 128 -> 64 with linear skips; here the
  constant-width :class:`geomopt.nn.ResidualMLP` (pre-norm blocks, GELU) is used.
- :class:`GroupAveraged`: the unsorted MLP averaged over ``K`` random permutations of the
  points, ``f_K(X) = (1/K) sum_k f(X[pi_k])`` (a Monte-Carlo estimate of the permutation-group
  average, exactly invariant only as K covers the group). Training draws fresh permutations
  from the dropout key; evaluation uses ``K`` fixed permutations from ``perm_seed``.
- :class:`DeepSets`: a shared per-point MLP on the Fourier features, sum pooling (scaled by
  ``1/P``, i.e. the mean, to keep activations O(1)), MLP head (structurally invariant).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.canon._orders import (
    get_order,
    hilbert_order,
    lex_order,
    morton_order,
    normalize_cloud,
)
from geomopt.nn import MLP, FourierFeatures, ResidualMLP

__all__ = [
    "MODEL_KINDS",
    "ModelConfig",
    "ORDER_PRESETS",
    "CanonMLP",
    "GroupAveraged",
    "DeepSets",
    "make_model",
    "point_dropout",
]

MODEL_KINDS = ("lex", "hilbert", "morton", "unsorted", "group_avg", "deepsets")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture and per-order training settings of one classifier."""

    width: int = 128
    """Residual-MLP width (DeepSets: per-point MLP width)."""
    n_blocks: int = 2
    """Residual blocks (DeepSets: hidden layers of the per-point MLP)."""
    n_fourier: int = 9
    """Random Fourier frequencies per point (official: 9, i.e. 18 features per point)."""
    fourier_scale: float = 0.1
    """Standard deviation of the Fourier matrix B."""
    dropout: float = 0.1
    """Whole-point dropout probability (also used inside the residual blocks)."""
    bits: int = 12
    """Bits per axis for Hilbert / Morton quantisation (official: 12)."""
    n_perms: int = 8
    """K, permutations averaged by the group-averaged model."""
    lr: float = 1e-3
    """Peak AdamW learning rate (cosine decay to lr * 1e-3)."""
    weight_decay: float = 0.05
    """AdamW weight decay."""
    label_smoothing: float = 0.1
    """Label smoothing of the cross-entropy."""


# Official per-order settings (canon.md): dropout, fourier scale, label smoothing, lr, wd.
# Group averaging uses the unsorted settings; DeepSets the unsorted ones too.
ORDER_PRESETS: dict[str, dict[str, float]] = {
    "unsorted": dict(
        dropout=0.1, fourier_scale=1.0, label_smoothing=0.1, lr=1.5e-3, weight_decay=0.05
    ),
    "lex": dict(dropout=0.1, fourier_scale=0.1, label_smoothing=0.2, lr=6.4e-4, weight_decay=0.05),
    "hilbert": dict(
        dropout=0.3, fourier_scale=0.1, label_smoothing=0.2, lr=9.6e-4, weight_decay=0.01
    ),
}
ORDER_PRESETS["morton"] = ORDER_PRESETS["hilbert"]
ORDER_PRESETS["group_avg"] = ORDER_PRESETS["unsorted"]
ORDER_PRESETS["deepsets"] = ORDER_PRESETS["unsorted"]


def _check_cloud(x, n_points: int, d: int, who: str) -> None:
    if x.ndim != 2 or x.shape != (n_points, d):
        raise ValueError(
            f"{who}: cloud of shape {x.shape}; expected one cloud ({n_points}, {d}) "
            "(vmap over a batch)"
        )


def point_dropout(
    h: Float[Array, "P F"], rate: float, key: PRNGKeyArray | None
) -> Float[Array, "P F"]:
    """Drop whole points: zero each point's features with probability ``rate`` and rescale the
    kept ones by ``1 / (1 - rate)`` (inverted dropout). Identity when ``key`` is None."""
    if key is None or rate == 0.0:
        return h
    keep = jax.random.bernoulli(key, 1.0 - rate, (h.shape[0], 1))
    return jnp.where(keep, h / (1.0 - rate), jnp.zeros_like(h))


def _order(name: str, x: Array, bits: int) -> Array:
    if name == "lex":
        return lex_order(x)
    if name == "hilbert":
        return hilbert_order(x, bits, normalize="none")
    if name == "morton":
        return morton_order(x, bits, normalize="none")
    return get_order(name)(x)


class CanonMLP(eqx.Module):
    """Canonize (normalise, order), Fourier-embed each point, drop points, flatten, residual MLP.

    ``order="identity"`` gives the unsorted (non-invariant) baseline.
    """

    fourier: FourierFeatures
    mlp: ResidualMLP
    order: str = eqx.field(static=True)
    bits: int = eqx.field(static=True)
    rate: float = eqx.field(static=True)
    n_points: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, order: str, key):
        if order not in ("identity", "lex", "hilbert", "morton"):
            raise ValueError(f"order {order!r}: expected 'identity', 'lex', 'hilbert' or 'morton'")
        if not 0.0 <= cfg.dropout < 1.0:
            raise ValueError(f"dropout {cfg.dropout!r}: expected a probability in [0, 1)")
        kf, km = jax.random.split(key)
        self.fourier = FourierFeatures(d, cfg.n_fourier, scale=cfg.fourier_scale, key=kf)
        self.mlp = ResidualMLP(
            n_points * 2 * cfg.n_fourier,
            n_classes,
            cfg.width,
            cfg.n_blocks,
            dropout=cfg.dropout,
            activation=jax.nn.gelu,
            key=km,
        )
        self.order, self.bits, self.rate = order, cfg.bits, float(cfg.dropout)
        self.n_points, self.d = n_points, d

    def canonical(self, x: Float[Array, "P d"]) -> Float[Array, "P d"]:
        """The normalised cloud in this model's canonical order."""
        _check_cloud(x, self.n_points, self.d, "CanonMLP")
        xn = normalize_cloud(x, "per_axis")
        perm = _order(self.order, xn, self.bits)
        return xn[perm]

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        h = jax.vmap(self.fourier)(self.canonical(x))
        kd, km = (None, None) if key is None else jax.random.split(key)
        h = point_dropout(h, self.rate, kd)
        return self.mlp(h.reshape(-1), key=km)


class GroupAveraged(eqx.Module):
    """The unsorted MLP averaged over ``K`` random point permutations (see module docstring)."""

    base: CanonMLP
    n_perms: int = eqx.field(static=True)
    perm_seed: int = eqx.field(static=True)

    def __init__(
        self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key, perm_seed: int = 0
    ):
        if not isinstance(cfg.n_perms, int) or cfg.n_perms < 1:
            raise ValueError(f"n_perms (K) {cfg.n_perms!r}: expected an integer >= 1")
        self.base = CanonMLP(n_points, d, n_classes, cfg, order="identity", key=key)
        self.n_perms, self.perm_seed = cfg.n_perms, perm_seed

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        _check_cloud(x, self.base.n_points, self.base.d, "GroupAveraged")
        if key is None:
            kp, kd = jax.random.key(self.perm_seed), None
        else:
            kp, kd = jax.random.split(key)
        n = x.shape[0]
        perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(kp, self.n_perms))
        dkeys = None if kd is None else jax.random.split(kd, self.n_perms)
        logits = jax.vmap(lambda p, k: self.base(x[p], key=k))(perms, dkeys)
        return jnp.mean(logits, axis=0)


class DeepSets(eqx.Module):
    """``rho(sum_i phi(FF(x_i)))`` on the normalised cloud: structurally permutation invariant."""

    fourier: FourierFeatures
    phi: MLP
    rho: MLP
    rate: float = eqx.field(static=True)
    n_points: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key):
        kf, kp, kr = jax.random.split(key, 3)
        self.fourier = FourierFeatures(d, cfg.n_fourier, scale=cfg.fourier_scale, key=kf)
        self.phi = MLP(
            2 * cfg.n_fourier, cfg.width, cfg.width, cfg.n_blocks, activation=jax.nn.gelu, key=kp
        )
        self.rho = MLP(cfg.width, n_classes, cfg.width, 1, activation=jax.nn.gelu, key=kr)
        self.rate, self.n_points, self.d = float(cfg.dropout), n_points, d

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        _check_cloud(x, self.n_points, self.d, "DeepSets")
        xn = normalize_cloud(x, "per_axis")
        h = jax.vmap(lambda p: self.phi(self.fourier(p)))(xn)
        h = point_dropout(h, self.rate, key)
        return self.rho(jnp.sum(h, axis=0) / self.n_points)


def make_model(
    kind: str, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key
) -> eqx.Module:
    """Build model ``kind`` (one of :data:`MODEL_KINDS`) for clouds ``(n_points, d)``."""
    if kind in ("lex", "hilbert", "morton"):
        return CanonMLP(n_points, d, n_classes, cfg, order=kind, key=key)
    if kind == "unsorted":
        return CanonMLP(n_points, d, n_classes, cfg, order="identity", key=key)
    if kind == "group_avg":
        return GroupAveraged(n_points, d, n_classes, cfg, key=key)
    if kind == "deepsets":
        return DeepSets(n_points, d, n_classes, cfg, key=key)
    raise ValueError(f"model kind {kind!r}: expected one of {MODEL_KINDS}")
