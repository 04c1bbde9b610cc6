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
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.canon._curves import hilbert_index, morton_index
from geomopt.canon._model_config import MODEL_KINDS, ModelConfig
from geomopt.canon._orders import lex_order, normalize_cloud, sort_by_words

__all__ = [
    "MODEL_KINDS",
    "ModelConfig",
    "FourierMap",
    "ResidualBlock",
    "CanonMLP",
    "PermutationSampleAverage",
    "DeepSets",
    "make_model",
    "point_dropout",
    "dropout",
    "official_quantize",
    "official_hilbert_order",
    "model_order",
    "prepare_inputs",
    "default_rates",
    "trainable_filter",
    "training_model",
]

CANON_ORDERS = ("identity", "lex", "hilbert", "morton")


def _check_cloud(x, n_points: int, d: int, who: str) -> None:
    if x.ndim != 2 or x.shape != (n_points, d):
        raise ValueError(
            f"{who}: cloud of shape {x.shape}; expected one cloud ({n_points}, {d}) "
            "(vmap over a batch)"
        )


def _check_rate(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} {p!r}: expected a probability in [0, 1)")


def dropout(h: Array, rate, key: PRNGKeyArray | None) -> Array:
    """Inverted elementwise dropout with a possibly traced ``rate``; identity without ``key``."""
    if key is None:
        return h
    keep = jax.random.bernoulli(key, 1.0 - rate, h.shape)
    return jnp.where(keep, h / (1.0 - rate), jnp.zeros_like(h))


def point_dropout(h: Float[Array, "P F"], rate, key: PRNGKeyArray | None) -> Float[Array, "P F"]:
    """Drop whole points (``torch.nn.Dropout1d`` over the point axis, as the official model):
    zero each point's features with probability ``rate``, scale the kept ones by
    ``1 / (1 - rate)``. Identity when ``key`` is None."""
    if key is None:
        return h
    keep = jax.random.bernoulli(key, 1.0 - rate, (h.shape[0], 1))
    return jnp.where(keep, h / (1.0 - rate), jnp.zeros_like(h))


def official_quantize(x: Float[Array, "P d"], bits: int) -> Array:
    """Grid cells of the official training-time Hilbert order: ``floor(X * 2**bits)`` clamped to
    ``2**bits - 1`` (``space_filling_pytorch`` with ``space_size = 2**bits``) on ``X`` in
    ``[0, 1]``."""
    cells = jnp.maximum(jnp.floor(x * 2.0**bits), 0.0)
    # the clamp is a select, not a clip to the float 2**bits - 1: at bits = 32 that bound is not
    # a float32 and not a jitted int32 argument
    full = cells >= 2.0**bits
    return jnp.where(full, np.uint32(2**bits - 1), cells.astype(jnp.uint32))


def official_hilbert_order(x: Float[Array, "P d"], bits: int = 12) -> Array:
    """The official training-time Hilbert order of a normalised cloud.

    ``space_filling_pytorch``'s Hilbert code equals ``hilbertcurve``'s ``HilbertCurve(bits, 3)``
    on the axes taken in the order (z, x, y) (canon.md); in ``d`` dimensions the last axis is
    moved first likewise. Cells from :func:`official_quantize`; ties keep the input order.
    Official in 3-D only (tested against ``hilbertcurve`` there).
    """
    q = official_quantize(x, bits)
    q = jnp.concatenate([q[..., -1:], q[..., :-1]], axis=-1)
    return sort_by_words(hilbert_index(q, bits))


def model_order(name: str, xn: Float[Array, "P d"], bits: int) -> Array:
    """The permutation of the normalised cloud ``xn`` used by the MLPs for order ``name``."""
    if name == "identity":
        return jnp.arange(xn.shape[-2], dtype=jnp.int32)
    if name == "lex":
        return lex_order(xn)
    if name == "hilbert":
        return official_hilbert_order(xn, bits)
    if name == "morton":
        q = official_quantize(xn, bits)
        return sort_by_words(morton_index(q, bits))
    raise ValueError(f"order {name!r}: expected one of {CANON_ORDERS}")


