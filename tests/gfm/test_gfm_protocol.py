"""The official-protocol pieces of the GFM experiments: metric fits, official energies and
their Adam, initial paths, the tube potential oracle, and the honest outcome counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.diffusion import SmoothedCircle
from geomopt.diffusion._sample import pf_ode_denoise
from geomopt.gfm import baselines as bl
from geomopt.gfm._exp_protocol import evaluate, initial_paths, status_of_codes, summarise
from geomopt.gfm._potentials import TubePotential
from geomopt.gfm.exp_torus_metrics import angle_linear_init, route_of
from geomopt.manifolds import get_manifold


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def circle_data(n=1500, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.cos(t), np.sin(t)], 1) + noise * rng.normal(size=(n, 2))


def test_land_official_gamma_and_weight():
    data = circle_data()
    land = bl.fit_land_official(data, fit_iters=300)
    ref = data[:200]
    d = np.sqrt(((ref[:, None] - ref[None]) ** 2).sum(-1))
    gamma = np.median(d[~np.eye(200, dtype=bool)]) / 3
    np.testing.assert_allclose(float(land.gamma), gamma, rtol=1e-12)
    assert land.data.shape == (1000, 2)
    # W is fitted so that mean_d W M_dd ~ 1 on the held-out data
    mdd = jax.vmap(land.local_variance)(jnp.asarray(data[1000:]))
    assert abs(float(jnp.mean(land.weight * mdd)) - 1.0) < 0.2


def test_rbf_official_is_normalised_on_the_data():
    data = circle_data(n=800)
    rbf = bl.fit_rbf_official(data, n_centers=40, kappa=2.0, fit_iters=3000, lr=1e-2)
    h = jax.vmap(rbf.h)(jnp.asarray(data))
    assert abs(float(jnp.median(h)) - 1.0) < 0.15
    assert float(rbf.h(jnp.zeros(2))) < 0.2  # far from every centre: the metric is large


def test_spherical_batched_matches_single():
    a = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    b = np.array([[0.0, 0.0, 2.0], [-1.0, 1.0, 0.5]])
    batch = bl.spherical(a, b, 7)
    for i in range(2):
        np.testing.assert_allclose(batch[i], bl.spherical(a[i], b[i], 7), rtol=1e-12)
    np.testing.assert_allclose(jnp.linalg.norm(batch[0], axis=1), 2.0, rtol=1e-12)


def test_official_energies_against_direct_formulas():
    key = jax.random.key(0)
    path = jax.random.normal(key, (6, 2))
    pot = SmoothedCircle()
    sigma = 0.3
    score = lambda x: pot.score(x, sigma)  # noqa: E731
    dt = 1 / 5
    s = jax.vmap(score)(path)
    jac = bl.official_energy("jacobian", score=score)(path)
    np.testing.assert_allclose(jac, 0.5 * np.sum(np.diff(s, axis=0) ** 2) / dt, rtol=1e-12)
    stein = bl.official_energy("stein", score=score, sigma=sigma)
    dx, mid = np.diff(path, axis=0), 0.5 * (path[1:] + path[:-1])
    sm = jax.vmap(score)(mid)
    want = 0.5 * np.mean(np.sum(dx**2, -1) + 1000 * np.sum(sm * dx, -1) ** 2)
    np.testing.assert_allclose(stein(path), want, rtol=1e-10)
    # the official Stein gradient treats the network output as a constant: d s / d m = -I/sigma^2
    g = jax.grad(stein)(path)
    detached = (
        lambda p: (
            0.5
            * jnp.mean(  # noqa: E731
                jnp.sum(jnp.diff(p, axis=0) ** 2, -1)
                + 1000
                * jnp.sum(
                    (sm * sigma**2 + mid - 0.5 * (p[1:] + p[:-1])) / sigma**2 * jnp.diff(p, axis=0),
                    -1,
                )
                ** 2
            )
        )
    )
    np.testing.assert_allclose(g, jax.grad(detached)(path), rtol=1e-8, atol=1e-10)


def test_inverse_density_reconstructs_log_p_along_the_path():
    """The 1/p energy integrates the score along the path; on a fine path its density matches
    the exact smoothed circle's up to the constant p(x0)."""
    pot = SmoothedCircle()
    sigma = 0.3
    t = jnp.linspace(0.0, 1.0, 400)[:, None]
    path = jnp.array([[1.3, 0.0]]) * (1 - t) + jnp.array([[-0.2, 0.9]]) * t
    energy = bl.official_energy("inverse_density", score=lambda x: pot.score(x, sigma))
    dt = 1 / 399
    mid = 0.5 * (path[1:] + path[:-1])
    logp = jax.vmap(lambda x: pot.log_density(x, sigma))(mid) - pot.log_density(path[0], sigma)
    v2 = np.sum((np.diff(path, axis=0) / dt) ** 2, -1)
    exact = np.mean(np.exp(-logp) * v2) * dt
    np.testing.assert_allclose(energy(path), exact, rtol=1e-3)


