"""Known-answer tests of geomopt.gfm.solve.

Straight lines, hyperbolic semicircles, great circles, a path pulled onto a circle by an exact
smoothed-circle score; batching, recompilation, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import i0e, i1e

from geomopt import gfm


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def circle_score(x, sigma=0.1):
    """Exact score of the unit circle's uniform measure smoothed by N(0, sigma^2 I):
    log p = -(|x|^2 + 1) / (2 sigma^2) + log I0(|x| / sigma^2) + const."""
    r = jnp.sqrt(x @ x)
    z = r / sigma**2
    return x / sigma**2 * (i1e(z) / i0e(z) / r - 1.0)


def test_circle_score_matches_finite_differences():
    def log_p(x, sigma=0.1):
        r = jnp.sqrt(x @ x)
        return -(x @ x + 1) / (2 * sigma**2) + jnp.log(i0e(r / sigma**2)) + r / sigma**2

    x = jnp.array([0.8, 0.5])
    np.testing.assert_allclose(circle_score(x), jax.grad(log_p)(x), rtol=1e-8)


@pytest.mark.parametrize("method", ["lm", "gauss_newton"])
def test_lam0_euclidean_is_straight_line(method):
    x0, x1 = jnp.array([-1.0, 0.5, 0.2]), jnp.array([2.0, 1.5, -0.3])
    line = gfm.straight_line(x0, x1, 12)
    bump = jnp.sin(jnp.linspace(0, np.pi, 12))[:, None] * jnp.array([[0.3, -0.2, 0.5]])
    path, rep = gfm.solve(x0, x1, lam=0.0, n_points=12, method=method, init=line + bump)
    assert rep.converged and rep.iterations > 0, rep
    np.testing.assert_allclose(path, line, atol=1e-8)


def _half_plane_error(k):
    x0, x1 = jnp.array([-1.0, 1.0]), jnp.array([2.0, 0.5])
    centre = float((x1 @ x1 - x0 @ x0) / (2 * (x1[0] - x0[0])))
    radius = float(jnp.hypot(x0[0] - centre, x0[1]))
    path, rep = gfm.solve(x0, x1, metric=gfm.HalfPlane(), lam=0.0, n_points=k)
    assert rep.converged, rep.reason
    assert path.shape == (k, 2)
    assert float(jnp.max(jnp.abs(path[1:-1] - gfm.straight_line(x0, x1, k)[1:-1]))) > 0.1
    dist = jnp.hypot(path[:, 0] - centre, path[:, 1])
    return float(jnp.max(jnp.abs(dist - radius)))


def test_lam0_half_plane_is_semicircle():
    assert _half_plane_error(48) < 1e-3


@pytest.mark.slow
def test_half_plane_error_is_second_order():
    # Second-order stencils: halving dt cuts the distance error about 4x.
    assert 3.0 < _half_plane_error(24) / _half_plane_error(48) < 5.0


def test_lam0_sphere_coordinates_is_great_circle():
    a, b = jnp.array([0.6, 0.3]), jnp.array([2.0, 2.5])
    path, rep = gfm.solve(a, b, metric=gfm.SphereCoordinates(), lam=0.0, n_points=33)
    assert rep.converged, rep.reason
    pts = gfm.sphere_to_cartesian(path)
    normal = jnp.cross(pts[0], pts[-1])
    normal = normal / jnp.linalg.norm(normal)
    assert float(jnp.max(jnp.abs(pts @ normal))) < 1e-3  # in the plane of the great circle
    steps = jnp.arccos(jnp.clip(jnp.sum(pts[1:] * pts[:-1], axis=-1), -1.0, 1.0))
    angle = float(jnp.arccos(pts[0] @ pts[-1]))
    np.testing.assert_allclose(steps, angle / 32, rtol=2e-3)  # constant speed, shortest arc


def test_large_lam_keeps_path_on_circle_and_methods_agree():
    x0, x1 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    line = gfm.straight_line(x0, x1, 32)
    assert float(jnp.max(jnp.abs(jnp.linalg.norm(line, axis=1) - 1))) > 0.25
    path, rep = gfm.solve(x0, x1, score=circle_score, lam=1.0, n_points=32)
    assert rep.converged, rep.reason
    assert float(jnp.max(jnp.abs(jnp.linalg.norm(path, axis=1) - 1))) < 0.05
    path_gn, rep_gn = gfm.solve(
        x0, x1, score=circle_score, lam=1.0, n_points=32, method="gauss_newton"
    )
    assert rep_gn.converged
    np.testing.assert_allclose(path_gn, path, atol=1e-6)
    res = gfm.residual_norm(
        gfm.path_residuals(path, lam=1.0, score=circle_score, metric=None, kind="euclidean")
    )
    assert float(res) <= float(rep.residual) * 1.0001 + 1e-12


def test_adam_official_settings_reduce_the_residual():
    x0, x1 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    line = gfm.straight_line(x0, x1, 16)
    path, rep = gfm.solve(
        x0, x1, score=circle_score, lam=1.0, n_points=16, method="adam", max_iters=300
    )
    assert not rep.converged and rep.iterations == 300 and rep.reason.startswith("max_iters")
    kw = dict(lam=1.0, score=circle_score, metric=None, kind="euclidean")
    before = gfm.residual_norm(gfm.path_residuals(line, **kw))
    assert float(rep.residual) < 0.5 * float(before)
    assert jnp.all(jnp.isfinite(path))


def test_batch_matches_single_solves_and_lam_does_not_recompile():
    traces = []

    def score(x):
        traces.append(1)  # runs only while tracing
        return circle_score(x)

    x0 = jnp.array([[1.0, 0.0], [0.0, -1.0], [-0.6, 0.8]])
    x1 = jnp.array([[0.0, 1.0], [0.8, 0.6], [-0.6, -0.8]])
    paths, rep = gfm.solve(x0, x1, score=score, lam=0.5, n_points=16)
    assert paths.shape == (3, 16, 2) and rep.converged.shape == (3,) and rep.converged.all()
    n_traced = len(traces)
    paths2, rep2 = gfm.solve(x0, x1, score=score, lam=0.9, n_points=16, tol=1e-7)
    assert len(traces) == n_traced, "changing lam / tol recompiled"
    assert rep2.converged.all() and not np.allclose(paths, paths2)
    one, rep_one = gfm.solve(x0[2], x1[2], score=score, lam=0.9, n_points=16, tol=1e-7)
    np.testing.assert_allclose(one, paths2[2], atol=1e-6)
    assert rep2[2].converged and rep_one.residual <= 1e-7


def test_bad_input_raises():
    x0, x1 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    with pytest.raises(ValueError, match="shapes"):
        gfm.solve(x0, jnp.zeros(3))
    with pytest.raises(ValueError, match="n_points=2"):
        gfm.solve(x0, x1, n_points=2)
    with pytest.raises(ValueError, match="non-finite"):
        gfm.solve(jnp.array([jnp.nan, 0.0]), x1)
    with pytest.raises(ValueError, match="expected"):
        gfm.solve(jnp.zeros((2, 2, 2)), jnp.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="lam"):
        gfm.solve(x0, x1, lam=-1.0)
    with pytest.raises(ValueError, match="method"):
        gfm.solve(x0, x1, method="bfgs")
    with pytest.raises(ValueError, match="init"):
        gfm.solve(x0, x1, n_points=5, init=jnp.zeros((4, 2)))


def test_metric_not_spd_on_initial_path_names_the_waypoint():
    # G = y I is SPD at x0 (where the metric is sampled) but the line from (-1, 1) to (1, -1)
    # crosses y = 0 at waypoint 2 of 5, where it is singular.
    with pytest.raises(ValueError, match="waypoint 2"):
        gfm.solve(
            jnp.array([-1.0, 1.0]),
            jnp.array([1.0, -1.0]),
            metric=lambda x: x[1] * jnp.eye(2, dtype=x.dtype),
            lam=0.0,
            n_points=5,
        )
    # The half-plane metric rejects the endpoint below the axis before solving.
    with pytest.raises(ValueError, match="x_d = -1.0"):
        gfm.solve(jnp.array([-1.0, 1.0]), jnp.array([1.0, -1.0]), metric=gfm.HalfPlane())


def test_diverging_adam_reports_instead_of_nan():
    def score(x):  # not finite outside the disc of radius 2
        return circle_score(x) + 0.0 * jnp.log(4.0 - x @ x)

    x0, x1 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    kw = dict(score=score, lam=1.0, n_points=8, method="adam", max_iters=200)
    path, rep = gfm.solve(x0, x1, lr=5.0, clip=jnp.inf, **kw)
    assert not rep.converged
    assert rep.code == 6, rep.reason
    assert bool(jnp.all(jnp.isfinite(path))) and float(jnp.max(jnp.linalg.norm(path, axis=1))) < 2