class FourierMap(eqx.Module):
    """The official ``FourierFeatureMap``: ``[sin(2 pi x B), cos(2 pi x B)]`` with a fixed
    ``B ~ N(0, scale^2)`` of shape ``d x (n_bands d)`` (a buffer: never trained, see
    :func:`trainable_filter`)."""

    B: Float[Array, "d F"]

    def __init__(self, d: int, n_bands: int, scale: float, *, key):
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"fourier_scale {scale!r}: expected a finite positive number")
        if not isinstance(n_bands, int) or n_bands < 1:
            raise ValueError(f"n_bands {n_bands!r}: expected a positive integer")
        self.B = scale * jax.random.normal(key, (d, n_bands * d))

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, " F2"]:
        proj = (2 * jnp.pi * x) @ jax.lax.stop_gradient(self.B)
        return jnp.concatenate([jnp.sin(proj), jnp.cos(proj)])


class ResidualBlock(eqx.Module):
    """The official ``MLPResidualBlock``: ``skip(h) + dropout(GELU(Linear(LayerNorm(h))))``,
    ``skip`` linear when the width changes, the identity otherwise. GELU is the exact (erf) one,
    as ``torch.nn.GELU``."""

    norm: eqx.nn.LayerNorm
    linear: eqx.nn.Linear
    skip: eqx.nn.Linear | None

    def __init__(self, n_in: int, n_out: int, *, key):
        k1, k2 = jax.random.split(key)
        self.norm = eqx.nn.LayerNorm(n_in)
        self.linear = eqx.nn.Linear(n_in, n_out, key=k1)
        self.skip = eqx.nn.Linear(n_in, n_out, key=k2) if n_in != n_out else None

    def __call__(self, h: Array, rate, key: PRNGKeyArray | None) -> Array:
        out = dropout(jax.nn.gelu(self.linear(self.norm(h)), approximate=False), rate, key)
        return (h if self.skip is None else self.skip(h)) + out


def default_rates(cfg: ModelConfig) -> dict[str, float]:
    """The dropout probabilities of ``cfg`` as the ``rates`` mapping of ``apply``."""
    for n in ("dropout", "point_dropout", "input_dropout"):
        _check_rate(n, getattr(cfg, n))
    return {
        "dropout": cfg.dropout,
        "point_dropout": cfg.point_dropout,
        "input_dropout": cfg.input_dropout,
    }


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
        _check_cloud(x, self.n_points, self.d, "CanonMLP")
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
        _check_cloud(x, self.base.n_points, self.base.d, "PermutationSampleAverage")
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
        _check_rate("point_dropout", cfg.point_dropout)
        self.point_rate, self.n_points, self.d = float(cfg.point_dropout), n_points, d

    def apply(self, xn: Float[Array, "P d"], *, key=None, rates=None) -> Array:
        rate = self.point_rate if rates is None else rates["point_dropout"]
        h = jax.vmap(lambda p: self.phi(self.fourier(p)))(xn)
        h = point_dropout(h, rate, key)
        return self.rho(jnp.mean(h, axis=0))

    def __call__(self, x: Float[Array, "P d"], *, key: PRNGKeyArray | None = None) -> Array:
        _check_cloud(x, self.n_points, self.d, "DeepSets")
        return self.apply(normalize_cloud(x, "per_axis"), key=key)


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
        from geomopt.canon._transformer import SerializedTransformer

        return SerializedTransformer(
            n_points, d, n_classes, cfg, serialization=kind.removeprefix("transformer_"), key=key
        )
    if kind.startswith("rot_") and kind in MODEL_KINDS:
        from geomopt.canon._rotations import RotationClassifier

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
        from geomopt.canon._rotations import canonize_rotation

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
        from geomopt.canon._transformer import serializations

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
