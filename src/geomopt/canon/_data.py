"""Point-cloud data: synthetic clouds in any dimension, shape families of controlled intrinsic
dimension, and the ModelNet10/40 HDF5 files of the official code.

Blob mixtures (``synthetic_clouds``): class ``c`` is a mixture of ``n_blobs`` Gaussian blobs
whose centres (in ``[0.15, 0.85]^d``) and widths are drawn once from ``class_seed``; a cloud
samples ``P`` points from its class mixture, then gets a random global shift of scale
``jitter`` so that clouds of one class differ by more than point noise. Points lie near
``[0, 1]^d`` (Gaussian tails are not clipped; the orders normalise each cloud anyway). Their
intrinsic dimension is ``P * d``.

Shape families (``shape_family_clouds``): a template closed curve per class, deformed by ``k``
smooth modes, points in random order -- a ``k``-dimensional family in ``R^(P x d)`` up to
permutation, whatever ``d`` is (see its docstring).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "synthetic_clouds",
    "shape_family_clouds",
    "load_modelnet_h5",
    "modelnet_files",
    "load_modelnet",
    "load_modelnet_covering",
    "subsample_points",
    "farthest_point_sample",
    "random_point_subset",
    "MODELNET_DIRS",
]


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


def shape_family_clouds(
    n_clouds: int,
    n_points: int,
    d: int,
    n_classes: int,
    *,
    k: int = 2,
    seed: int,
    class_seed: int = 1234,
    n_modes: int = 3,
    template_scale: float = 0.25,
    deform: float = 0.12,
    noise: float = 0.0,
    shuffle: bool = True,
    base_dim: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Clouds from shape families of intrinsic dimension ``k`` embedded in ``R^d``.

    Class ``c`` has a template closed curve ``T_c(t) = 1/2 + sum_{m=1..n_modes} (A_cm cos 2 pi m t
    + B_cm sin 2 pi m t)`` with ``A_cm, B_cm ~ N(0, (template_scale / m)^2 I_d)``, sampled at the
    fixed parameters ``t_i = i / P``. A cloud is ``T_c(t_i) + deform * sum_{j=1..k} theta_j
    V_j(t_i)`` with ``theta ~ U(-1, 1)^k`` and ``k`` smooth deformation modes ``V_j`` (random
    trigonometric curves of the same form, shared by all classes), plus optional i.i.d.
    ``N(0, noise^2)`` point noise, with its points in a random order (``shuffle=False`` keeps
    the template order). Without noise every class is
    the image of a smooth map from ``[-1, 1]^k``: a ``k``-dimensional family in ``R^(P x d)`` modulo
    permutations, for every ``d``. Templates and modes come from ``class_seed``; clouds from
    ``seed``. Returns float32 ``x`` ``(n_clouds, n_points, d)`` and balanced int32 labels.

    ``base_dim > 0`` draws templates and modes in ``R^base_dim`` (the same ones for every ``d``)
    and maps them into ``R^d`` by one random orthonormal frame (from ``class_seed`` and ``d``)
    about the centre ``1/2``: distances between clouds then do not change with ``d``, so a sweep
    over ``d`` changes only the ambient coordinates the orders see, not how separable the classes
    are (with ``base_dim = 0``, the default, the template spread grows with ``d``).
    """
    for name, v in (("n_clouds", n_clouds), ("n_points", n_points), ("d", d), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} {v!r}: expected a positive integer")
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes {n_classes!r}: expected a positive integer")
    if isinstance(base_dim, bool) or not isinstance(base_dim, int) or not 0 <= base_dim <= d:
        raise ValueError(f"base_dim {base_dim!r}: expected an integer in 0..d = {d}")
    for name, v in (("template_scale", template_scale), ("deform", deform), ("noise", noise)):
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{name} {v!r}: expected a finite number >= 0")
    crng = np.random.default_rng(class_seed)
    m = np.arange(1, n_modes + 1)
    t = np.arange(n_points) / n_points
    basis = np.concatenate(
        [np.cos(2 * np.pi * np.outer(t, m)), np.sin(2 * np.pi * np.outer(t, m))], 1
    )
    decay = np.concatenate([1.0 / m, 1.0 / m])[:, None]  # (2M, 1)

    gen_dim = base_dim or d

    def curves(n):
        coef = crng.standard_normal((n, 2 * n_modes, gen_dim)) * decay
        return np.einsum("pm,nmd->npd", basis, coef)  # (n, P, gen_dim)

    templates = template_scale * curves(n_classes)
    modes = curves(k)  # (k, P, gen_dim)
    if base_dim:
        frame_rng = np.random.default_rng([class_seed, d])
        frame, _ = np.linalg.qr(frame_rng.standard_normal((d, base_dim)))  # (d, base_dim)
        templates, modes = templates @ frame.T, modes @ frame.T
    templates = 0.5 + templates
    rng = np.random.default_rng(seed)
    y = np.arange(n_clouds) % n_classes
    rng.shuffle(y)
    theta = rng.uniform(-1.0, 1.0, size=(n_clouds, k))
    x = templates[y] + deform * np.einsum("nk,kpd->npd", theta, modes)
    if noise > 0:
        x = x + noise * rng.standard_normal(x.shape)
    perm = np.argsort(rng.random((n_clouds, n_points)), axis=1)
    if shuffle:
        x = np.take_along_axis(x, perm[..., None], axis=1)
    return x.astype(np.float32), y.astype(np.int32)


