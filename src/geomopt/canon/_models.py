"""Point-cloud classifiers: the official canonized MLP, the unsorted MLP, the MLP averaged over
sampled permutations, DeepSets.

Every model acts on ONE cloud ``(P, d)`` and returns class logits ``(n_classes,)``; the caller
vmaps over clouds. Dropout is active only when a ``key`` is passed (training).

- :class:`CanonMLP` -- the official ``GlobalMLPClassifier`` of yonatansverdlov/Canonization
  (``ModelNet/training/utils/models.py``), for any point dimension ``d``: per-cloud normalisation
  to ``[0, 1]`` (per-axis minimum, one global scale), a canonical order, fixed random Fourier
  features ``[sin(2 pi x B), cos(2 pi x B)]`` with ``B ~ N(0, scale^2)`` of shape
  ``d x (n_bands d)``, point dropout (whole points, 0.2), flatten, input dropout (0.2), residual
  blocks ``skip(h) + dropout(GELU(Linear(LayerNorm(h))))`` with widths 256 -> 128 -> 64 (linear
  skip where the width changes), LayerNorm, linear head. ``test_official_mlp_matches_definition``
  checks the forward pass against that definition written out in numpy; the model is called
  "official" for that reason. Orders: ``lex`` (stable, first axis primary: official),
  ``hilbert`` (the official training-time convention, :func:`official_hilbert_order`: official
  in 3-D), ``morton`` (same quantisation, z-order; not in the official code) and ``identity``
  (the official unsorted ``ply`` baseline).
- :class:`PermutationSampleAverage` (kind ``perm_sample_avg``) -- not in the official code: the
  unsorted MLP averaged over ``K`` random permutations, ``f_K(X) = (1/K) sum_k f(X[pi_k])``. It is
  **not invariant**: a Monte-Carlo estimate of the permutation-group average (the group has P!
  elements; K = 4-8 of them are averaged), so permuting the input changes the output (tested).
  It stands in for the paper's group-averaged model, which is exactly invariant only as K covers
  the group. Training draws fresh permutations from the dropout key; evaluation uses ``K`` fixed
  permutations from ``perm_seed``.
- :class:`DeepSets` -- not in the official permutation experiment (ours): a shared per-point
  ``equinox.nn.MLP`` on the Fourier features, mean pooling, ``equinox.nn.MLP`` head.

For training, every model has ``apply(inputs, *, key, rates)``: ``inputs`` is what
:func:`prepare_inputs` computes once per data set (for the MLPs the cloud already in canonical
order, so the lex / Hilbert / Morton / unsorted MLPs share one compiled training step), and
``rates`` the dropout probabilities as traced values. ``__call__`` is the plain model.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.canon._layers import (
    CANON_ORDERS,
    FourierMap,
    ResidualBlock,
    check_cloud,
    check_rate,
    default_rates,
    dropout,
    model_order,
    point_dropout,
)
from geomopt.canon._model_config import ModelConfig
from geomopt.canon._orders import normalize_cloud

__all__ = ["CanonMLP", "DeepSets", "PermutationSampleAverage"]

class CanonMLP(eqx.Module):
    """The official canonized MLP (see the module docstring); ``order="identity"`` is the
    unsorted baseline."""

    fourier: FourierMap
    blocks: tuple[ResidualBlock, ...]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    order: str = eqx.field(static=True)
    bits: int = eqx.field(static=True)
    rates: tuple[float, float, float] = eqx.field(static=True)
    n_points: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, order: str, key):
        if order not in CANON_ORDERS:
            raise ValueError(f"order {order!r}: expected one of {CANON_ORDERS}")
        r = default_rates(cfg)
        if not cfg.mlp_dims or any(int(w) < 1 for w in cfg.mlp_dims):
            raise ValueError(f"mlp_dims {cfg.mlp_dims!r}: expected positive widths")
        kf, kh, *kb = jax.random.split(key, len(cfg.mlp_dims) + 2)
        self.fourier = FourierMap(d, cfg.n_bands, cfg.fourier_scale, key=kf)
        dims = [n_points * 2 * cfg.n_bands * d, *cfg.mlp_dims]
        self.blocks = tuple(
            ResidualBlock(a, b, key=k) for a, b, k in zip(dims[:-1], dims[1:], kb, strict=True)
        )
        self.norm = eqx.nn.LayerNorm(dims[-1])
        self.head = eqx.nn.Linear(dims[-1], n_classes, key=kh)
        self.order, self.bits = order, cfg.bits
        self.rates = (r["dropout"], r["point_dropout"], r["input_dropout"])
        self.n_points, self.d = n_points, d

    def canonical(self, x: Float[Array, "P d"]) -> Float[Array, "P d"]:
        """The normalised cloud in this model's canonical order."""
        check_cloud(x, self.n_points, self.d, "CanonMLP")
        xn = normalize_cloud(x, "per_axis")
        return xn[model_order(self.order, xn, self.bits)]

    def apply(self, xc: Float[Array, "P d"], *, key=None, rates=None) -> Array:
        """Logits of a cloud already normalised and in canonical order."""
        rb, rp, ri = self.rates if rates is None else (
            rates["dropout"], rates["point_dropout"], rates["input_dropout"]
        )  # fmt: skip
        kp, ki, *kb = (None,) * (2 + len(self.blocks)) if key is None else jax.random.split(
            key, 2 + len(self.blocks)
        )  # fmt: skip
        h = point_dropout(jax.vmap(self.fourier)(xc), rp, kp)
        h = dropout(h.reshape(-1), ri, ki)
        for block, k in zip(self.blocks, kb, strict=True):
            h = block(h, rb, k)
        return self.head(self.norm(h))

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        return self.apply(self.canonical(x), key=key)


