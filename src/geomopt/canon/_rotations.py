"""Rotation canonization of point clouds (the official code's second part), in any dimension d.

Canonizations (as in ``ModelNet/training/utils/models.py`` of yonatansverdlov/Canonization):

- ``pca``: centre the cloud, take the eigenvectors of its covariance (``/(P - 1)``) in
  descending order of eigenvalue as the frame, no sign fix (``Model1_PurePCA``). The frame is
  defined up to the ``2^d`` sign flips of its axes, so this canonization is discontinuous.
- ``frame_avg``: the PCA frame averaged over all ``2^d`` sign flips, ``logsumexp_s
  log_softmax(f(X_pca * s)) - log 2^d`` (``Model2_FrameAveraging``; 8 flips in 3-D): invariant.
- ``skew``: the skewness sign fix (``Canonicalizer.pca_skew``): eigenvector signs made positive
  at their largest-magnitude entry, the frame forced into SO(d) (last axis flipped if
  ``det < 0``), then each axis flipped to make the third moment of the projected cloud positive,
  with the last sign flipped again when an odd number of flips would leave SO(d); then the points
  are sorted lexicographically (irrelevant for a set model).
- ``random_frame``: the PCA frame with random sign flips at training time only
  (``Model4_RandomFrame``).
- ``none``: the centred cloud, no canonization (a baseline of ours).

Backbone (``RotDeepSets``): per-point MLP ``d -> 64 -> 128 -> 256``, sum over points, MLP
``256 -> 128 -> C`` with dropout 0.5, as the official ``DeepSetBase``. Approximation: LayerNorm
replaces the official BatchNorm (no batch statistics in a per-example Equinox model).
Outputs are log-probabilities (``log_softmax``), as the official models.

:func:`rotation_covering_proxy` is the covering proxy under rotations: the mean over test clouds
of the distance to the nearest same-class training cloud after each canonization, with the
optimal point matching (Hungarian) so that only the rotation part is measured.
"""

from __future__ import annotations

import itertools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from geomopt.canon._layers import dropout
from geomopt.canon._model_config import ModelConfig
from geomopt.canon._orders import lex_order

__all__ = [
    "ROTATION_CANONS",
    "center",
    "pca_frame",
    "skew_frame",
    "sign_flips",
    "canonize_rotation",
    "random_rotations",
    "RotDeepSets",
    "RotationClassifier",
    "rotation_covering_proxy",
]

ROTATION_CANONS = ("none", "pca", "frame_avg", "skew", "random_frame")


def center(x: Float[Array, "P d"]) -> Array:
    return x - jnp.mean(x, axis=-2, keepdims=True)


def _eig_desc(xc: Float[Array, "P d"]) -> Array:
    cov = xc.T @ xc / max(xc.shape[0] - 1, 1)
    _, vecs = jnp.linalg.eigh(cov)
    return vecs[:, ::-1]


def pca_frame(x: Float[Array, "P d"]) -> Float[Array, "P d"]:
    """Coordinates of the centred cloud in its PCA frame (descending eigenvalues, no sign fix)."""
    xc = center(x)
    return xc @ _eig_desc(xc)


def _enforce_so(r: Array) -> Array:
    flip = jnp.where(jnp.linalg.det(r) < 0, -1.0, 1.0)
    return r.at[:, -1].multiply(flip)


def skew_frame(x: Float[Array, "P d"]) -> Float[Array, "P d"]:
    """The official skewness-fixed PCA canonical form (module docstring), lex-sorted."""
    xc = center(x)
    vecs = _eig_desc(xc)
    idx = jnp.argmax(jnp.abs(vecs), axis=0)
    s0 = jnp.sign(vecs[idx, jnp.arange(vecs.shape[1])])
    vecs = _enforce_so(vecs * jnp.where(s0 == 0, 1.0, s0)[None, :])
    p = xc @ vecs
    s = jnp.sign(jnp.mean(p**3, axis=0))
    s = jnp.where(s == 0, 1.0, s)
    odd = jnp.sum(s < 0) % 2 == 1
    s = s.at[-1].multiply(jnp.where(odd, -1.0, 1.0))
    p = p * s[None, :]
    return p[lex_order(p)]


def sign_flips(d: int) -> np.ndarray:
    """All ``2^d`` sign vectors ``(2^d, d)``, the first all ones."""
    return np.array(list(itertools.product([1.0, -1.0], repeat=d)), np.float32)


def canonize_rotation(name: str, x: Float[Array, "P d"]) -> Float[Array, "P d"]:
    """The deterministic canonical form of ``x`` (for ``frame_avg`` / ``random_frame``: the PCA
    frame before the sign flips)."""
    if name == "none":
        return center(x)
    if name in ("pca", "frame_avg", "random_frame"):
        return pca_frame(x)
    if name == "skew":
        return skew_frame(x)
    raise ValueError(f"rotation canonization {name!r}: expected one of {ROTATION_CANONS}")


