"""The :class:`Manifold` base class: point / coordinate checks and the methods every shape
shares (noisy sampling, projection, distances, normals), built on the four a shape implements.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

_TWO_PI = 2.0 * math.pi


def _safe_norm(v: Array) -> Array:
    """Euclidean norm with a finite gradient at zero."""
    sq = jnp.sum(v * v)
    safe = jnp.where(sq > 0, sq, 1.0)
    return jnp.where(sq > 0, jnp.sqrt(safe), 0.0)


def _check_noise(noise) -> None:
    if isinstance(noise, (int, float)) and not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise {noise!r}: expected a finite standard deviation >= 0")


class Manifold(eqx.Module):
    """A codimension-one manifold in ``R^ambient_dim`` with intrinsic coordinates ``u``.

    Subclasses implement :meth:`embed`, :meth:`coords` (coordinates of the closest point),
    :meth:`normal_at` (unit normal at coordinates) and :meth:`sample_coords`; the rest is shared.
    """

    name: str = eqx.field(static=True)
    ambient_dim: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    default_noise: float = eqx.field(static=True)

    # -- to implement -------------------------------------------------------------------
    def embed(self, u: Float[Array, " dim"]) -> Float[Array, " ambient"]:
        """The point with intrinsic coordinates ``u``."""
        raise NotImplementedError

    def coords(self, x: Float[Array, " ambient"]) -> Float[Array, " dim"]:
        """Intrinsic coordinates of the closest point of the manifold to ``x``."""
        raise NotImplementedError

    def normal_at(self, u: Float[Array, " dim"]) -> Float[Array, " ambient"]:
        """Unit normal at the point with coordinates ``u``."""
        raise NotImplementedError

    def sample_coords(self, key: PRNGKeyArray, n: int) -> Float[Array, "n dim"]:
        """``n`` intrinsic coordinates drawn from the sampling distribution."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    def _check_point(self, x) -> Array:
        x = jnp.asarray(x)
        if x.shape != (self.ambient_dim,):
            raise ValueError(
                f"{self.name}: point of shape {x.shape}, expected ({self.ambient_dim},); "
                "vmap over batches"
            )
        return x

    def _check_coords(self, u) -> Array:
        u = jnp.asarray(u)
        if u.shape != (self.dim,):
            raise ValueError(f"{self.name}: coordinates of shape {u.shape}, expected ({self.dim},)")
        return u

    def sample(
        self, key: PRNGKeyArray, n: int, noise: float | Array | None = None
    ) -> Float[Array, "n ambient"]:
        """``n`` points: clean samples plus isotropic Gaussian noise of std ``noise``.

        ``noise=None`` uses :attr:`default_noise` (the paper's value where it gives one).
        """
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n {n!r}: expected a positive integer number of samples")
        noise = self.default_noise if noise is None else noise
        _check_noise(noise)
        return _sample(self, key, n, jnp.asarray(noise, jnp.float32))

    def project(self, x: Float[Array, " ambient"]) -> Float[Array, " ambient"]:
        """The closest point of the manifold to ``x``."""
        return self.embed(self.coords(self._check_point(x)))

    def distance(self, x: Float[Array, " ambient"]) -> Float[Array, ""]:
        """Unsigned Euclidean distance from ``x`` to the manifold."""
        x = self._check_point(x)
        return _safe_norm(x - self.project(x))

    def signed_distance(self, x: Float[Array, " ambient"]) -> Float[Array, ""]:
        """Distance with the sign of ``<x - project(x), normal(x)>`` (see the module doc)."""
        x = self._check_point(x)
        u = self.coords(x)
        diff = x - self.embed(u)
        side = jnp.dot(diff, self.normal_at(u))
        return jnp.where(side < 0, -1.0, 1.0) * _safe_norm(diff)

    def normal(self, x: Float[Array, " ambient"]) -> Float[Array, " ambient"]:
        """Unit normal of the manifold at the closest point to ``x``."""
        return self.normal_at(self.coords(self._check_point(x)))


@eqx.filter_jit
def _sample(manifold: Manifold, key, n: int, noise: Array) -> Array:
    ku, kn = jax.random.split(key)
    clean = jax.vmap(manifold.embed)(manifold.sample_coords(ku, n))
    return clean + noise.astype(clean.dtype) * jax.random.normal(kn, clean.shape, clean.dtype)