MODELNET_DIRS = {"modelnet40": "modelnet40_ply_hdf5_2048", "modelnet10": "modelnet10_ply_hdf5_2048"}
"""Folder of each data set under the user's data root (the official code's layout)."""


def load_modelnet_h5(
    paths: str | Path | Sequence[str | Path], *, n_points: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ModelNet HDF5 shards (keys ``data`` ``(N, 2048, 3)``, ``label`` ``(N,)`` or
    ``(N, 1)``) in the given order; with ``n_points``, subsample each cloud by the official stride
    rule (:func:`subsample_points`)."""
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
        if not np.isfinite(x).all():
            raise ValueError(f"{p}: data contains non-finite coordinates")
        if n_points is not None:
            if n_points > x.shape[1]:
                raise ValueError(f"{p}: n_points {n_points} > {x.shape[1]} points per cloud")
            x = subsample_points(x, n_points)
        xs.append(x)
        ys.append(y)
    if not xs:
        raise ValueError("load_modelnet_h5: no files given")
    return np.concatenate(xs), np.concatenate(ys)


def modelnet_files(
    root: str | Path, dataset: str, split: str, *, flag: str = "--data-root"
) -> list[Path]:
    """The sorted ``ply_data_<split>*.h5`` shards of ``dataset`` under ``root`` (``flag``: the
    command-line option that sets ``root``, named in the error).

    Looks in ``root/<MODELNET_DIRS[dataset]>/`` (the official layout) and in ``root`` itself.
    Raises ``FileNotFoundError`` saying where to put the files when there are none.
    """
    if dataset not in MODELNET_DIRS:
        raise ValueError(f"dataset {dataset!r}: expected one of {sorted(MODELNET_DIRS)}")
    if split not in ("train", "test"):
        raise ValueError(f"split {split!r}: expected 'train' or 'test'")
    root = Path(root)
    folder = root / MODELNET_DIRS[dataset]
    for where in (folder, root):
        files = sorted(where.glob(f"ply_data_{split}*.h5"))
        if files:
            return files
    raise FileNotFoundError(
        f"no ply_data_{split}*.h5 files for {dataset} in {folder} or {root}: download them with "
        f"'uv run experiments/canon/prepare_modelnet.py --dataset {dataset}' and pass the "
        f"folder it prints as {flag}, or put the HDF5 shards of {MODELNET_DIRS[dataset]} (keys "
        f"'data' N x 2048 x 3 and 'label') into {folder}/"
    )


def subsample_points(x: np.ndarray, n_points: int) -> np.ndarray:
    """The official rule: ``pc[::stride][:n_points]`` with ``stride = P // n_points`` (every
    other point for 1024 of 2048); identity when the clouds already have ``n_points``."""
    p = x.shape[-2]
    if not 1 <= n_points <= p:
        raise ValueError(f"n_points {n_points}: expected 1..{p}")
    if p == n_points:
        return x
    return x[..., :: p // n_points, :][..., :n_points, :]


def farthest_point_sample(x: np.ndarray, n_points: int, *, seed: int = 0) -> np.ndarray:
    """Farthest-point sampling of each cloud ``(N, P, d) -> (N, n_points, d)`` as the official
    numpy code does (random first point, then repeatedly the point farthest from those chosen);
    the first points come from ``seed`` (the official code draws them unseeded)."""
    if x.ndim != 3 or not 1 <= n_points <= x.shape[1]:
        raise ValueError(f"clouds {x.shape}, n_points {n_points}: expected (N, P, d), 1..P")
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    rows = np.arange(n)
    chosen = np.zeros((n, n_points), np.int64)
    dist = np.full(x.shape[:2], np.inf)
    far = rng.integers(0, x.shape[1], size=n)
    for i in range(n_points):
        chosen[:, i] = far
        c = x[rows, far][:, None]
        dist = np.minimum(dist, ((x - c) ** 2).sum(-1))
        far = np.argmax(dist, axis=1)
    return np.take_along_axis(x, chosen[..., None], axis=1)


def load_modelnet(
    root: str | Path,
    dataset: str = "modelnet40",
    *,
    n_points: int = 1024,
    sampling: str = "stride",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)`` with the official classification preprocessing.

    ``sampling="stride"`` (official default): ``pc[::2][:1024]`` of the 2048-point clouds;
    ``"fps"``: farthest-point sampling (the official option). The per-cloud normalisation
    (per-axis minimum, one global scale) happens inside the models, as in the official code.
    """
    if sampling not in ("stride", "fps"):
        raise ValueError(f"sampling {sampling!r}: expected 'stride' or 'fps'")
    out = []
    for split in ("train", "test"):
        x, y = load_modelnet_h5(modelnet_files(root, dataset, split))
        if n_points > x.shape[1]:
            raise ValueError(f"n_points {n_points} > {x.shape[1]} points per cloud in {root}")
        x = (
            subsample_points(x, n_points)
            if sampling == "stride"
            else farthest_point_sample(x, n_points, seed=seed)
        )
        out += [x, y]
    return tuple(out)