def test_adam_path_finds_the_straight_line_with_cosine_decay():
    x0, x1 = jnp.array([0.0, 0.0]), jnp.array([1.0, 2.0])
    line = bl.linear(x0, x1, 8)
    bump = jnp.sin(jnp.linspace(0, np.pi, 8))[:, None] * jnp.array([[0.4, -0.3]])
    energy = lambda p: jnp.sum(jnp.diff(p, axis=0) ** 2)  # noqa: E731
    paths, final, trace, _ = bl.adam_path(energy, (line + bump)[None], lr=0.02, iters=3000,
                                          cosine=0.1)  # fmt: skip
    np.testing.assert_allclose(paths[0], line, atol=2e-3)
    assert trace.shape == (1, 3000) and final[0] < trace[0, 0]
    with pytest.raises(ValueError, match="iters"):
        bl.adam_path(energy, line[None], lr=0.1, iters=0)


def test_tube_potential_is_the_gradient_of_its_energy_and_denoises_onto_the_torus():
    torus = get_manifold("torus")
    tube = TubePotential(torus)
    x = jnp.array([1.5, 0.3, 0.2])
    sigma = 0.1
    g = jax.grad(lambda y: tube.log_density(y, sigma))(x)
    np.testing.assert_allclose(tube.score(x, sigma), g, rtol=1e-10)
    np.testing.assert_allclose(tube.denoise(x, sigma), torus.project(x), rtol=1e-12)
    # the PF-ODE denoising of the experiments' 'denoised' init lands on the surface
    pts = torus.sample(jax.random.key(1), 16, noise=0.1)
    moved = pf_ode_denoise(tube.denoise, pts, 0.5)
    assert float(jnp.max(jax.vmap(torus.distance)(moved))) < 1e-2
    before = float(jnp.mean(jax.vmap(torus.distance)(pts)))
    assert before > 0.05


def test_initial_paths_keep_endpoints_and_denoised_lies_on_the_support():
    torus = get_manifold("torus")
    x0 = np.array([[1.6, 0.0, 0.0], [0.0, 1.6, 0.0]])
    x1 = np.array([[-1.6, 0.0, 0.0], [0.0, -0.8, 0.0]])
    for kind in ("chord", "slerp", "denoised"):
        ends = (x0, x1[::-1]) if kind == "slerp" else (x0, x1)  # both pairs are antipodal
        p = initial_paths(kind, *ends, 9, model=TubePotential(torus))
        assert p.shape == (2, 9, 3)
        np.testing.assert_allclose(p[:, 0], ends[0])
        np.testing.assert_allclose(p[:, -1], ends[1])
    with pytest.raises(ValueError, match="x0 and x1 of pair 0 are antipodal"):
        initial_paths("slerp", x0, x1, 9)
    den = initial_paths("denoised", x0, x1, 9, model=TubePotential(torus))
    assert float(jnp.max(jax.vmap(jax.vmap(torus.distance))(den))) < 1e-2
    with pytest.raises(ValueError, match="sideways"):
        initial_paths("sideways", x0, x1, 9)


