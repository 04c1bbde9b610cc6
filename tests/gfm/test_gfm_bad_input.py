"""Bad input is rejected with the bad value named: non-symmetric / indefinite metrics,
half-plane points with y <= 0; solver caches keyed by dtype; saved denoisers load under either
x64 setting."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.diffusion import DenoiserConfig, EDMDenoiser, load_denoiser, save_denoiser
from geomopt.gfm import _compiled

X0, X1 = np.array([0.0, 1.0]), np.array([1.0, 1.5])
KW = dict(n_points=6, method="adam", max_iters=2)


def test_non_symmetric_metric_is_rejected_with_its_value():
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match=r"not symmetric: max \|G - G\^T\| = 0.5"):
            gfm.solve(X0, X1, metric=lambda x: jnp.array([[1.0, 0.5], [0.0, 1.0]]), **KW)


def test_indefinite_metric_is_rejected_with_its_eigenvalue():
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match="not positive-definite: smallest eigenvalue -2"):
            gfm.solve(X0, X1, metric=lambda x: jnp.diag(jnp.array([1.0, -2.0])), **KW)


def test_metric_is_checked_at_every_waypoint_of_the_initial_path():
    # Symmetric positive-definite at both endpoints (x_0 = 0 and 1), asymmetric in between: the
    # residual's Cholesky sees only the symmetric part, so LM would "converge".
    def metric(x):
        skew = 4.0 * x[0] * (1.0 - x[0])
        return jnp.array([[1.0, skew], [0.0, 1.0]]) + jnp.array([[0.0, 0.0], [0.0, skew**2]])

    a, b = np.array([0.0, 0.0]), np.array([1.0, 0.0])
    with jax.enable_x64(True):
        for method in ("lm", "action", "adam"):
            with pytest.raises(
                ValueError,
                match=r"metric at waypoint 1 of the initial path, "
                r"x = \[0.2, 0.0\] is not symmetric: max \|G - G\^T\| = 0.64",
            ):
                gfm.solve(a, b, metric=metric, n_points=6, method=method, max_iters=3)
        # a batch names the pair; the first pair is fine (x_0 stays 0: symmetric everywhere)
        x0 = np.stack([a, a])
        x1 = np.stack([np.array([0.0, 1.0]), b])
        with pytest.raises(ValueError, match=r"metric at pair 1, waypoint 1 of the initial"):
            gfm.solve(x0, x1, metric=metric, n_points=6, method="lm", max_iters=3)
        # not positive-definite away from the endpoints, along a given initial path
        init = np.asarray(gfm.chord(a, b, 6)).copy()
        init[3] = [0.5, 3.0]
        indefinite = lambda x: jnp.diag(jnp.array([1.0, 2.0 - x[1]]))  # noqa: E731
        with pytest.raises(
            ValueError,
            match="waypoint 3 of the initial path, x = \\[0.5, 3.0\\] "
            "is not positive-definite: smallest eigenvalue -1",
        ):
            gfm.solve(a, b, metric=indefinite, n_points=6, init=init, method="lm", max_iters=3)


def test_half_plane_rejects_points_on_or_below_the_axis():
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match=r"x1 = \[1.0, 0.0\] has x_d = 0.0"):
            gfm.solve(X0, np.array([1.0, 0.0]), metric=gfm.HalfPlane(), **KW)
        x0 = np.array([[0.0, 1.0], [0.0, -0.5]])
        with pytest.raises(ValueError, match=r"x0\[1\] = \[0.0, -0.5\]"):
            gfm.solve(x0, x0 + 1.0, metric=gfm.HalfPlane(), **KW)
        init = np.asarray(gfm.chord(X0, X1, 6)).copy()
        init[2, 1] = -1.0
        with pytest.raises(ValueError, match=r"init\[2\]"):
            gfm.solve(X0, X1, metric=gfm.HalfPlane(), init=init, **KW)


def test_solver_cache_is_keyed_by_dtype():
    score = lambda x: -x  # noqa: E731
    with jax.enable_x64(True):
        before = len(_compiled._SOLVERS)
        p64, _ = gfm.solve(X0, X1, score=score, **KW)
        p32, _ = gfm.solve(X0.astype(np.float32), X1.astype(np.float32), score=score, **KW)
        assert len(_compiled._SOLVERS) == min(before + 2, _compiled._MAX_SOLVERS)
        assert p64.dtype == jnp.float64 and p32.dtype == jnp.float32
        assert bool(jnp.all(jnp.isfinite(p32)))


@pytest.mark.parametrize("save_x64", [False, True])
def test_saved_denoiser_loads_under_either_x64_setting(tmp_path, save_x64):
    cfg = DenoiserConfig(width=8, n_blocks=1, embed_dim=4)
    with jax.enable_x64(save_x64):
        model = EDMDenoiser(3, cfg, key=jax.random.key(1))
        model = jax.tree.map(lambda a: a + 0.01 if eqx_float(a) else a, model)
        save_denoiser(tmp_path, model, cfg)
        x = jnp.array([0.3, -0.2, 0.5])
        ref = np.asarray(model(x, jnp.asarray(0.1)))
    for load_x64 in (False, True):
        with jax.enable_x64(load_x64):
            loaded = load_denoiser(tmp_path)
            dtype = jnp.float64 if load_x64 else jnp.float32
            assert loaded.input_proj.weight.dtype == dtype
            out = loaded(jnp.asarray(x, dtype), jnp.asarray(0.1, dtype))
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def eqx_float(a):
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating)