def random_rotations(n: int, d: int, *, seed: int) -> np.ndarray:
    """``n`` Haar-random rotations in SO(d) ``(n, d, d)`` (QR of a Gaussian with the sign fix)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, d, d))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]
    det = np.linalg.det(q)
    q[:, :, 0] *= np.sign(det)[:, None]
    return q.astype(np.float32)


class _Layer(eqx.Module):
    linear: eqx.nn.Linear
    norm: eqx.nn.LayerNorm

    def __init__(self, a: int, b: int, *, key):
        self.linear = eqx.nn.Linear(a, b, key=key)
        self.norm = eqx.nn.LayerNorm(b)

    def __call__(self, h):
        return jax.nn.relu(self.norm(self.linear(h)))


class RotDeepSets(eqx.Module):
    """The official DeepSets backbone (LayerNorm for BatchNorm): ``rho(sum_i phi(x_i))``."""

    phi: tuple[_Layer, ...]
    hidden: _Layer
    out: eqx.nn.Linear

    def __init__(self, d: int, n_classes: int, *, key):
        ks = jax.random.split(key, 5)
        self.phi = (
            _Layer(d, 64, key=ks[0]),
            _Layer(64, 128, key=ks[1]),
            eqx.nn.Linear(128, 256, key=ks[2]),
        )
        self.hidden = _Layer(256, 128, key=ks[3])
        self.out = eqx.nn.Linear(128, n_classes, key=ks[4])

    def __call__(self, x: Float[Array, "P d"], rate, key) -> Array:
        def phi(p):
            for layer in self.phi:
                p = layer(p)
            return p

        h = jnp.sum(jax.vmap(phi)(x), axis=0)
        h = dropout(self.hidden(h), rate, key)
        return self.out(h)


class RotationClassifier(eqx.Module):
    """A rotation canonization in front of :class:`RotDeepSets`; returns log-probabilities."""

    net: RotDeepSets
    canon: str = eqx.field(static=True)
    rate: float = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def __init__(self, n_points: int, d: int, n_classes: int, cfg: ModelConfig, *, canon, key):
        if canon not in ROTATION_CANONS:
            raise ValueError(f"rotation canonization {canon!r}: expected one of {ROTATION_CANONS}")
        self.net = RotDeepSets(d, n_classes, key=key)
        self.canon, self.rate, self.d = canon, float(cfg.dropout), d

    def apply(self, xc: Float[Array, "P d"], *, key=None, rates=None) -> Array:
        """Log-probabilities from the canonical form ``canonize_rotation(canon, x)``."""
        rate = self.rate if rates is None else rates["dropout"]
        if self.canon == "frame_avg":
            flips = jnp.asarray(sign_flips(self.d))
            keys = None if key is None else jax.random.split(key, len(flips))
            if keys is None:
                logp = jax.vmap(
                    lambda s: jax.nn.log_softmax(self.net(xc * s[None, :], rate, None))
                )(flips)
            else:
                logp = jax.vmap(
                    lambda s, k: jax.nn.log_softmax(self.net(xc * s[None, :], rate, k))
                )(flips, keys)
            return jax.nn.logsumexp(logp, axis=0) - math.log(len(flips))
        if self.canon == "random_frame" and key is not None:
            key, ks = jax.random.split(key)
            xc = xc * jnp.where(jax.random.bernoulli(ks, 0.5, (1, self.d)), 1.0, -1.0)
        return jax.nn.log_softmax(self.net(xc, rate, key))

    def __call__(self, x: Float[Array, "P d"], *, key=None) -> Array:
        return self.apply(canonize_rotation(self.canon, x), key=key)


def rotation_covering_proxy(x_test, y_test, x_train, y_train, canon: str) -> float:
    """Mean over test clouds of ``min`` over same-class training clouds of the Hungarian
    distance ``min_pi (1/P) sum_i |X_i - Y_pi(i)|`` between canonical forms (``frame_avg``: also
    minimised over the ``2^d`` sign flips of the test cloud -- the distance between orbits of the
    frame). ``none`` compares the centred clouds as they are."""
    from scipy.optimize import linear_sum_assignment

    name = "pca" if canon in ("frame_avg", "random_frame") else canon
    f = jax.jit(
        lambda z: jax.lax.map(lambda c: canonize_rotation(name, c), z)
    )  # see prepare_inputs
    a = np.asarray(f(jnp.asarray(x_test, jnp.float32)), np.float64)
    b = np.asarray(f(jnp.asarray(x_train, jnp.float32)), np.float64)
    flips = sign_flips(a.shape[-1]) if canon == "frame_avg" else np.ones((1, a.shape[-1]))

    def dist(u, v):
        c = np.sqrt(((u[:, None] - v[None]) ** 2).sum(-1))
        r, k = linear_sum_assignment(c)
        return c[r, k].mean()

    y_test, y_train = np.asarray(y_test), np.asarray(y_train)
    scores = []
    for u, yu in zip(a, y_test, strict=True):
        same = b[y_train == yu]
        if len(same) == 0:
            raise ValueError(f"no training cloud of class {yu}")
        scores.append(min(dist(u * s, v) for v in same for s in flips))
    return float(np.mean(scores))
