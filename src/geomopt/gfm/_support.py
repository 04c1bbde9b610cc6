"""Did a path stay on the data? The support check of :func:`geomopt.gfm.solve`, from the user's
score alone (no true manifold).

At noise level ``sigma`` the score's implied displacement ``sigma^2 |s(x)|`` is Tweedie's
``|D(x, sigma) - x|``: how far the ideal denoiser moves ``x``, about the distance from ``x`` to
the data within a few ``sigma`` of it (for data with Gaussian noise of std ``n`` it is
``d sigma^2 / (sigma^2 + n^2)`` near a flat piece of the support). The check measures it in units
of ``sigma``, ``sigma |s(x)|``, at every waypoint AND at every segment midpoint: a path that
jumps a gap between two parts of the support has waypoints on both sides and only its midpoints
in the gap. A path is off the support when the largest value exceeds ``threshold``
(:data:`DEFAULT_SUPPORT_THRESHOLD`, chosen by measurement against the true distance on the
six manifolds of :mod:`geomopt.manifolds`: ``experiments/gfm/README.md``).

What it cannot see (approximations): the score of a point exactly halfway between two parallel
sheets of data vanishes by symmetry (so does any denoiser's displacement there), a point between
waypoints other than the midpoint is not evaluated, and far from the data a learned score is
outside its training distribution (its displacement is then only an indicator). The threshold
is for data of low codimension (curves and surfaces): a point at noise ``sigma`` from data of
codimension ``c`` is displaced by about ``sigma sqrt(c)``, so in high-dimensional latent spaces
the default flags every path; pass a threshold measured on the model there.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import positive

__all__ = [
    "DEFAULT_SUPPORT_THRESHOLD",
    "support_points",
    "support_profile",
    "resolve_support_sigma",
    "support_fields",
    "describe_support_point",
]

DEFAULT_SUPPORT_THRESHOLD = 2.25
"""Largest ``sigma |s(x)|`` along a path (waypoints and segment midpoints) that counts as on the
data support. Measured (``gfm/sigma_sweep`` quick, sigma 0.05, six manifolds, exact scores and
three trained denoisers, truth: true distance <= 0.1 at waypoints and midpoints): fitted on the
even pairs (768 solves; on-surface paths reach 1.76, off-surface ones start at 1.92), tested on
the odd ones (768): 0 % false positives, 2.6 % false negatives (the earlier 3.0: 0 % / 28 %).
At sigma 0.1 the check is in units of sigma and misses paths 0.1-0.2 off (torus, swiss roll)."""


def support_points(path):
    """Waypoints and segment midpoints, interleaved: ``(..., K, d) -> (..., 2K - 1, d)``
    (index ``2i`` is waypoint ``i``, ``2i + 1`` the midpoint of waypoints ``i`` and ``i + 1``)."""
    mid = 0.5 * (path[..., 1:, :] + path[..., :-1, :])
    pairs = jnp.stack([path[..., :-1, :], mid], axis=-2)  # (..., K-1, 2, d)
    flat = pairs.reshape(path.shape[:-2] + (-1, path.shape[-1]))
    return jnp.concatenate([flat, path[..., -1:, :]], axis=-2)


def support_profile(path, score, sigma):
    """``sigma |s(x)|`` (``= |D(x, sigma) - x| / sigma``) at the :func:`support_points` of
    ``path`` (``(K, d)`` or ``(B, K, d)``): shape ``(2K - 1,)`` / ``(B, 2K - 1)``. Traceable; one
    batched evaluation of ``score`` (one point ``(d,) -> (d,)``) at every point."""
    pts = support_points(path)
    flat = pts.reshape(-1, pts.shape[-1])
    s = jax.vmap(score)(flat).astype(flat.dtype)
    return (jnp.asarray(sigma, flat.dtype) * jnp.linalg.norm(s, axis=-1)).reshape(pts.shape[:-1])


def profile_stats(profile):
    """``(max, argmax)`` over the last axis of a :func:`support_profile` (NaN propagates)."""
    return jnp.max(profile, axis=-1), jnp.argmax(profile, axis=-1)


@eqx.filter_jit
def _stats_jit(path, score, sigma):
    return profile_stats(support_profile(path, score, sigma))


def resolve_support_sigma(score, support_sigma):
    """``(sigma, note)``: the noise level the check uses (``support_sigma``, else the score's
    scalar ``.sigma`` as :class:`geomopt.gfm.ScoreAt` has) and, when there is none, ``None``
    with the reason the check cannot run."""
    if support_sigma is not None:
        if score is None:
            return None, "no score: nothing to check against"
        return float(positive("support_sigma", support_sigma)), None
    if score is None:
        return None, "no score: nothing to check against"
    sigma = getattr(score, "sigma", None)
    if sigma is not None and np.ndim(sigma) == 0:
        try:
            value = float(sigma)
        except (TypeError, ValueError):
            value = float("nan")
        if np.isfinite(value) and value > 0:
            return value, None
    return None, "the score's noise level is unknown: pass support_sigma (or a ScoreAt)"


def support_fields(maxima, where, sigma, threshold, note) -> dict:
    """The report's support fields from per-pair ``maxima`` / ``where`` (NumPy; ``None`` when the
    check did not run, with ``note`` saying why)."""
    if maxima is None:
        return dict(support_max=None, support_where=None, on_support=None, support_sigma=None,
                    support_threshold=None, support_note=note)  # fmt: skip
    maxima = np.asarray(maxima)
    on = np.asarray(maxima <= threshold)  # NaN (a non-finite score) counts as off
    return dict(support_max=maxima, support_where=np.asarray(where), on_support=on,
                support_sigma=float(sigma), support_threshold=float(threshold),
                support_note=None)  # fmt: skip


def check_paths(path, score, sigma, threshold, note) -> dict:
    """:func:`support_fields` of ``path`` (``(K, d)`` or ``(B, K, d)``) computed by a jitted call
    (for the backends that do not compute it inside their solve)."""
    if sigma is None:
        return support_fields(None, None, None, None, note)
    path = jnp.asarray(path)
    maxima, where = _stats_jit(path, score, jnp.asarray(sigma, path.dtype))
    return support_fields(np.asarray(maxima), np.asarray(where), sigma, threshold, None)


def describe_support_point(where: int) -> str:
    """Words for index ``where`` of :func:`support_points`."""
    i = int(where)
    if i % 2 == 0:
        return f"waypoint {i // 2}"
    return f"the midpoint of waypoints {i // 2} and {i // 2 + 1}"
