"""Initial paths (chord, SLERP, coordinate-linear, denoiser projection, the official sequential
warm start) and continuation in sigma."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import SmoothedCircle
from geomopt.manifolds import get_manifold


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def test_chord_is_the_straight_line_batched():
    x0, x1 = np.array([[0.0, 1.0], [2.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 0.0]])
    p = gfm.chord(x0, x1, 5)
    np.testing.assert_allclose(p, gfm.straight_line(jnp.asarray(x0), jnp.asarray(x1), 5))
    np.testing.assert_allclose(p[1, 2], [1.0, 0.0])


def test_slerp_follows_the_great_circle_at_constant_speed():
    x0, x1 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.6, 0.8])
    p = np.asarray(gfm.slerp(x0, x1, 7))
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-12)
    angles = np.arccos(np.clip(np.sum(p[1:] * p[:-1], 1), -1, 1))
    np.testing.assert_allclose(angles, np.pi / 2 / 6, atol=1e-12)
    np.testing.assert_allclose(p[[0, -1]], [x0, x1], atol=1e-12)
    # Parallel endpoints: the great circle is not unique; (nearly) the chord.
    np.testing.assert_allclose(gfm.slerp(x0, 2 * x0, 3)[1], 1.5 * x0, atol=1e-6)


def test_slerp_refuses_antipodal_and_zero_endpoints():
    from geomopt.gfm import baselines as bl

    x0 = np.array([1.0, 2.0, 0.5])
    for bad_x1, match in [
        (-3.0 * x0, "x0 and x1 are antipodal"),
        (-x0 + 1e-5, "x0 and x1 are antipodal"),  # cosine -1 + 1e-11: no unique great circle
        (np.zeros(3), "endpoint x1 has norm 0.0"),
    ]:
        with pytest.raises(ValueError, match=f"slerp: {match}"):
            gfm.slerp(x0, bad_x1, 5)
        with pytest.raises(ValueError, match=f"slerp: {match}"):
            gfm.solve(x0, bad_x1, init="slerp", n_points=5, method="lm")
        with pytest.raises(ValueError, match=f"spherical: {match}"):
            bl.spherical(x0, bad_x1, 5)
    with pytest.raises(ValueError, match="slerp: x0 and x1 of pair 1 are antipodal"):
        gfm.slerp(np.stack([x0, x0]), np.stack([x0 + 1.0, -x0]), 5)
    with pytest.raises(ValueError, match="slerp: x0 and x1 of pair 1 are antipodal"):
        gfm.solve_matrix_free(np.stack([x0, x0]), np.stack([x0 + 1.0, -x0]), score=None,
                              n_points=5, init="slerp")  # fmt: skip
    # close to antipodal but a unique great circle: still the arc
    near = np.array([-1.0, 0.0, 1e-2])
    path = np.asarray(gfm.slerp(np.array([1.0, 0.0, 0.0]), near / np.linalg.norm(near), 5))
    np.testing.assert_allclose(np.linalg.norm(path, axis=-1), 1.0, atol=1e-12)


def _official_angle_linear(n_points, major=1.2, minor=0.4):
    """The official torus start, written out: (th, ph) = (pi/2, 0) -> (pi/2, pi), linear in
    the angles, mapped to the surface."""
    t = np.linspace(0.0, 1.0, n_points)
    th, ph = np.full_like(t, np.pi / 2), np.pi * t
    ring = major + minor * np.cos(th)
    return np.stack([ring * np.cos(ph), ring * np.sin(ph), minor * np.sin(th)], 1)


def test_coordinate_linear_on_the_torus_is_the_official_angle_linear_start():
    torus = get_manifold("torus")
    ref = _official_angle_linear(20)
    p = np.asarray(gfm.coordinate_linear(torus, ref[0], ref[-1], 20))
    np.testing.assert_allclose(p, ref, atol=1e-12)
    # Angles take the short way round: from phi = 0.1 to phi = 2 pi - 0.1 passes phi = 0.
    u = jnp.array([[0.3, 0.1], [0.3, 2 * np.pi - 0.1]])
    x = jax.vmap(torus.embed)(u)
    q = gfm.coordinate_linear(torus, x[0], x[1], 5)
    phi = np.arctan2(q[:, 1], q[:, 0])
    np.testing.assert_allclose(phi, [0.1, 0.05, 0.0, -0.05, -0.1], atol=1e-12)
    dist = jax.vmap(torus.distance)(q)
    assert float(jnp.max(dist)) < 1e-12


def test_projection_with_a_denoiser_lands_on_the_support():
    circle = SmoothedCircle()
    line = gfm.chord(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 9)
    proj = gfm.project_with_denoiser(line, circle, sigmas=(0.3, 0.1, 0.03, 0.01))
    r = np.linalg.norm(np.asarray(proj), axis=1)
    assert np.max(np.abs(r - 1.0)) < 0.01 < np.max(np.abs(np.linalg.norm(line, axis=1) - 1))
    np.testing.assert_allclose(np.asarray(proj)[[0, -1]], np.asarray(line)[[0, -1]])
    # A plain callable (x, sigma) -> D works as well, batched paths too.
    both = gfm.project_with_denoiser(jnp.stack([line, line]), circle.denoise, (0.3, 0.1))
    assert both.shape == (2, 9, 2)
    disp = gfm.denoiser_displacement(proj, circle, 0.01)
    assert float(jnp.max(disp)) < 0.02 < float(jnp.max(gfm.denoiser_displacement(line, circle)))


def sequential_reference(x0, x1, k, score, lam, lr, iters, wd):
    """The official warm start written out with Python loops (one waypoint at a time)."""
    import optax

    dt = 1.0 / (k - 1)
    opt = optax.adamw(0.5 * lr, eps=1e-8, weight_decay=wd)
    path = [jnp.asarray(x0)]
    for i in range(1, k - 1):
        z = path[-1] + (x1 - path[-1]) / (k - i)

        def loss(z, i=i):
            if i == 1:
                acc = jnp.mean((z - x0 - (x1 - x0) / (k - 1)) ** 2)
            else:
                acc = jnp.mean(((z - 2 * path[i - 1] + path[i - 2]) / dt**2) ** 2)
            return jnp.mean(score(z) ** 2) + lam * acc

        state = opt.init(z)
        for _ in range(iters):
            upd, state = opt.update(jax.grad(loss)(z), state, z)
            z = optax.apply_updates(z, upd)
        path.append(z)
    return jnp.stack(path + [jnp.asarray(x1)])


def test_sequential_init_matches_the_official_loop_and_moves_to_the_support():
    x0, x1 = np.array([1.0, 0.0]), np.array([-1.0, 0.05])
    circle = SmoothedCircle()
    score = gfm.ScoreAt(circle, 0.1)
    q = np.asarray(gfm.sequential_init(x0, x1, 9, score, lam=0.5, lr=0.05, iters=30))
    ref = sequential_reference(x0, x1, 9, score, 0.5, 0.05, 30, 0.01)
    np.testing.assert_allclose(q, ref, atol=1e-9)
    dist_chord = np.abs(np.linalg.norm(np.asarray(gfm.chord(x0, x1, 9)), axis=1) - 1).mean()
    dist_seq = np.abs(np.linalg.norm(q, axis=1) - 1).mean()
    assert dist_seq < 0.5 * dist_chord
    batch = gfm.sequential_init(np.stack([x0, x1]), np.stack([x1, x0]), 9, score, lam=0.5,
                                lr=0.05, iters=30)  # fmt: skip
    np.testing.assert_allclose(batch[0], q, atol=1e-12)


def test_named_inits_in_solve_match_the_functions():
    score = gfm.ScoreAt(SmoothedCircle(), 0.1)
    x0, x1 = np.array([1.0, 0.1]), np.array([0.1, 1.0])
    kw = dict(score=score, n_points=9, method="adam", max_iters=5)
    for name, init in [
        ("slerp", gfm.slerp(x0, x1, 9)),
        ("sequential", gfm.sequential_init(x0, x1, 9, score, lr=0.05, iters=1)),
    ]:
        a, _ = gfm.solve(x0, x1, init=name, **kw)
        b, _ = gfm.solve(x0, x1, init=np.asarray(init), **kw)
        np.testing.assert_allclose(a, b, atol=1e-12)
    with pytest.raises(ValueError, match="init 'diagonal'"):
        gfm.solve(x0, x1, init="diagonal", **kw)


def test_continuation_in_sigma_ends_converged_at_the_last_level():
    circle = SmoothedCircle()
    x0, x1 = np.array([1.0, 0.0]), np.array([-0.6, 0.8])
    path, reps = gfm.solve_continuation(x0, x1, model=circle, sigmas=(0.3, 0.1), n_points=16)
    assert len(reps) == 2 and all(r.status == "converged" for r in reps)
    direct, _ = gfm.solve(x0, x1, score=gfm.ScoreAt(circle, 0.1), n_points=16,
                          init=np.asarray(gfm.slerp(x0, x1, 16)))  # fmt: skip
    np.testing.assert_allclose(path, direct, atol=1e-6)  # the same on-circle solution
    with pytest.raises(ValueError, match="non-increasing"):
        gfm.solve_continuation(x0, x1, model=circle, sigmas=(0.1, 0.3))


def test_path_validity_reports_displacement_and_true_distance():
    circle, manifold = SmoothedCircle(), get_manifold("circle")
    arc = np.asarray(gfm.slerp(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 9))
    line = np.asarray(gfm.chord(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 9))
    v = gfm.path_validity(np.stack([arc, line]), denoiser=circle, sigma=0.01, manifold=manifold,
                          threshold=0.05)  # fmt: skip
    np.testing.assert_allclose(v["distance_max"], [0.0, 1.0 - np.sqrt(0.5)], atol=1e-9)
    np.testing.assert_allclose(v["distance_mean"][1], np.mean(1 - np.linalg.norm(line, axis=1)))
    assert list(v["on_manifold"]) == [True, False]
    assert float(v["displacement_max"][0]) < 0.02 < float(v["displacement_max"][1])
    only = gfm.path_validity(line, denoiser=circle, sigma=0.01, threshold=0.05)
    assert "distance_max" not in only and not bool(only["on_manifold"])
    with pytest.raises(ValueError, match="needs a denoiser, a manifold"):
        gfm.path_validity(line)
