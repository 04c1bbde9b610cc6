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


def _pair_cd(a, b):
    import jax.numpy as jnp

    d2 = jnp.sum(a**2, 1)[:, None] + jnp.sum(b**2, 1)[None, :] - 2.0 * a @ b.T
    d2 = jnp.maximum(d2, 0.0)
    return jnp.mean(jnp.min(d2, axis=1)) + jnp.mean(jnp.min(d2, axis=0))


def _chamfer_block(gen, ref):
    import jax

    return jax.vmap(lambda a: jax.vmap(lambda b: _pair_cd(a, b))(ref))(gen)


def chamfer_pairs(a, b) -> np.ndarray:
    """``CD[i]`` (squared, official convention) between matched clouds ``a[i]`` and ``b[i]``
    (both ``(B, N, 3)``)."""
    import jax

    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(f"clouds of shapes {a.shape}, {b.shape}: expected (B, N, 3) twice")
    return np.asarray(jax.jit(jax.vmap(_pair_cd))(a, b), np.float64)


def chamfer_matrix(gen, ref, *, block: int = 16) -> np.ndarray:
    """``CD[i, j]`` (squared, official convention) between clouds ``gen (G, N, 3)`` and
    ``ref (R, M, 3)``, computed in blocks of ``block`` generated shapes."""
    import jax

    gen = np.asarray(gen, dtype=np.float32)
    ref = np.asarray(ref, dtype=np.float32)
    for name, x in (("gen", gen), ("ref", ref)):
        if x.ndim != 3 or x.shape[-1] != 3 or len(x) == 0:
            raise ValueError(f"{name} clouds of shape {x.shape}: expected (n >= 1, points, 3)")
        if not np.isfinite(x).all():
            raise ValueError(f"{name} clouds have non-finite values")
    fn = jax.jit(_chamfer_block)
    rows = []
    for i in range(0, len(gen), block):
        part = gen[i : i + block]
        pad = block - len(part)
        if pad:  # one compiled shape for every block
            part = np.concatenate([part, np.repeat(part[-1:], pad, 0)])
        rows.append(np.asarray(fn(part, ref))[: block - pad])
    return np.concatenate(rows).astype(np.float64)


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