def test_a_converged_path_off_the_manifold_is_a_failure():
    torus = get_manifold("torus")
    tube = TubePotential(torus)
    on = angle_linear_init(20, np.pi / 2, 0.0, np.pi / 2, np.pi)
    chord = np.asarray(bl.linear(on[0], on[-1], 20))  # through the hole
    paths = np.stack([on, chord, np.full_like(on, np.nan)])
    ev = evaluate(paths, manifold=torus, model=tube, sigma=0.1, lam=1.0, check_sigma=0.05, tol=0.1)
    np.testing.assert_array_equal(ev["on_manifold"], [True, False, False])
    assert ev["error_max"][0] < 1e-10 and ev["error_max"][1] > 0.5
    # the tube's denoiser displacement is the distance itself: no true manifold needed
    np.testing.assert_allclose(
        ev["displacement_max"][:2], ev["error_max"][:2], rtol=1e-8, atol=1e-12
    )
    status = status_of_codes(np.array([0, 0, 6]), ev["finite"])
    assert list(status) == ["converged", "converged", "diverged"]
    row = summarise(status, ev)
    assert (row["converged"], row["diverged"], row["stalled"]) == (2, 1, 0)
    assert row["on_manifold"] == pytest.approx(1 / 3) and row["success"] == pytest.approx(1 / 3)
    assert list(status_of_codes(np.array([1, 3, 4, 7, 5, 2]), np.ones(6, bool))) == [
        "stalled", "stalled", "stalled", "stalled", "converged", "diverged"
    ]  # fmt: skip


def test_torus_routes_are_named_by_the_middle_poloidal_angle():
    top = angle_linear_init(21, np.pi / 2, 0.0, np.pi / 2, np.pi)
    assert route_of(top) == "top"
    assert route_of(angle_linear_init(21, np.pi, 0.0, np.pi, np.pi)) == "inner"
    assert route_of(angle_linear_init(21, 0.0, 0.0, 0.0, np.pi)) == "outer"
    assert route_of(angle_linear_init(21, -np.pi / 2, 0.0, -np.pi / 2, np.pi)) == "bottom"
    np.testing.assert_allclose(
        jax.vmap(get_manifold("torus").distance)(jnp.asarray(top)), 0.0, atol=1e-12
    )


def test_failure_reasons_name_why_each_pair_failed():
    from geomopt.gfm._exp_protocol import failure_reasons

    torus = get_manifold("torus")
    on = angle_linear_init(12, np.pi / 2, 0.0, np.pi / 2, np.pi)  # the top circle: on the surface
    hole = np.linspace([1.2, 0.0, 0.4], [-1.2, 0.0, 0.4], 12)  # the chord over the hole
    tube = on.copy()
    tube[5:7] *= [[0.9, 0.9, 0.2]]  # two waypoints sunk into the tube
    paths = np.stack([on, on, hole, tube, on])
    status = np.array(["converged", "stalled", "converged", "stalled", "diverged"], object)
    codes = np.array([0, 1, 0, 7, 6])
    ev = evaluate(paths, manifold=torus, model=TubePotential(torus), sigma=0.1, lam=1.0,
                  check_sigma=0.05, tol=0.1)  # fmt: skip
    ev["finite"] = np.array([True] * 4 + [False])  # as a diverged path would be
    why = failure_reasons(paths, status, codes, ev, torus, 0.1)
    assert why[0] == "ok"
    assert why[1] == "iteration cap"
    assert why[2].startswith("off: outside by") and why[2].endswith("through the hole")
    assert why[3].startswith("stalled: at the rate") and "off: inside by" in why[3]
    assert "through the hole" not in why[3]
    assert why[4] == "diverged"