class PermutationSampleAverage(eqx.Module):
    """The unsorted MLP averaged over ``K`` random point permutations (module docstring)."""

    base: CanonMLP
    n_perms: int = eqx.field(static=True)
    perm_seed: int = eqx.field(static=True)

    def __init__(
        self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key, perm_seed: int = 0
    ):
        if isinstance(cfg.n_perms, bool) or not isinstance(cfg.n_perms, int) or cfg.n_perms < 1:
            raise ValueError(f"n_perms (K) {cfg.n_perms!r}: expected an integer >= 1")
        self.base = CanonMLP(n_points, d, n_classes, cfg, order="identity", key=key)
        self.n_perms, self.perm_seed = cfg.n_perms, perm_seed

    def apply(self, xn: Float[Array, "P d"], *, key=None, rates=None) -> Array:
        if key is None:
            kp, kd = jax.random.key(self.perm_seed), None
        else:
            kp, kd = jax.random.split(key)
        n = xn.shape[0]
        perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(kp, self.n_perms))
        if kd is None:
            logits = jax.vmap(lambda p: self.base.apply(xn[p], rates=rates))(perms)
        else:
            dkeys = jax.random.split(kd, self.n_perms)
            logits = jax.vmap(lambda p, k: self.base.apply(xn[p], key=k, rates=rates))(perms, dkeys)
        return jnp.mean(logits, axis=0)

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        check_cloud(x, self.base.n_points, self.base.d, "PermutationSampleAverage")
        return self.apply(normalize_cloud(x, "per_axis"), key=key)


class DeepSets(eqx.Module):
    """``rho(mean_i phi(FF(x_i)))`` on the normalised cloud (ours; structurally invariant)."""

    fourier: FourierMap
    phi: eqx.nn.MLP
    rho: eqx.nn.MLP
    point_rate: float = eqx.field(static=True)
    n_points: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, key):
        kf, kp, kr = jax.random.split(key, 3)
        gelu = jax.nn.gelu
        w = cfg.deepsets_width
        self.fourier = FourierMap(d, cfg.n_bands, cfg.fourier_scale, key=kf)
        self.phi = eqx.nn.MLP(
            2 * cfg.n_bands * d, w, w, cfg.deepsets_depth, activation=gelu, key=kp
        )
        self.rho = eqx.nn.MLP(w, n_classes, w, 1, activation=gelu, key=kr)
        check_rate("point_dropout", cfg.point_dropout)
        self.point_rate, self.n_points, self.d = float(cfg.point_dropout), n_points, d

    def apply(self, xn: Float[Array, "P d"], *, key=None, rates=None) -> Array:
        rate = self.point_rate if rates is None else rates["point_dropout"]
        h = jax.vmap(lambda p: self.phi(self.fourier(p)))(xn)
        h = point_dropout(h, rate, key)
        return self.rho(jnp.mean(h, axis=0))

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        check_cloud(x, self.n_points, self.d, "DeepSets")
        return self.apply(normalize_cloud(x, "per_axis"), key=key)
