"""Measuring whether GFM paths stay on the data: what ``gfm/sigma_sweep`` needs beyond a solve.

- :func:`exact_potential`: the exact score of a :mod:`geomopt.manifolds` shape smoothed at
  ``sigma`` (closed form for the circle and sphere, quadrature otherwise, with the node count
  chosen from ``sigma``).
- :func:`true_max_distance`: the largest true distance over the waypoints and segment midpoints
  (the points the support check of :func:`geomopt.gfm.solve` looks at).
- :func:`components`: which connected piece of the manifold a point lies on (two moons has
  two; a pair across them has no on-surface path at all).
- :func:`action_difference`: ``S(a) - S(b)`` of the discrete action of two paths between the same
  endpoints, from the score alone (the potential's change by a line integral of the score).
- :func:`flag_errors`, :func:`choose_threshold`: the support flag against the truth.
- :func:`insert_midpoints`: the path with a waypoint inserted in every segment.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._support import support_points

__all__ = [
    "NODE_SPACING",
    "exact_potential",
    "distance_profile",
    "true_max_distance",
    "components",
    "action_difference",
    "flag_errors",
    "choose_threshold",
    "insert_midpoints",
]

NODE_SPACING = 1.5
"""Largest nearest-neighbour spacing of the quadrature nodes, in units of the smoothing width
``s = sqrt(sigma^2 + data_noise^2)``: the mixture's ripple along the manifold is then about
``exp(-2 pi^2 / 1.5^2) ~ 2e-4`` of its value."""


def _spacing(manifold, n: int) -> float:
    from scipy.spatial import cKDTree

    from geomopt.diffusion import quadrature_nodes

    pts, _ = quadrature_nodes(manifold, n)
    d, _ = cKDTree(pts).query(pts, k=2)
    return float(d[:, 1].max())


def exact_potential(manifold, sigma: float, spacing: float = NODE_SPACING):
    """``(potential, n_nodes)``: the manifold's sampling law with its ``default_noise``, smoothed,
    with an exact ``score(x, sigma)`` / ``log_density`` / ``denoise``:
    :class:`~geomopt.diffusion.SmoothedCircle` / :class:`~geomopt.diffusion.SmoothedSphere`
    (closed form, ``n_nodes = 0``) or :class:`~geomopt.diffusion.SmoothedManifold` with node
    spacing at most ``spacing * s`` at this ``sigma`` (the spacing scales like ``1/n``:
    measured at ``n = 16`` and scaled)."""
    from geomopt.diffusion import SmoothedCircle, SmoothedManifold, SmoothedSphere

    noise = float(manifold.default_noise)
    if manifold.name == "circle":
        return SmoothedCircle(radius=manifold.radius, data_noise=noise), 0
    if manifold.name == "sphere":
        return SmoothedSphere(radius=manifold.radius, data_noise=noise), 0
    s = math.sqrt(float(sigma) ** 2 + noise**2)
    n = max(16, math.ceil(16 * _spacing(manifold, 16) / (spacing * s)))
    pot = SmoothedManifold(manifold, n=n)
    return pot, int(pot.nodes.shape[0])


@eqx.filter_jit
def _distances(manifold, paths):
    return jax.vmap(jax.vmap(manifold.distance))(support_points(paths))


def distance_profile(manifold, paths) -> np.ndarray:
    """``manifold.distance`` at the waypoints and segment midpoints of ``paths`` ``(B, K, d)``,
    interleaved as :func:`geomopt.gfm.support_points`: ``(B, 2K - 1)`` (NaN rows for
    non-finite paths)."""
    paths = jnp.asarray(paths)
    finite = np.asarray(jnp.all(jnp.isfinite(paths), axis=(1, 2)))
    out = np.asarray(_distances(manifold, jnp.where(jnp.isfinite(paths), paths, 0.0)))
    return np.where(finite[:, None], out, np.nan)


def true_max_distance(manifold, paths) -> np.ndarray:
    """Largest ``manifold.distance`` over the waypoints and segment midpoints of ``paths``
    ``(B, K, d)``: shape ``(B,)`` (NaN for a non-finite path)."""
    return distance_profile(manifold, paths).max(axis=-1)


def components(manifold, x) -> np.ndarray:
    """Index of the connected piece of ``manifold`` nearest each point of ``x`` ``(B, d)``: the
    arc (0 outer, 1 inner) for two moons, 0 for the connected manifolds."""
    x = jnp.asarray(x)
    if manifold.name == "two_moons":
        u = jax.vmap(manifold.coords)(x)[:, 0]
        return np.asarray(u > 1.5 * math.pi, int)
    return np.zeros(x.shape[0], int)


def action_difference(path_a, path_b, score, lam, n_quad: int = 16) -> np.ndarray:
    """``S(a) - S(b)`` per pair for paths ``(B, K, d)`` with the same endpoints, where
    ``S(x) = sum_j |x_{j+1} - x_j|^2 / (2 dt^2) + lam sum_i U(x_i)`` (dt = 1/(K-1)) is the
    discrete action whose gradient is GFM's Euclidean residual (:mod:`geomopt.gfm.solvers._action`).

    ``U`` is known only through its score ``s = -grad U``, so ``U(x_i) - U(x_0)`` is the work
    ``-sum_{j < i} int s . dx`` along the path's own segments (``n_quad``-point Gauss-Legendre
    on each), for both paths from their common start. Exact for a gradient field up to the
    quadrature; a learned score is not exactly a gradient, and then it is the work along
    each path."""
    a, b = jnp.asarray(path_a), jnp.asarray(path_b)
    if a.shape != b.shape or a.ndim != 3:
        raise ValueError(f"paths of shapes {a.shape} and {b.shape}: expected equal (B, K, d)")
    dt = 1.0 / (a.shape[1] - 1)
    t, w = np.polynomial.legendre.leggauss(n_quad)
    return np.asarray(_action_difference(a, b, score, jnp.asarray(lam, a.dtype), dt,
                                         jnp.asarray((t + 1) / 2, a.dtype),
                                         jnp.asarray(w / 2, a.dtype)))  # fmt: skip


@eqx.filter_jit
def _action_difference(a, b, score, lam, dt, t, w):
    def kinetic(p):
        return 0.5 * jnp.sum((p[:, 1:] - p[:, :-1]) ** 2, axis=(1, 2)) / dt**2

    def potential_sum_one(p):  # sum_i (U(x_i) - U(x_0)) of one path (K, d)
        dx = p[1:] - p[:-1]
        pts = p[:-1, None, :] + t[None, :, None] * dx[:, None, :]  # (K-1, Q, d)
        s = jax.vmap(score)(pts.reshape(-1, p.shape[-1])).reshape(pts.shape).astype(p.dtype)
        work = jnp.einsum("kqd,kd,q->k", s, dx, w)  # -(U(x_{j+1}) - U(x_j))
        return jnp.sum(jnp.cumsum(-work))

    def potential_sum(p):  # one path at a time: a quadrature score holds (points x nodes)
        return jax.lax.map(potential_sum_one, p)

    return kinetic(a) - kinetic(b) + lam * (potential_sum(a) - potential_sum(b))


def flag_errors(flag_on, truth_on) -> dict[str, float]:
    """Counts and rates of the support flag against the truth: a *false positive* is a path the
    flag calls off while it is on the surface, a *false negative* one it calls on while it is
    off. ``false_positive = FP / (truth on)``, ``false_negative = FN / (truth off)`` (NaN when
    there is no such path), ``error = (FP + FN) / n``."""
    flag_on = np.asarray(flag_on, bool)
    truth_on = np.asarray(truth_on, bool)
    fp = int((~flag_on & truth_on).sum())
    fn = int((flag_on & ~truth_on).sum())
    n_on, n_off = int(truth_on.sum()), int((~truth_on).sum())
    n = n_on + n_off
    return dict(
        n=n, n_on=n_on, n_off=n_off, fp=fp, fn=fn,
        false_positive=fp / n_on if n_on else float("nan"),
        false_negative=fn / n_off if n_off else float("nan"),
        error=(fp + fn) / n if n else float("nan"),
    )  # fmt: skip


def choose_threshold(support_max, truth_on, grid) -> tuple[float, int]:
    """``(threshold, errors)``: the value of ``grid`` (ascending) with the fewest flag errors
    (``support_max > threshold`` called off) against ``truth_on``; among equally good values
    the middle one of the longest run of them (the widest margin on the grid)."""
    m = np.nan_to_num(np.asarray(support_max, float), nan=np.inf)
    truth_on = np.asarray(truth_on, bool)
    grid = np.asarray(sorted(grid), float)
    errs = np.array([int(((m <= g) != truth_on).sum()) for g in grid])
    best = errs.min()
    runs, start = [], None
    for i, e in enumerate(errs):
        if e == best and start is None:
            start = i
        if e != best and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(errs) - 1))
    lo, hi = max(runs, key=lambda r: r[1] - r[0])
    return float(grid[(lo + hi) // 2]), int(best)


def insert_midpoints(paths):
    """``(B, K, d) -> (B, 2K - 1, d)``: a waypoint at the middle of every segment (the support
    check's midpoints become waypoints, so the solve evaluates the potential there)."""
    return support_points(jnp.asarray(paths))