def random_point_subset(x: np.ndarray, n_points: int, *, seed: int = 0) -> np.ndarray:
    """``n_points`` distinct points of each cloud ``(N, P, d) -> (N, n_points, d)``, drawn
    uniformly without replacement and kept in the order drawn (not in file order): for cloud
    ``i``, the first ``n_points`` entries of a uniformly random permutation of ``0..P-1``, from
    ``np.random.default_rng(seed)``, one permutation per cloud in turn."""
    if x.ndim != 3 or not 1 <= n_points <= x.shape[1]:
        raise ValueError(f"clouds {x.shape}, n_points {n_points}: expected (N, P, d), 1..P")
    rng = np.random.default_rng(seed)
    rows = np.tile(np.arange(x.shape[1], dtype=np.int32), (x.shape[0], 1))
    idx = rng.permuted(rows, axis=1)[:, :n_points]
    return np.take_along_axis(x, idx[..., None], axis=1)


def load_modelnet_covering(
    root: str | Path, dataset: str = "modelnet10", *, n_points: int = 256, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Clouds for the covering proxies: ``n_points`` points per cloud drawn at random
    (:func:`random_point_subset`; training clouds from ``seed``, test clouds from ``seed + 1``),
    each cloud mapped to ``[0, 1]^3`` by the covering experiment's normalisation (subtract the
    global scalar minimum, divide by the global scalar maximum of the shifted cloud).

    The official covering data (``ModelNet/data_creation/create_data.py``) samples ``P = 256``
    points per mesh with PyG ``SamplePoints`` -- i.i.d. points, uniform on the surface (faces
    drawn by area, uniform within a face), unseeded -- and keeps them in the order drawn (the
    ``l2`` proxy compares clouds in that order). The meshes are not available here, only the
    2048 surface samples per mesh of the HDF5 release; a uniformly random subset of them, in
    random order, is distributed exactly as 256 i.i.d. draws from those 2048 points, and as 256
    i.i.d. surface samples to the extent that the 2048 are. (The stride rule of
    :func:`subsample_points` is the classification experiment's, not this one's.)
    """
    out = []
    for offset, split in enumerate(("train", "test")):
        x, y = load_modelnet_h5(modelnet_files(root, dataset, split))
        x = random_point_subset(x, n_points, seed=seed + offset)
        z = x - x.min(axis=(1, 2), keepdims=True)
        m = z.max(axis=(1, 2), keepdims=True)
        out += [(z / np.where(m > 0, m, 1.0)).astype(np.float32), y]
    return tuple(out)
