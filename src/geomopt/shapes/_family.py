"""A parametric family of solids with known ground truth: superquadrics, tori, capsules, boxes.

Every shape is axis-aligned and centred at the origin, fully given by its class and a few size
parameters (:class:`Shape`), and fits inside ``[-0.9, 0.9]^3``:

- ``superquadric`` ``(ax, ay, az, e1, e2)``: inside-outside function
  ``F = (|x/ax|^(2/e2) + |y/ay|^(2/e2))^(e2/e1) + |z/az|^(2/e1)``, surface ``F = 1``.
  Its signed distance is APPROXIMATED by the radial distance ``|p| (1 - F^(-e1/2))`` (exact along
  rays from the centre, Jaklic et al. 2000); the zero level set is exact.
- ``torus`` ``(R, r)`` in the xy-plane: ``sqrt((rho - R)^2 + z^2) - r`` (exact).
- ``capsule`` ``(half_length, radius)`` along z: distance to the segment minus the radius (exact).
- ``box`` ``(hx, hy, hz, rounding)``: rounded box with half-extents ``h`` and edge radius
  ``rounding`` (exact).

Meshes come from marching cubes (``skimage.measure.marching_cubes``) of the SDF on a grid over
``[-1, 1]^3``; surface points are sampled uniformly by area (``trimesh.sample``).
:func:`fit_family` fits every class's parameters (plus a translation) to a point cloud by least
squares on the SDF and returns the closest family member: the ground-truth "off-manifold" check.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "CLASSES",
    "PARAM_NAMES",
    "PARAM_RANGES",
    "Shape",
    "sdf",
    "random_shape",
    "random_shapes",
    "grid_points",
    "mesh_from_grid",
    "shape_mesh",
    "sample_surface",
    "fit_family",
]

CLASSES: tuple[str, ...] = ("superquadric", "torus", "capsule", "box")

PARAM_NAMES: dict[str, tuple[str, ...]] = {
    "superquadric": ("ax", "ay", "az", "e1", "e2"),
    "torus": ("R", "r"),
    "capsule": ("half_length", "radius"),
    "box": ("hx", "hy", "hz", "rounding"),
}

PARAM_RANGES: dict[str, tuple[tuple[float, float], ...]] = {
    "superquadric": ((0.35, 0.8), (0.35, 0.8), (0.35, 0.8), (0.4, 1.0), (0.4, 1.0)),
    "torus": ((0.4, 0.6), (0.12, 0.25)),
    "capsule": ((0.2, 0.5), (0.15, 0.3)),
    "box": ((0.3, 0.75), (0.3, 0.75), (0.3, 0.75), (0.02, 0.12)),
}
"""Uniform sampling ranges of each parameter (all shapes stay inside [-0.9, 0.9]^3)."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """One member of the family: its class and parameters (see :data:`PARAM_NAMES`)."""

    kind: str
    params: tuple[float, ...]

    def __post_init__(self):
        if self.kind not in CLASSES:
            raise ValueError(f"shape class {self.kind!r}: expected one of {CLASSES}")
        want = len(PARAM_NAMES[self.kind])
        if len(self.params) != want:
            raise ValueError(
                f"{self.kind} has {len(self.params)} parameters {self.params}, expected {want} "
                f"{PARAM_NAMES[self.kind]}"
            )
        if not all(np.isfinite(p) and p > 0 for p in self.params):
            raise ValueError(f"{self.kind} parameters {self.params}: expected finite values > 0")

    def sdf(self, points) -> np.ndarray:
        return sdf(self.kind, self.params, points)


def _superquadric(p, ax, ay, az, e1, e2):
    x, y, z = np.abs(p[:, 0]) / ax, np.abs(p[:, 1]) / ay, np.abs(p[:, 2]) / az
    f = (x ** (2 / e2) + y ** (2 / e2)) ** (e2 / e1) + z ** (2 / e1)
    r = np.linalg.norm(p, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = r * (1.0 - f ** (-e1 / 2))
    return np.where(f > 1e-12, d, -min(ax, ay, az))


def _torus(p, big_r, r):
    rho = np.hypot(p[:, 0], p[:, 1])
    return np.hypot(rho - big_r, p[:, 2]) - r


def _capsule(p, h, r):
    z = np.clip(p[:, 2], -h, h)
    return np.sqrt(p[:, 0] ** 2 + p[:, 1] ** 2 + (p[:, 2] - z) ** 2) - r


def _box(p, hx, hy, hz, rounding):
    q = np.abs(p) - (np.array([hx, hy, hz]) - rounding)[None, :]
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
    inside = np.minimum(q.max(axis=1), 0.0)
    return outside + inside - rounding


_SDF = {"superquadric": _superquadric, "torus": _torus, "capsule": _capsule, "box": _box}


def sdf(kind: str, params, points) -> np.ndarray:
    """Signed distance (negative inside) of shape ``kind`` with ``params`` at ``points (n, 3)``;
    exact except for the superquadric (radial approximation, see the module docstring)."""
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"points of shape {points.shape}: expected (n, 3)")
    if kind not in _SDF:
        raise ValueError(f"shape class {kind!r}: expected one of {CLASSES}")
    return _SDF[kind](points, *params)


def random_shape(rng: np.random.Generator, kinds: tuple[str, ...] = CLASSES) -> Shape:
    """A shape of a uniformly chosen class with uniformly drawn parameters."""
    kind = kinds[int(rng.integers(len(kinds)))]
    params = tuple(float(rng.uniform(lo, hi)) for lo, hi in PARAM_RANGES[kind])
    if kind == "box":  # the edge radius must stay below the smallest half-extent
        params = params[:3] + (min(params[3], 0.5 * min(params[:3])),)
    return Shape(kind, params)


def random_shapes(n: int, seed: int, kinds: tuple[str, ...] = CLASSES) -> list[Shape]:
    """``n`` shapes, classes cycling through ``kinds`` (balanced), parameters random."""
    rng = np.random.default_rng(seed)
    return [random_shape(rng, (kinds[i % len(kinds)],)) for i in range(n)]


def grid_points(res: int, bound: float = 1.0) -> np.ndarray:
    """The ``res^3`` points of a regular grid over ``[-bound, bound]^3`` (``ij`` order)."""
    t = np.linspace(-bound, bound, res)
    return np.stack(np.meshgrid(t, t, t, indexing="ij"), axis=-1).reshape(-1, 3)


def mesh_from_grid(values, bound: float = 1.0, level: float = 0.0):
    """Marching cubes of SDF ``values`` ``(res, res, res)`` sampled by :func:`grid_points`;
    returns a ``trimesh.Trimesh``. Raises ``ValueError`` when the level set is empty."""
    import trimesh
    from skimage import measure

    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 3 or len(set(values.shape)) != 1:
        raise ValueError(f"SDF grid of shape {values.shape}: expected (res, res, res)")
    if not np.isfinite(values).all():
        raise ValueError("SDF grid has non-finite values")
    if not (values.min() < level < values.max()):
        raise ValueError(
            f"SDF grid has no {level} crossing (values in [{values.min():.3g}, {values.max():.3g}])"
        )
    res = values.shape[0]
    spacing = 2 * bound / (res - 1)
    verts, faces, _, _ = measure.marching_cubes(values, level=level, spacing=(spacing,) * 3)
    return trimesh.Trimesh(verts - bound, faces, process=False)


def shape_mesh(shape: Shape, res: int = 64):
    """A marching-cubes mesh of ``shape`` on a ``res^3`` grid over ``[-1, 1]^3``."""
    values = shape.sdf(grid_points(res)).reshape(res, res, res)
    return mesh_from_grid(values)


def sample_surface(mesh, n: int, seed: int = 0) -> np.ndarray:
    """``n`` points uniformly by area on a mesh (``trimesh.sample.sample_surface``)."""
    import trimesh

    if len(mesh.faces) == 0 or not mesh.area > 0:
        raise ValueError("mesh has no surface to sample (no faces or zero area)")
    points, _ = trimesh.sample.sample_surface(mesh, n, seed=seed)
    return np.asarray(points, dtype=np.float64)


def _lower_upper(kind):
    lo = np.array([r[0] for r in PARAM_RANGES[kind]]) * 0.5
    hi = np.array([r[1] for r in PARAM_RANGES[kind]]) * 1.5
    if kind == "superquadric":  # exponents: the fit may leave the sampling range a little
        lo[3:], hi[3:] = 0.2, 2.0
    return np.concatenate([lo, [-0.3] * 3]), np.concatenate([hi, [0.3] * 3])


def fit_family(
    points, kinds: tuple[str, ...] = CLASSES, *, max_points: int = 256
) -> tuple[Shape, np.ndarray, float]:
    """Closest family member to a point cloud sampled from a surface.

    At most ``max_points`` of the points (an evenly strided subset) enter the fit.
    For each class: ``scipy.optimize.least_squares`` (trust-region, bounded) on the residuals
    ``sdf(points - t)`` over the class parameters and a translation ``t`` (the metrics are
    translation invariant), started at the middle of the parameter ranges and at the sizes
    suggested by the cloud's extent; the class with the smallest RMS residual wins.
    Returns ``(shape, translation, rms)``.
    """
    import scipy.optimize

    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 8:
        raise ValueError(f"points of shape {points.shape}: expected (n >= 8, 3)")
    if not np.isfinite(points).all():
        raise ValueError("points have non-finite values")
    if len(points) > max_points:
        points = points[:: -(-len(points) // max_points)]
    centre = 0.5 * (points.min(0) + points.max(0))
    half = np.maximum(0.5 * (points.max(0) - points.min(0)), 0.05)
    best = None
    for kind in kinds:
        lo, hi = _lower_upper(kind)
        mid = np.array([0.5 * (a + b) for a, b in PARAM_RANGES[kind]])
        starts = [mid]
        if kind in ("superquadric", "box"):
            starts.append(np.concatenate([half, mid[3:]]))
        elif kind == "torus":
            starts.append(np.array([0.5 * (half[0] + half[1]) - half[2], half[2]]))
        else:
            starts.append(np.array([max(half[2] - half[0], 0.05), 0.5 * (half[0] + half[1])]))
        for s in starts:
            x0 = np.clip(np.concatenate([s, np.clip(centre, -0.29, 0.29)]), lo + 1e-6, hi - 1e-6)

            def resid(theta, kind=kind):
                return sdf(kind, theta[:-3], points - theta[-3:][None, :])

            sol = scipy.optimize.least_squares(resid, x0, bounds=(lo, hi), max_nfev=100)
            rms = float(np.sqrt(np.mean(sol.fun**2)))
            if best is None or rms < best[2]:
                best = (kind, sol.x, rms)
    kind, theta, rms = best
    params = theta[:-3]
    if kind == "box":
        params = np.concatenate([params[:3], [min(params[3], 0.999 * min(params[:3]))]])
    return Shape(kind, tuple(float(v) for v in params)), theta[-3:], rms
