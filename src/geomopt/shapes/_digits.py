"""Image interpolation on scikit-learn's 8x8 digits (1,797 real images): data, a feature network
and the official image metrics with honest substitutes.

The official image metrics use LPIPS (PPL, PDV), TOPIQ (no-reference quality) and an Inception
FID; none of these networks can be downloaded here and none fits 8x8 images. Substitutes, all
computed with a small MLP classifier trained here on the digits (:func:`train_classifier`,
64 -> 128 -> 64 -> 10, SiLU; its 64-d penultimate activations are the "features"):

- perceptual distance ``d(a, b) = |phi(a)/|phi(a)| - phi(b)/|phi(b)||^2`` (LPIPS's recipe of
  unit-normalised activations and squared differences, one layer, no learned weights);
- PPL of a path = ``sum_i d(x_i, x_{i+1})`` over adjacent frames; PDV = the standard deviation of
  those ``K - 1`` distances (both averaged over paths);
- quality = the classifier's mean top-class probability on the inner frames (a confident
  classifier = a frame that looks like some digit; higher is better), in place of TOPIQ;
- FID = Frechet distance between Gaussians fitted to the features of all inner frames and of the
  whole data set (the official code compares with the endpoints; with 8x8 digits the data set is
  the better-sampled reference).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "load_digits",
    "Classifier",
    "train_classifier",
    "features",
    "perceptual_distance",
    "path_scores",
    "frechet_distance",
]


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(images (1797, 64) in [-1, 1], labels (1797,))`` (pixel values 0..16 mapped by
    ``x / 8 - 1``)."""
    from sklearn.datasets import load_digits as _load

    d = _load()
    return (d.data / 8.0 - 1.0).astype(np.float32), d.target.astype(np.int32)


class Classifier(eqx.Module):
    layers: tuple[eqx.nn.Linear, ...]

    def __init__(self, *, key):
        k = jax.random.split(key, 3)
        self.layers = (
            eqx.nn.Linear(64, 128, key=k[0]),
            eqx.nn.Linear(128, 64, key=k[1]),
            eqx.nn.Linear(64, 10, key=k[2]),
        )

    def features(self, x):
        h = jax.nn.silu(self.layers[0](x))
        return jax.nn.silu(self.layers[1](h))

    def __call__(self, x):
        return self.layers[2](self.features(x))


def train_classifier(x, y, *, key, steps: int = 1500, batch: int = 128, lr: float = 3e-3):
    """Adam on cross-entropy with light input noise (N(0, 0.1^2), so in-between frames do not
    fall off the features' domain); returns the classifier."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    k_init, k_train = jax.random.split(key)
    model = Classifier(key=k_init)
    opt = optax.adam(lr)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    @jax.jit
    def train(params):
        def step(carry, k):
            p, s = carry
            k1, k2 = jax.random.split(k)
            idx = jax.random.randint(k1, (batch,), 0, x.shape[0])
            xb = x[idx] + 0.1 * jax.random.normal(k2, (batch, x.shape[1]))

            def loss(p):
                logits = jax.vmap(eqx.combine(p, static))(xb)
                return optax.softmax_cross_entropy_with_integer_labels(logits, y[idx]).mean()

            g = jax.grad(loss)(p)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None

        (p, _), _ = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(k_train, steps))
        return p

    return eqx.combine(train(params), static)


@eqx.filter_jit
def _feat(model, x):
    return jax.vmap(model.features)(x), jax.nn.softmax(jax.vmap(model)(x), axis=-1)


def features(model: Classifier, x) -> tuple[np.ndarray, np.ndarray]:
    """``(features (n, 64), class probabilities (n, 10))`` of images ``x (n, 64)``."""
    x = np.asarray(x, np.float32)
    if x.ndim != 2 or x.shape[1] != 64:
        raise ValueError(f"images of shape {x.shape}: expected (n, 64)")
    f, p = _feat(model, jnp.asarray(x))
    return np.asarray(f, np.float64), np.asarray(p, np.float64)


def perceptual_distance(fa, fb) -> np.ndarray:
    """``|fa/|fa| - fb/|fb||^2`` along the last axis (0 for identical features)."""
    na = fa / np.maximum(np.linalg.norm(fa, axis=-1, keepdims=True), 1e-12)
    nb = fb / np.maximum(np.linalg.norm(fb, axis=-1, keepdims=True), 1e-12)
    return np.sum((na - nb) ** 2, axis=-1)


def path_scores(model: Classifier, paths, inner) -> dict[str, float]:
    """PPL, PDV (means over paths) and quality (mean top probability over the ``inner``
    frames) of image paths ``(B, K, 64)``."""
    paths = np.asarray(paths)
    b, k, _ = paths.shape
    f, p = features(model, paths.reshape(b * k, -1))
    f, p = f.reshape(b, k, -1), p.reshape(b, k, -1)
    steps = perceptual_distance(f[:, 1:], f[:, :-1])
    return {
        "PPL": float(steps.sum(1).mean()),
        "PDV": float(steps.std(1).mean()),
        "quality": float(p[:, list(inner)].max(-1).mean()),
    }


def frechet_distance(fa, fb) -> float:
    """``|mu_a - mu_b|^2 + tr(Ca + Cb - 2 (Ca Cb)^(1/2))`` between Gaussian fits of feature
    sets ``(n, f)`` (the FID formula)."""
    import scipy.linalg

    fa, fb = np.asarray(fa, np.float64), np.asarray(fb, np.float64)
    if fa.ndim != 2 or fb.ndim != 2 or fa.shape[1] != fb.shape[1] or min(len(fa), len(fb)) < 2:
        raise ValueError(f"feature sets of shapes {fa.shape}, {fb.shape}: expected (n >= 2, f)")
    mu = fa.mean(0) - fb.mean(0)
    ca, cb = np.cov(fa, rowvar=False), np.cov(fb, rowvar=False)
    root = scipy.linalg.sqrtm(ca @ cb)
    root = root.real
    return float(mu @ mu + np.trace(ca + cb - 2.0 * root))
