"""Prior metrics: any function ``x -> G(x)``, a symmetric positive-definite ``d x d`` matrix.

The solvers accept any callable; the classes here are Equinox modules so their parameters are
arrays (changing ``alpha`` or a bandwidth does not recompile a jitted solve) and the metric can
be passed straight through ``eqx.filter_jit``.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "Metric",
    "Euclidean",
    "Conformal",
    "Diagonal",
    "TorusMetric",
    "HalfPlane",
    "SphereCoordinates",
    "torus_frame",
    "sphere_to_cartesian",
]


class Metric(eqx.Module):
    """Base class of the shipped prior metrics: ``metric(x)`` returns ``G(x)`` (d x d, SPD)."""

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, "d d"]:
        raise NotImplementedError


class Euclidean(Metric):
    """``G(x) = I``: the Euclidean prior (GFM's default)."""

    def __call__(self, x):
        return jnp.eye(x.shape[-1], dtype=x.dtype)


class Conformal(Metric):
    """``G(x) = c(x) I`` for a positive scalar field ``c``."""

    factor: Callable[[Array], Array]

    def __call__(self, x):
        return self.factor(x) * jnp.eye(x.shape[-1], dtype=x.dtype)


class Diagonal(Metric):
    """``G(x) = diag(g(x))`` for a positive vector field ``g``."""

    diagonal: Callable[[Array], Array]

    def __call__(self, x):
        return jnp.diag(self.diagonal(x))


def torus_frame(x: Float[Array, " 3"], major_radius) -> tuple[Array, Array, Array]:
    """Orthonormal frame ``(e_theta, e_phi, n)`` of the torus tube coordinates at ``x``.

    ``phi = atan2(y, x)`` (toroidal), ``theta = atan2(z, rho - R)`` (poloidal), ``rho = |(x, y)|``;
    ``e_theta`` points along increasing theta, ``e_phi`` along increasing phi and ``n`` away from
    the tube's centre circle. Undefined on the z-axis and on the centre circle.
    """
    rho = jnp.sqrt(x[0] ** 2 + x[1] ** 2)
    phi = jnp.arctan2(x[1], x[0])
    theta = jnp.arctan2(x[2], rho - major_radius)
    cp, sp, ct, st = jnp.cos(phi), jnp.sin(phi), jnp.cos(theta), jnp.sin(theta)
    zero = jnp.zeros_like(cp)
    e_theta = jnp.stack([-st * cp, -st * sp, ct])
    e_phi = jnp.stack([-sp, cp, zero])
    normal = jnp.stack([ct * cp, ct * sp, st])
    return e_theta, e_phi, normal


class TorusMetric(Metric):
    """The paper's torus prior ``G = alpha e_th e_th^T + beta e_ph e_ph^T + gamma n n^T``.

    ``alpha`` weighs poloidal motion (around the tube), ``beta`` toroidal motion (around the hole)
    and ``gamma`` motion along the normal; the frame is :func:`torus_frame` at ``x``.
    Paper settings: (alpha, beta) in {(0.05, 0.5), (5, 0.1), (1, 0.01)}, gamma = 1, R = 1.2.
    """

    alpha: Array
    beta: Array
    gamma: Array
    major_radius: Array

    def __init__(self, alpha=1.0, beta=1.0, gamma=1.0, major_radius=1.2):
        self.alpha = jnp.asarray(alpha, dtype=float)
        self.beta = jnp.asarray(beta, dtype=float)
        self.gamma = jnp.asarray(gamma, dtype=float)
        self.major_radius = jnp.asarray(major_radius, dtype=float)

    def __call__(self, x):
        if x.shape != (3,):
            raise ValueError(f"TorusMetric acts on points of shape (3,), got {x.shape}")
        e_t, e_p, n = torus_frame(x, self.major_radius.astype(x.dtype))
        a, b, c = (p.astype(x.dtype) for p in (self.alpha, self.beta, self.gamma))
        return a * jnp.outer(e_t, e_t) + b * jnp.outer(e_p, e_p) + c * jnp.outer(n, n)


class HalfPlane(Metric):
    """The hyperbolic (Poincare) upper half-space metric ``G(x) = I / x_d^2`` (needs ``x_d > 0``).

    In two dimensions its geodesics are vertical lines and semicircles centred on the x-axis.
    ``gfm.solve`` rejects endpoints or initial paths with ``x_d <= 0`` (:meth:`check_points`).
    """

    def check_points(self, x, name: str = "x") -> None:
        """Raise ``ValueError`` naming the first point of ``x`` (``(..., d)``, on the host)
        outside the upper half-space ``x_d > 0``."""
        x = np.asarray(x)
        bad = ~(x[..., -1] > 0)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            label = f"{name}[{', '.join(map(str, idx))}]" if idx else name
            raise ValueError(
                f"{label} = {x[idx].tolist()} has x_d = {float(x[idx][-1])}: the half-plane "
                "metric needs x_d > 0"
            )

    def __call__(self, x):
        return jnp.eye(x.shape[-1], dtype=x.dtype) / x[-1] ** 2


class SphereCoordinates(Metric):
    """The round unit-sphere metric in polar/azimuthal coordinates ``(theta, phi)``:
    ``G = diag(1, sin(theta)^2)``. Geodesics map to great-circle arcs under
    :func:`sphere_to_cartesian`. Degenerate at the poles (theta = 0, pi).
    """

    def __call__(self, x):
        if x.shape != (2,):
            raise ValueError(f"SphereCoordinates acts on (theta, phi) of shape (2,), got {x.shape}")
        one = jnp.ones_like(x[0])
        return jnp.diag(jnp.stack([one, jnp.sin(x[0]) ** 2]))


def sphere_to_cartesian(coords: Float[Array, "... 2"]) -> Float[Array, "... 3"]:
    """Map ``(theta, phi)`` (polar angle from +z, azimuth) to the unit sphere in R^3."""
    theta, phi = coords[..., 0], coords[..., 1]
    st = jnp.sin(theta)
    return jnp.stack([st * jnp.cos(phi), st * jnp.sin(phi), jnp.cos(theta)], axis=-1)
