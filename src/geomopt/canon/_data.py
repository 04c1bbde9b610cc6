"""Point-cloud classification data: synthetic clouds in any dimension, and ModelNet40 HDF5 files.

Synthetic classes (``synthetic_clouds``): class ``c`` is a mixture of ``n_blobs`` Gaussian blobs
whose centres (in ``[0.15, 0.85]^d``) and widths are drawn once from ``class_seed``; a cloud
samples ``P`` points from its class mixture, then gets a random global shift of scale
``jitter`` so that clouds of one class differ by more than point noise. Points lie near
``[0, 1]^d`` (Gaussian tails are not clipped; the orders normalise each cloud anyway).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["synthetic_clouds", "load_modelnet_h5"]


def synthetic_clouds(
    n_clouds: int,
    n_points: int,
    d: int,
    n_classes: int,
    *,
    seed: int,
    class_seed: int = 1234,
    n_blobs: int = 3,
    jitter: float = 0.05,
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: float32 ``x`` ``(n_clouds, n_points, d)``, balanced labels ``y``."""
    for name, v in (("n_clouds", n_clouds), ("n_points", n_points), ("d", d)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} {v!r}: expected a positive integer")
    if not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes {n_classes!r}: expected a positive integer")
    crng = np.random.default_rng(class_seed)
    centres = crng.uniform(0.15, 0.85, size=(n_classes, n_blobs, d))
    widths = crng.uniform(0.03, 0.12, size=(n_classes, n_blobs, 1))
    rng = np.random.default_rng(seed)
    y = np.arange(n_clouds) % n_classes
    rng.shuffle(y)
    blob = rng.integers(0, n_blobs, size=(n_clouds, n_points))
    c = centres[y[:, None], blob]
    w = widths[y[:, None], blob]
    shift = jitter * rng.standard_normal((n_clouds, 1, d))
    x = c + w * rng.standard_normal((n_clouds, n_points, d)) + shift
    return x.astype(np.float32), y.astype(np.int32)


def load_modelnet_h5(
    paths: str | Path | Sequence[str | Path], *, n_points: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ModelNet40 HDF5 shards (keys ``data`` ``(N, 2048, 3)``, ``label`` ``(N,)``
    or ``(N, 1)``); keep the first ``n_points`` points of each cloud (the official 1024)."""
    import h5py

    if isinstance(paths, (str, Path)):
        paths = [paths]
    xs, ys = [], []
    for p in paths:
        with h5py.File(p, "r") as f:
            for key in ("data", "label"):
                if key not in f:
                    raise KeyError(f"{p}: no dataset {key!r}; found {sorted(f.keys())}")
            x = np.asarray(f["data"], np.float32)
            y = np.asarray(f["label"]).reshape(-1).astype(np.int32)
        if x.ndim != 3 or len(x) != len(y):
            raise ValueError(f"{p}: data {x.shape} and label {y.shape} do not match (N, P, d)/(N,)")
        if n_points is not None:
            if n_points > x.shape[1]:
                raise ValueError(f"{p}: n_points {n_points} > {x.shape[1]} points per cloud")
            x = x[:, :n_points]
        xs.append(x)
        ys.append(y)
    if not xs:
        raise ValueError("load_modelnet_h5: no files given")
    return np.concatenate(xs), np.concatenate(ys)
