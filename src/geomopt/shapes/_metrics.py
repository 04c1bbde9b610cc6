"""Set-level shape metrics of the official GFM evaluation (``dist4eval.py`` of GFM-release).

Pipeline per shape: sample ``n_surface`` points on the surface (official 16,384), farthest-point
sample ``n_points`` of them (official 4,096; random start as ``torch_cluster.fps``), subtract the
centroid and divide by the largest norm. Shape distance: ``CD(a, b)`` = mean squared
nearest-neighbour distance from ``a`` to ``b`` plus that from ``b`` to ``a``; its square root is
the distance every statistic uses. With ``g_i = min_j sqrt(CD(gen_i, ref_j))`` and
``r_j = min_i sqrt(CD(gen_i, ref_j))``:

- ``CD-P = mean g``, ``CD-R = mean r``, ``CD = (CD-P + CD-R) / 2``;
- ``HD-P`` / ``HD-R`` = 99th percentile (numpy's linear interpolation) of ``g`` / ``r``,
  ``HD = max(HD-P, HD-R)``;
- ``F@tau``: precision ``mean(g < tau)``, recall ``mean(r < tau)``, harmonic mean with ``1e-8``
  in the denominator;
- ``COV`` = number of distinct ``argmin_j`` over generated shapes / number of references.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "THRESHOLDS",
    "farthest_point_sample",
    "normalize_cloud",
    "chamfer_matrix",
    "chamfer_pairs",
    "set_metrics",
    "prepare_clouds",
]

THRESHOLDS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2)


def farthest_point_sample(points, n: int, *, start=None, key=None):
    """Farthest-point sampling of ``n`` of the ``points (B, N, 3)`` (or ``(N, 3)``).

    Starts at index ``start`` (default: random per cloud from ``key``, as the official
    ``fps(..., random_start=True)``; index 0 without a key) and repeatedly adds the point
    farthest from those chosen. Returns the sampled points; clouds with ``N <= n`` are returned
    unchanged (as the official code does).
    """
    import jax
    import jax.numpy as jnp

    points = jnp.asarray(points)
    single = points.ndim == 2
    if single:
        points = points[None]
    if points.ndim != 3 or points.shape[-1] != 3:
        raise ValueError(f"points of shape {points.shape}: expected (B, N, 3) or (N, 3)")
    b, m, _ = points.shape
    if m <= n:
        return points[0] if single else points
    if start is None:
        start = jax.random.randint(key, (b,), 0, m) if key is not None else jnp.zeros(b, jnp.int32)
    start = jnp.broadcast_to(jnp.asarray(start, jnp.int32), (b,))
    idx = _fps(points, start, n)
    out = jnp.take_along_axis(points, idx[:, :, None], axis=1)
    return out[0] if single else out


def _fps_one(p, start, n):
    import jax
    import jax.numpy as jnp

    def body(i, state):
        idx, dist = state
        last = p[idx[i - 1]]
        dist = jnp.minimum(dist, jnp.sum((p - last[None, :]) ** 2, axis=1))
        return idx.at[i].set(jnp.argmax(dist).astype(jnp.int32)), dist

    idx = jnp.zeros(n, jnp.int32).at[0].set(start)
    dist = jnp.full(p.shape[0], jnp.inf, p.dtype)
    idx, _ = jax.lax.fori_loop(1, n, body, (idx, dist))
    return idx


def _fps(points, start, n):
    import jax

    return jax.jit(jax.vmap(_fps_one, in_axes=(0, 0, None)), static_argnums=2)(points, start, n)


def normalize_cloud(points):
    """Centre each cloud at its centroid and divide by its largest norm (clamped at 1e-8)."""
    points = np.asarray(points, dtype=np.float64)
    centred = points - points.mean(axis=-2, keepdims=True)
    scale = np.linalg.norm(centred, axis=-1).max(axis=-1)[..., None, None]
    return centred / np.maximum(scale, 1e-8)


def prepare_clouds(clouds, n_points: int, *, seed: int = 0) -> np.ndarray:
    """FPS to ``n_points`` (random start from ``seed``) and normalise; ``(B, N, 3)`` in."""
    import jax

    clouds = np.asarray(clouds, dtype=np.float32)
    sampled = farthest_point_sample(clouds, n_points, key=jax.random.key(seed))
    return normalize_cloud(np.asarray(sampled))


def _check_clouds(name: str, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3 or x.shape[-1] != 3 or len(x) == 0:
        raise ValueError(f"{name} clouds of shape {x.shape}: expected (n >= 1, points, 3)")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} clouds have non-finite values")
    return x


def _nn_sq(tree, points) -> float:
    """Mean squared distance from ``points`` to their nearest neighbours in ``tree`` (exact)."""
    d, _ = tree.query(points, k=1)
    return float(np.mean(d**2))


def _map_threads(fn, items):
    """``[fn(x) for x in items]`` on one thread per core (the k-d tree queries release the GIL)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    workers = min(len(items), os.cpu_count() or 1)
    if workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


