"""Synthetic manifolds: noisy samplers, closest-point projection, distances, normals, coordinates.

Six shapes, all of codimension one (curves in the plane, surfaces in space), so each has a unit
normal and a signed distance:

=============  =====  ===================================================================  =======
name           space  embedding of the intrinsic coordinates ``u``                          noise
=============  =====  ===================================================================  =======
``circle``     R^2    ``r (cos t, sin t)``, r = 1, t ~ U[0, 2 pi)                           0.01
``sphere``     R^3    ``r (sin th cos ph, sin th sin ph, cos th)``, r = 1, area-uniform     0.01
``torus``      R^3    ``((R + r cos th) cos ph, (R + r cos th) sin ph, r sin th)``,         0.005
                      R = 1.2, r = 0.4, th, ph ~ U[0, 2 pi) (the official code's sampler)
``twin_peaks`` R^3    ``(u, v, 0.5 exp(-(u^2 + v^2) / (2 * 0.5^2)))``, u, v ~ U[-1, 1]       0.01
``swiss_roll`` R^3    ``(a t cos t, h, a t sin t)``, a = 0.1, t ~ U[1.5 pi, 4.5 pi],         0.01
                      h ~ U[-1, 1] (scikit-learn's roll scaled by 0.1, height 2)
``two_moons``  R^2    outer arc ``(cos s, sin s)``, s in [0, pi], inner arc                  0.01
                      ``(1 - cos s', 0.5 - sin s')``, s' in [0, pi] (scikit-learn's moons)
=============  =====  ===================================================================  =======

Torus and twin peaks follow the GFM paper's official code (its "twin peaks" is a single
Gaussian bump). ``sample`` draws the intrinsic coordinates as stated (uniform in the
parameters, except the sphere which is area-uniform) and adds isotropic Gaussian noise of
standard deviation ``noise`` in the ambient space.

Closest points (``project``) are exact in closed form for the circle, sphere, torus and two
moons (a circular arc's closest point is radial, or an end point). For twin peaks and the swiss
roll there is no closed form; they are computed numerically and documented on each class:
projected Newton on the parameterisation from a good initial guess (several guesses for the
roll, one per turn), run for a fixed number of steps, which converges to machine precision for
the points the tests check (within ~0.3 of the surface), validated against brute-force dense
sampling in ``tests/test_manifolds.py``.

Every method acts on ONE point ``x`` of shape ``(ambient_dim,)`` (vmap for batches); all are
jittable. ``distance`` is unsigned; ``signed_distance`` is positive on the side the normal
points to (outside for the closed circle, sphere and torus; up for twin peaks; away from the
roll's axis for the swiss roll; away from each arc's centre for two moons). Near a boundary
(twin peaks' square edge, the roll's ends, the moons' tips) the closest point may be on the
boundary; then ``|signed_distance| = distance`` still holds and the sign is that of
``<x - project(x), normal(x)>``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from geomopt.manifolds._base import Manifold
from geomopt.manifolds._closed_form import Circle, Sphere, Torus, TwoMoons
from geomopt.manifolds._newton import SwissRoll, TwinPeaks

__all__ = [
    "Manifold",
    "Circle",
    "Sphere",
    "Torus",
    "TwinPeaks",
    "SwissRoll",
    "TwoMoons",
    "MANIFOLDS",
    "get_manifold",
    "mean_distance",
]

MANIFOLDS: dict[str, type[Manifold]] = {
    "circle": Circle,
    "sphere": Sphere,
    "torus": Torus,
    "twin_peaks": TwinPeaks,
    "swiss_roll": SwissRoll,
    "two_moons": TwoMoons,
}


def get_manifold(name: str, **kwargs) -> Manifold:
    """The manifold called ``name`` (one of :data:`MANIFOLDS`), with optional parameters."""
    if name not in MANIFOLDS:
        raise ValueError(f"unknown manifold {name!r}; expected one of {sorted(MANIFOLDS)}")
    return MANIFOLDS[name](**kwargs)


@eqx.filter_jit
def _mean_distance(manifold: Manifold, points: Array) -> Array:
    return jnp.mean(jax.vmap(manifold.distance)(points))


def mean_distance(manifold: Manifold, points: Float[Array, "n ambient"]) -> Float[Array, ""]:
    """Mean unsigned distance of a batch of points to ``manifold`` (the manifold error)."""
    points = jnp.asarray(points)
    if points.ndim != 2 or points.shape[1] != manifold.ambient_dim:
        raise ValueError(
            f"points of shape {points.shape}: expected (n, {manifold.ambient_dim}) "
            f"for {manifold.name}"
        )
    return _mean_distance(manifold, points)
