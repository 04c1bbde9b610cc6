"""Banded solvers against dense solves; prior metrics and the Christoffel term in closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("n", [pytest.param(1, marks=pytest.mark.slow), 6])
def test_block_tridiagonal_matches_dense(n):
    m = 3
    k = jax.random.split(jax.random.key(n), 4)
    diag = jax.random.normal(k[0], (n, m, m)) + 8.0 * jnp.eye(m)[None]
    lower = jax.random.normal(k[1], (n - 1, m, m))
    upper = jax.random.normal(k[2], (n - 1, m, m))
    rhs = jax.random.normal(k[3], (n, m))
    x = jax.jit(gfm.solve_block_tridiagonal)(lower, diag, upper, rhs)
    dense = gfm.block_tridiagonal_to_dense(lower, diag, upper)
    np.testing.assert_allclose(
        x.reshape(-1), np.linalg.solve(dense, np.asarray(rhs).reshape(-1)), atol=1e-12
    )


@pytest.mark.parametrize("n", [2, 7])
def test_block_pentadiagonal_matches_dense(n):
    m = 2
    k = jax.random.split(jax.random.key(10 + n), 4)
    d = jax.random.normal(k[0], (n, m, m))
    diag = d @ jnp.swapaxes(d, 1, 2) + 10.0 * jnp.eye(m)[None]
    up1 = jax.random.normal(k[1], (max(n - 1, 0), m, m))
    up2 = jax.random.normal(k[2], (max(n - 2, 0), m, m))
    rhs = jax.random.normal(k[3], (n, m))
    x = jax.jit(gfm.solve_block_pentadiagonal)(diag, up1, up2, rhs)
    dense = gfm.block_pentadiagonal_to_dense(diag, up1, up2)
    np.testing.assert_allclose(dense, dense.T)
    np.testing.assert_allclose(
        x.reshape(-1), np.linalg.solve(dense, np.asarray(rhs).reshape(-1)), atol=1e-12
    )


def test_block_solver_rejects_bad_shapes():
    with pytest.raises(ValueError, match="block shapes"):
        gfm.solve_block_tridiagonal(
            jnp.zeros((2, 2, 2)), jnp.zeros((2, 2, 2)), jnp.zeros((1, 2, 2)), jnp.zeros((2, 2))
        )


def test_torus_metric_eigen_decomposition():
    metric = gfm.TorusMetric(alpha=0.05, beta=0.5, gamma=1.0)
    th, ph = 0.7, 2.1
    x = jnp.array(
        [
            (1.2 + 0.4 * np.cos(th)) * np.cos(ph),
            (1.2 + 0.4 * np.cos(th)) * np.sin(ph),
            0.4 * np.sin(th),
        ]
    )
    e_t, e_p, n = gfm.torus_frame(x, 1.2)
    frame = jnp.stack([e_t, e_p, n])
    np.testing.assert_allclose(frame @ frame.T, jnp.eye(3), atol=1e-12)
    # e_theta / e_phi are the normalised derivatives of the embedding in theta / phi.
    np.testing.assert_allclose(n, [np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), np.sin(th)])
    g = metric(x)
    np.testing.assert_allclose(
        frame @ g @ frame.T, jnp.diag(jnp.array([0.05, 0.5, 1.0])), atol=1e-12
    )


def test_simple_metrics():
    x = jnp.array([0.3, 2.0])
    np.testing.assert_allclose(gfm.HalfPlane()(x), jnp.eye(2) / 4.0)
    np.testing.assert_allclose(gfm.Euclidean()(x), jnp.eye(2))
    np.testing.assert_allclose(gfm.Conformal(lambda y: 1.0 + y @ y)(x), (1.0 + 4.09) * jnp.eye(2))
    np.testing.assert_allclose(gfm.Diagonal(lambda y: y**2)(x), jnp.diag(x**2))
    np.testing.assert_allclose(
        gfm.SphereCoordinates()(x), jnp.diag(jnp.array([1.0, np.sin(0.3) ** 2]))
    )
    with pytest.raises(ValueError, match="shape"):
        gfm.SphereCoordinates()(jnp.zeros(3))


def test_christoffel_half_plane_closed_form():
    """Poincare half-plane: Gamma(v, v) = (-2 vx vy / y, (vx^2 - vy^2) / y)."""
    x = jnp.array([0.4, 0.7])
    v = jnp.array([1.3, -0.6])
    gamma = jnp.linalg.solve(gfm.HalfPlane()(x), gfm.christoffel_term(gfm.HalfPlane(), x, v))
    want = jnp.array([-2 * v[0] * v[1] / x[1], (v[0] ** 2 - v[1] ** 2) / x[1]])
    np.testing.assert_allclose(gamma, want, rtol=1e-12)


def test_christoffel_sphere_closed_form():
    """Round sphere (theta, phi): Gamma^th = -sin cos phidot^2, Gamma^ph = 2 cot th thdot phidot."""
    x = jnp.array([0.9, 0.2])
    v = jnp.array([0.5, 1.7])
    metric = gfm.SphereCoordinates()
    gamma = jnp.linalg.solve(metric(x), gfm.christoffel_term(metric, x, v))
    th = 0.9
    want = jnp.array([-np.sin(th) * np.cos(th) * v[1] ** 2, 2 / np.tan(th) * v[0] * v[1]])
    np.testing.assert_allclose(gamma, want, rtol=1e-12)


def test_hypersphere_residual_vanishes_on_slerp():
    """A constant-speed great circle has purely radial discrete acceleration."""
    a, b = jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 0.6, 0.8])
    t = jnp.linspace(0.0, 1.0, 17)[:, None]
    om = jnp.arccos(a @ b)
    slerp = (jnp.sin((1 - t) * om) * a[None] + jnp.sin(t * om) * b[None]) / jnp.sin(om)
    kw = dict(lam=0.0, score=None, metric=None, kind="hypersphere")
    assert float(gfm.residual_norm(gfm.path_residuals(slerp, **kw))) < 1e-10
    line = gfm.straight_line(a, b, 17)
    uneven = line / jnp.linalg.norm(line, axis=1, keepdims=True)  # on the sphere, uneven speed
    assert float(gfm.residual_norm(gfm.path_residuals(uneven, **kw))) > 0.1