def chamfer_pairs(a, b) -> np.ndarray:
    """``CD[i]`` (squared, official convention) between matched clouds ``a[i]`` and ``b[i]``
    (both ``(B, N, 3)``): exact nearest neighbours by k-d trees."""
    from scipy.spatial import cKDTree

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(f"clouds of shapes {a.shape}, {b.shape}: expected (B, N, 3) twice")

    def one(i):
        return _nn_sq(cKDTree(b[i]), a[i]) + _nn_sq(cKDTree(a[i]), b[i])

    return np.array(_map_threads(one, range(len(a))), np.float64)


def chamfer_matrix(gen, ref) -> np.ndarray:
    """``CD[i, j]`` (squared, official convention: both directions' mean squared
    nearest-neighbour distances, summed) between clouds ``gen (G, N, 3)`` and ``ref (R, M, 3)``.

    Exact nearest neighbours by k-d trees (one per cloud, built once), the rows spread over the
    cores: 4.4x faster than the dense ``N x M`` distance matrices at 1,024 points (measured on
    the shared 2-core machine, 16 x 64 clouds: 1.8 s vs 7.9 s; the same numbers to 8e-8)."""
    from scipy.spatial import cKDTree

    gen, ref = _check_clouds("gen", gen), _check_clouds("ref", ref)
    ref_trees = [cKDTree(r) for r in ref]

    def row(i):
        tree = cKDTree(gen[i])
        return [_nn_sq(rt, gen[i]) + _nn_sq(tree, r) for rt, r in zip(ref_trees, ref, strict=True)]

    return np.array(_map_threads(row, range(len(gen))), np.float64)


def set_metrics(cd_matrix, thresholds=THRESHOLDS) -> dict[str, float]:
    """CD-P/R, CD, HD-P/R, HD, F@tau (with -P/-R), COV from a squared-Chamfer matrix
    ``(n_gen, n_ref)`` exactly as the official ``calculate_metrics_from_matrix``."""
    m = np.asarray(cd_matrix, dtype=np.float64)
    if m.ndim != 2 or 0 in m.shape:
        raise ValueError(f"Chamfer matrix of shape {m.shape}: expected (n_gen >= 1, n_ref >= 1)")
    if not np.isfinite(m).all() or (m < 0).any():
        raise ValueError("Chamfer matrix must be finite and non-negative")
    dist = np.sqrt(m)
    g, r = dist.min(axis=1), dist.min(axis=0)
    out = {"CD-P": float(g.mean()), "CD-R": float(r.mean())}
    out["CD"] = 0.5 * (out["CD-P"] + out["CD-R"])
    out["HD-P"] = float(np.percentile(g, 99))
    out["HD-R"] = float(np.percentile(r, 99))
    out["HD"] = max(out["HD-P"], out["HD-R"])
    for tau in thresholds:
        p, rc = float((g < tau).mean()), float((r < tau).mean())
        out[f"F@{tau}-P"], out[f"F@{tau}-R"] = p, rc
        out[f"F@{tau}"] = 2 * p * rc / (p + rc + 1e-8)
    out["COV"] = len(np.unique(m.argmin(axis=1))) / m.shape[1]
    return out
