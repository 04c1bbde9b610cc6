"""Tests for geomopt.manifolds: samplers, exact distances (vs brute force), normals, coordinates."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.manifolds import MANIFOLDS, get_manifold, mean_distance

NAMES = sorted(MANIFOLDS)


def _coord_box(m):
    """Bounds of the intrinsic coordinates and which of them are periodic."""
    pi = math.pi
    return {
        "circle": ([(-pi, pi)], [True]),
        "sphere": ([(0, pi), (-pi, pi)], [False, True]),
        "torus": ([(-pi, pi), (-pi, pi)], [True, True]),
        "twin_peaks": ([(-1, 1), (-1, 1)], [False, False]),
        "swiss_roll": (
            [(m.t_min, m.t_max) if m.name == "swiss_roll" else None, (-1, 1)],
            [False] * 2,
        ),
    }[m.name]


def _oracle_distance(m, points):
    """Brute force: nearest node of a dense coordinate grid, then three rounds of a 21^dim grid
    search in a shrinking window around it (x0.1 each round) -- no Newton, no closed form."""
    if m.name == "two_moons":  # two arcs: a dense 1-D grid on each is exact to ~1e-4
        a = np.linspace(0, math.pi, 20_000)
        grid = jnp.asarray(np.concatenate([a, a + 2 * math.pi])[:, None], jnp.float32)
        dense = jax.jit(jax.vmap(m.embed))(grid)
        d2 = jnp.sum((points[:, None, :] - dense[None, :, :]) ** 2, -1)
        return np.sqrt(np.asarray(jnp.min(d2, axis=1)))
    bounds, periodic = _coord_box(m)
    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    n = 10_000 if len(bounds) == 1 else 100
    axes = [np.linspace(a, b, n) for a, b in bounds]
    grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], -1)
    spacing = (hi - lo) / (n - 1)
    offsets_1d = np.linspace(-1, 1, 21)
    offsets = np.stack(
        [g.ravel() for g in np.meshgrid(*[offsets_1d] * len(bounds), indexing="ij")], -1
    )
    embed = jax.jit(jax.vmap(jax.vmap(m.embed)))
    x = jnp.asarray(points)

    @jax.jit
    def nearest(cand):  # cand: (P, K, dim) -> best coordinates and squared distances
        d2 = jnp.sum((embed(cand) - x[:, None, :]) ** 2, -1)
        i = jnp.argmin(d2, axis=1)
        return cand[jnp.arange(cand.shape[0]), i], jnp.min(d2, axis=1)

    cand = np.broadcast_to(grid, (len(points), *grid.shape))
    best, d2 = nearest(jnp.asarray(cand, jnp.float32))
    clip = ~np.array(periodic)
    for _ in range(3):
        cand = np.asarray(best)[:, None, :] + offsets[None] * spacing
        cand = np.where(clip, np.clip(cand, lo, hi), cand)
        best, d2 = nearest(jnp.asarray(cand, jnp.float32))
        spacing = spacing / 10
    return np.sqrt(np.asarray(d2))


N = 512  # one batch size everywhere, so each manifold's functions compile once


@functools.cache
def _ops(name):
    """The manifold and one jitted, vmapped function giving every per-point quantity."""
    m = get_manifold(name)

    def per_point(x):
        return {
            "distance": m.distance(x),
            "signed": m.signed_distance(x),
            "project": m.project(x),
            "normal": m.normal(x),
        }

    return m, jax.jit(jax.vmap(per_point))


@pytest.mark.parametrize("name", NAMES)
def test_distance_matches_brute_force(name, key):
    m, ops = _ops(name)
    pts = m.sample(key, N, noise=0.08)
    ours = np.asarray(ops(pts)["distance"])[:64]
    oracle = _oracle_distance(m, pts[:64])
    # ours is the exact minimum: never above the brute-force one (up to float32 rounding), and
    # equal to it within the brute force's resolution
    assert np.all(ours <= oracle + 2e-5), np.max(ours - oracle)
    assert np.max(oracle - ours) < 1e-4, np.max(oracle - ours)


@pytest.mark.parametrize("name", NAMES)
def test_samples_projection_and_noise_distance(name, key):
    m, ops = _ops(name)
    clean = m.sample(key, N, noise=0.0)
    assert clean.shape == (N, m.ambient_dim)
    assert float(jnp.max(ops(clean)["distance"])) < 2e-5
    # project is idempotent, lands on the manifold, and |x - project(x)| is the distance
    noisy = m.sample(key, N, noise=0.05)
    out = ops(noisy)
    np.testing.assert_allclose(ops(out["project"])["project"], out["project"], atol=2e-5)
    np.testing.assert_allclose(
        jnp.linalg.norm(noisy - out["project"], axis=-1), out["distance"], atol=1e-6
    )
    np.testing.assert_allclose(jnp.abs(out["signed"]), out["distance"], atol=1e-6)
    # a Gaussian of std s across a codimension-one manifold: E|normal component| = s sqrt(2/pi)
    for s, k in ((0.01, 1), (None, 2)):
        dists = [
            ops(m.sample(jax.random.fold_in(key, 10 * k + i), N, noise=s))["distance"]
            for i in range(6)
        ]
        expected = (m.default_noise if s is None else s) * math.sqrt(2 / math.pi)
        assert float(jnp.mean(jnp.stack(dists))) == pytest.approx(expected, rel=0.07)
    assert float(mean_distance(m, clean)) < 2e-5


@pytest.mark.parametrize("name", NAMES)
def test_normals_unit_orthogonal_and_signed_distance(name, key):
    m, ops = _ops(name)
    u = jax.jit(m.sample_coords, static_argnums=1)(key, N)
    if m.name == "twin_peaks":
        u = 0.9 * u  # stay away from the square's edges
    if m.name == "swiss_roll":
        u = u.at[:, 0].set(jnp.clip(u[:, 0], m.t_min + 0.3, m.t_max - 0.3))
    n, tangents, p = jax.jit(
        jax.vmap(lambda v: (m.normal_at(v), jax.jacfwd(m.embed)(v), m.embed(v)))
    )(u)
    np.testing.assert_allclose(jnp.linalg.norm(n, axis=-1), 1.0, atol=1e-6)
    dots = jnp.einsum("na,nad->nd", n, tangents) / jnp.linalg.norm(tangents, axis=1)
    assert float(jnp.max(jnp.abs(dots))) < 1e-5
    # moving along the normal by delta gives signed distance delta, and the same normal
    for delta in (0.04, -0.04):
        out = ops(p + delta * n)
        np.testing.assert_allclose(out["signed"], delta, atol=2e-5)
        np.testing.assert_allclose(out["normal"], n, atol=1e-4)


def test_closed_form_signed_distances():
    torus = get_manifold("torus")
    x = jnp.array([1.2 + 0.4 + 0.1, 0.0, 0.0])
    assert float(torus.signed_distance(x)) == pytest.approx(0.1, abs=1e-6)
    assert float(torus.signed_distance(jnp.array([1.2, 0.0, 0.0]))) == pytest.approx(-0.4)
    assert float(get_manifold("sphere").signed_distance(jnp.array([0.0, 0.0, 0.5]))) == -0.5
    assert float(get_manifold("circle").distance(jnp.array([3.0, 4.0]))) == pytest.approx(4.0)
    # torus coordinates are the official code's (theta = atan2(z, rho - R), phi = atan2(y, x))
    th, ph = torus.coords(jnp.array([0.0, 1.6, 0.0]))
    assert float(th) == pytest.approx(0.0, abs=1e-6) and float(ph) == pytest.approx(math.pi / 2)


def test_twin_peaks_and_two_moons_definitions():
    tp = get_manifold("twin_peaks")
    np.testing.assert_allclose(tp.embed(jnp.zeros(2)), [0.0, 0.0, 0.5])
    np.testing.assert_allclose(tp.embed(jnp.array([0.5, 0.0]))[2], 0.5 * math.exp(-0.5), rtol=1e-6)
    moons = get_manifold("two_moons")
    # scikit-learn's inner moon: (1 - cos s', 0.5 - sin s')
    sp = 0.7
    np.testing.assert_allclose(
        moons.embed(jnp.array([sp + 2 * math.pi])),
        [1 - math.cos(sp), 0.5 - math.sin(sp)],
        atol=1e-6,
    )


def test_bad_inputs(key):
    with pytest.raises(ValueError, match="unknown manifold 'klein'"):
        get_manifold("klein")
    m = get_manifold("torus")
    with pytest.raises(ValueError, match="noise -0.1"):
        m.sample(key, 10, noise=-0.1)
    with pytest.raises(ValueError, match="noise nan"):
        m.sample(key, 10, noise=float("nan"))
    with pytest.raises(ValueError, match="n 0"):
        m.sample(key, 0)
    with pytest.raises(ValueError, match=r"shape \(2,\), expected \(3,\)"):
        m.distance(jnp.zeros(2))
    with pytest.raises(ValueError, match=r"expected \(n, 3\)"):
        mean_distance(m, jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="0 < r < R"):
        get_manifold("torus", major_radius=0.3, minor_radius=0.4)


def test_jit_no_recompile_on_new_points(key):
    m = get_manifold("swiss_roll")
    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        return jax.vmap(m.distance)(x)

    f(m.sample(key, 8))
    f(m.sample(jax.random.fold_in(key, 1), 8))
    assert len(traces) == 1
