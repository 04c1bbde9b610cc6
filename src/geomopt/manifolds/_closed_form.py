"""The shapes with closest points in closed form: circle, sphere, torus and two moons."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from geomopt.manifolds._base import _TWO_PI, Manifold, _check_noise, _safe_norm


class Circle(Manifold):
    """Circle of radius ``radius`` about the origin; ``u = (t,)`` the angle in ``(-pi, pi]``."""

    radius: float = eqx.field(static=True)

    def __init__(self, radius: float = 1.0, default_noise: float = 0.01):
        if not radius > 0:
            raise ValueError(f"radius {radius!r}: expected > 0")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "circle", 2, 1
        self.radius, self.default_noise = float(radius), float(default_noise)

    def embed(self, u):
        t = self._check_coords(u)[0]
        return self.radius * jnp.stack([jnp.cos(t), jnp.sin(t)])

    def coords(self, x):
        x = self._check_point(x)
        return jnp.arctan2(x[1], x[0])[None]

    def normal_at(self, u):
        t = self._check_coords(u)[0]
        return jnp.stack([jnp.cos(t), jnp.sin(t)])

    def sample_coords(self, key, n):
        return jax.random.uniform(key, (n, 1), minval=0.0, maxval=_TWO_PI)

    def signed_distance(self, x):
        """``|x| - radius`` (positive outside)."""
        return _safe_norm(self._check_point(x)) - self.radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


class Sphere(Manifold):
    """Sphere of radius ``radius``; ``u = (theta, phi)`` polar angle in [0, pi], azimuth.

    Samples are area-uniform (``cos theta ~ U[-1, 1]``).
    """

    radius: float = eqx.field(static=True)

    def __init__(self, radius: float = 1.0, default_noise: float = 0.01):
        if not radius > 0:
            raise ValueError(f"radius {radius!r}: expected > 0")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "sphere", 3, 2
        self.radius, self.default_noise = float(radius), float(default_noise)

    def embed(self, u):
        return self.radius * self.normal_at(u)

    def coords(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return jnp.stack([jnp.arctan2(rho, x[2]), jnp.arctan2(x[1], x[0])])

    def normal_at(self, u):
        th, ph = self._check_coords(u)
        s = jnp.sin(th)
        return jnp.stack([s * jnp.cos(ph), s * jnp.sin(ph), jnp.cos(th)])

    def sample_coords(self, key, n):
        kz, kp = jax.random.split(key)
        cos_th = jax.random.uniform(kz, (n,), minval=-1.0, maxval=1.0)
        ph = jax.random.uniform(kp, (n,), minval=0.0, maxval=_TWO_PI)
        return jnp.stack([jnp.arccos(cos_th), ph], axis=-1)

    def signed_distance(self, x):
        """``|x| - radius`` (positive outside)."""
        return _safe_norm(self._check_point(x)) - self.radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


class Torus(Manifold):
    """Torus ``((R + r cos th) cos ph, (R + r cos th) sin ph, r sin th)``, ``u = (th, ph)``.

    ``th`` is the poloidal (tube) angle, ``ph`` the toroidal angle, both sampled uniformly as in
    the official code (so the sampling density is not area-uniform). Signed distance
    ``sqrt((rho - R)^2 + z^2) - r`` with ``rho = sqrt(x^2 + y^2)`` (positive outside the tube).
    """

    major_radius: float = eqx.field(static=True)
    minor_radius: float = eqx.field(static=True)

    def __init__(
        self, major_radius: float = 1.2, minor_radius: float = 0.4, default_noise: float = 0.005
    ):
        if not 0 < minor_radius < major_radius:
            raise ValueError(f"radii R={major_radius!r}, r={minor_radius!r}: expected 0 < r < R")
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "torus", 3, 2
        self.major_radius, self.minor_radius = float(major_radius), float(minor_radius)
        self.default_noise = float(default_noise)

    def embed(self, u):
        th, ph = self._check_coords(u)
        ring = self.major_radius + self.minor_radius * jnp.cos(th)
        return jnp.stack([ring * jnp.cos(ph), ring * jnp.sin(ph), self.minor_radius * jnp.sin(th)])

    def coords(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return jnp.stack([jnp.arctan2(x[2], rho - self.major_radius), jnp.arctan2(x[1], x[0])])

    def normal_at(self, u):
        th, ph = self._check_coords(u)
        c = jnp.cos(th)
        return jnp.stack([c * jnp.cos(ph), c * jnp.sin(ph), jnp.sin(th)])

    def sample_coords(self, key, n):
        return jax.random.uniform(key, (n, 2), minval=0.0, maxval=_TWO_PI)

    def signed_distance(self, x):
        x = self._check_point(x)
        rho = _safe_norm(x[:2])
        return _safe_norm(jnp.stack([rho - self.major_radius, x[2]])) - self.minor_radius

    def distance(self, x):
        return jnp.abs(self.signed_distance(x))


class TwoMoons(Manifold):
    """scikit-learn's two moons as two unit half-circles; ``u = (s,)``.

    ``s in [0, pi]``: outer arc ``(cos s, sin s)`` (centre ``(0, 0)``). ``s in [2 pi, 3 pi]``:
    inner arc ``(1, 0.5) + (cos a, sin a)`` with ``a = s - pi in [pi, 2 pi]``, i.e.
    ``(1 - cos s', 0.5 - sin s')`` with ``s' = s - 2 pi in [0, pi]`` (the gap between the two
    ranges keeps the arcs' end points distinct). Samples pick a moon with probability 1/2 and a
    uniform angle on it. Closest points are exact: on a circular arc it is the radial point when
    the direction from the centre lies within the arc, otherwise the nearer end point. The
    normal points away from each arc's centre.
    """

    def __init__(self, default_noise: float = 0.01):
        _check_noise(default_noise)
        self.name, self.ambient_dim, self.dim = "two_moons", 2, 1
        self.default_noise = float(default_noise)

    @staticmethod
    def _centre_angle(s):
        """Centre of the arc holding ``s`` and the angle of the point about that centre."""
        inner = s > 1.5 * math.pi
        dtype = jnp.result_type(s)
        centre = jnp.where(inner, jnp.array([1.0, 0.5], dtype), jnp.zeros(2, dtype))
        return centre, jnp.where(inner, s - math.pi, s)

    def embed(self, u):
        s = self._check_coords(u)[0]
        centre, angle = self._centre_angle(s)
        return centre + jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    def normal_at(self, u):
        _, angle = self._centre_angle(self._check_coords(u)[0])
        return jnp.stack([jnp.cos(angle), jnp.sin(angle)])

    def sample_coords(self, key, n):
        s = jax.random.uniform(key, (n, 1), minval=0.0, maxval=_TWO_PI)
        return jnp.where(s >= math.pi, s + math.pi, s)

    def coords(self, x):
        x = self._check_point(x)
        # Outer arc: angles [0, pi] about (0, 0). Inner arc: angles [pi, 2 pi] about (1, 0.5).
        beta_o = jnp.arctan2(x[1], x[0])  # in (-pi, pi]
        a_o = jnp.where(beta_o >= 0, beta_o, jnp.where(beta_o < -math.pi / 2, math.pi, 0.0))
        centre_i = jnp.array([1.0, 0.5], x.dtype)
        beta_i = jnp.mod(jnp.arctan2(x[1] - 0.5, x[0] - 1.0), _TWO_PI)  # in [0, 2 pi)
        a_i = jnp.where(
            beta_i >= math.pi, beta_i, jnp.where(beta_i < math.pi / 2, _TWO_PI, math.pi)
        )
        p_o = jnp.stack([jnp.cos(a_o), jnp.sin(a_o)])
        p_i = centre_i + jnp.stack([jnp.cos(a_i), jnp.sin(a_i)])
        d_o = jnp.sum((x - p_o) ** 2)
        d_i = jnp.sum((x - p_i) ** 2)
        return jnp.where(d_o <= d_i, a_o, a_i + math.pi)[None]
