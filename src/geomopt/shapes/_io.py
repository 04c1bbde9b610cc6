"""Users' own shapes: the official set-level evaluation on folders of meshes or point clouds.

A folder holds meshes (``.obj``, ``.off``, or ``.ply`` with faces; read by ``trimesh``) or point
clouds (``.ply`` without faces, ``.npy`` arrays of shape ``(N, 3)``). Meshes are sampled
uniformly by area (``n_surface`` points, official 16,384) and must be watertight (a closed
surface, as marching cubes produces; an open one is refused, since the metrics assume closed
surfaces); clouds must hold at least ``n_points`` finite points. Then every shape is
farthest-point sampled to ``n_points`` (official 4,096), normalised, and scored with
:func:`geomopt.shapes.set_metrics` (CD, HD, F@tau, COV). Every bad file is named in the error.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ._family import sample_surface
from ._metrics import THRESHOLDS, chamfer_matrix, prepare_clouds, set_metrics

__all__ = ["SUFFIXES", "load_shape", "load_folder", "evaluate_folders"]

SUFFIXES = (".obj", ".off", ".ply", ".npy")


def _check_cloud(path: Path, pts, n_points: int) -> np.ndarray:
    pts = np.asarray(pts)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"{path}: point array of shape {pts.shape}, expected (N, 3)")
    if not np.issubdtype(pts.dtype, np.number):
        raise ValueError(f"{path}: point array of dtype {pts.dtype}, expected numbers")
    if not np.isfinite(pts).all():
        raise ValueError(f"{path}: {int((~np.isfinite(pts)).any(1).sum())} non-finite points")
    if len(pts) < n_points:
        raise ValueError(f"{path}: {len(pts)} points, expected at least n_points={n_points}")
    return pts.astype(np.float64)


def load_shape(path, *, n_surface: int = 16384, n_points: int = 4096, seed: int = 0) -> np.ndarray:
    """The points of one shape file: ``n_surface`` surface samples of a mesh, or the points
    of a cloud. Raises ``ValueError`` naming the file for unreadable, empty, open
    (not watertight) or non-finite meshes, and malformed clouds."""
    import trimesh

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{path}: unsupported suffix {suffix!r}, expected one of {SUFFIXES}")
    if suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a readable .npy array ({e})") from e
        return _check_cloud(path, arr, n_points)
    try:
        obj = trimesh.load(path, process=False)
    except Exception as e:  # trimesh raises many types for a bad file
        raise ValueError(f"{path}: not a readable {suffix} file ({type(e).__name__}: {e})") from e
    if isinstance(obj, trimesh.Scene):
        meshes = [g for g in obj.geometry.values() if isinstance(g, trimesh.Trimesh)]
        if not meshes:
            raise ValueError(f"{path}: no mesh in the file")
        obj = trimesh.util.concatenate(meshes)
    if isinstance(obj, trimesh.PointCloud):
        return _check_cloud(path, obj.vertices, n_points)
    if not isinstance(obj, trimesh.Trimesh) or len(obj.faces) == 0:
        if suffix == ".ply" and hasattr(obj, "vertices"):
            return _check_cloud(path, obj.vertices, n_points)
        raise ValueError(f"{path}: no faces; expected a triangle mesh")
    if not np.isfinite(obj.vertices).all():
        raise ValueError(f"{path}: mesh has non-finite vertex coordinates")
    if not obj.area > 0:
        raise ValueError(f"{path}: mesh has zero surface area")
    if not obj.is_watertight:
        raise ValueError(
            f"{path}: mesh is not watertight (open boundary or non-manifold edges); the "
            "metrics compare closed surfaces; repair it (e.g. trimesh.repair.fill_holes)"
        )
    return sample_surface(obj, n_surface, seed=seed)


def load_folder(folder, *, pattern: str | None = None, **kw) -> tuple[list[str], list]:
    """``(names, point arrays)`` of every shape file in ``folder`` (sorted by name), optionally
    only names matching the regular expression ``pattern`` (e.g. ``"step[3-6]"``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES)
    if pattern is not None:
        rx = re.compile(pattern)
        files = [p for p in files if rx.search(p.name)]
    if not files:
        raise ValueError(f"{folder}: no shape files ({', '.join(SUFFIXES)}) match {pattern!r}")
    return [p.name for p in files], [load_shape(p, **kw) for p in files]


def evaluate_folders(
    gen_dir,
    ref_dir,
    *,
    n_surface: int = 16384,
    n_points: int = 4096,
    step_filter: str | None = None,
    thresholds=THRESHOLDS,
    seed: int = 0,
) -> dict:
    """The official evaluation of the generated shapes in ``gen_dir`` against the references in
    ``ref_dir``. Returns the metrics plus ``n_gen``, ``n_ref`` and, per generated file, the
    distance to its nearest reference (``nearest``)."""
    kw = dict(n_surface=n_surface, n_points=n_points, seed=seed)
    gen_names, gen = load_folder(gen_dir, pattern=step_filter, **kw)
    ref_names, ref = load_folder(ref_dir, **kw)

    def prep(clouds):
        return np.concatenate([prepare_clouds(c[None], n_points, seed=seed) for c in clouds])

    g, r = prep(gen), prep(ref)
    cd = chamfer_matrix(g, r)
    out = set_metrics(cd, thresholds)
    out.update(n_gen=len(gen_names), n_ref=len(ref_names))
    out["nearest"] = dict(zip(gen_names, np.sqrt(cd.min(1)).tolist(), strict=True))
    return out
