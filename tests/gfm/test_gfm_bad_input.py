"""Bad input is rejected with the bad value named: non-symmetric / indefinite metrics,
half-plane points with y <= 0; complex / bool / str endpoints and initial paths, scores and
metrics of the wrong output shape, non-real scalar hyperparameters (one line each, before the
solve); solver caches keyed by dtype; saved denoisers load under either x64 setting."""

import re

import equinox as eqx
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


def raises_one_line(exc, match, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` raises ``exc`` matching ``match``, with a one-line message."""
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "x0, x1, match",
    [
        # the example: today solved from (0, 0) to (1, 0), the imaginary parts dropped
        ([1j, 0], [1, 2j], r"x0=\[1j, 0\] has dtype complex128: expected real numbers"),
        ([0.0, 1.0], [1, 2j], r"x1=\[1, 2j\] has dtype complex128: expected real numbers"),
        ([True, False], [1.0, 2.0], r"x0=\[True, False\] has dtype bool: expected real numbers"),
        (["0", "1"], [1.0, 2.0], r"x0=\['0', '1'\] has dtype <U1: expected real numbers"),
        (np.zeros((2, 2)), np.ones((2, 2)) * 1j, r"x1=\[\[1j, 1j\], \[1j, 1j\]\] has dtype"),
    ],
)
def test_non_real_endpoints_are_refused_with_their_value(x0, x1, match):
    raises_one_line(TypeError, match, gfm.solve, x0, x1, **KW)


class SumScore(eqx.Module):
    """A module score (an array leaf, like ScoreAt) whose output has the wrong shape."""

    weight: jax.Array

    def __call__(self, x):
        return self.weight * jnp.sum(x)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),  # method "auto": the action descent; was IndexError: index 2 is out of bounds
        dict(method="lm"),
        dict(method="adam", max_iters=2),
        dict(backend="matrix_free"),
        dict(init="sequential"),
        dict(support_sigma=0.1),
    ],
)
def test_score_of_the_wrong_shape_is_named_before_the_solve(kw):
    bad = lambda x: jnp.sum(x)  # noqa: E731
    want = r"score returned shape \(\) for a point of shape \(3,\): expected s\(x\) of shape \(3,\)"
    a, b = np.zeros(3), np.array([1.0, 2.0, 3.0])
    raises_one_line(ValueError, want, gfm.solve, a, b, score=bad, n_points=6, **kw)
    # a batch (B, d) checks the score on one point (d,), as the solver calls it
    raises_one_line(ValueError, want, gfm.solve, np.stack([a, a]), np.stack([b, b]),
                    score=SumScore(jnp.asarray(2.0)), n_points=6, **kw)  # fmt: skip


def test_score_returning_a_matrix_or_complex_numbers_is_named():
    a, b = np.zeros(3), np.array([1.0, 2.0, 3.0])
    raises_one_line(ValueError, r"score returned shape \(3, 3\) for a point of shape \(3,\)",
                    gfm.solve, a, b, score=lambda x: jnp.outer(x, x), n_points=6)  # fmt: skip
    raises_one_line(TypeError, r"score returned dtype complex64 .*expected real numbers",
                    gfm.solve, a, b, score=lambda x: 1j * x, n_points=6)  # fmt: skip


@pytest.mark.parametrize(
    "metric, got",
    [
        (lambda x: jnp.eye(3), r"\(3, 3\)"),  # was a raw dot_general error
        (lambda x: jnp.ones(2), r"\(2,\)"),  # the diagonal alone, not G(x)
        (gfm.Diagonal(lambda x: jnp.ones(3)), r"\(3, 3\)"),
    ],
)
@pytest.mark.parametrize("method", ["auto", "lm", "adam"])
def test_metric_of_the_wrong_shape_is_named_before_the_solve(metric, got, method):
    want = rf"metric returned shape {got} for a point of shape \(2,\): expected G\(x\) of shape "
    want += r"\(2, 2\)"
    kw = dict(metric=metric, n_points=6, method=method, max_iters=3)
    raises_one_line(ValueError, want, gfm.solve, X0, X1, **kw)
    raises_one_line(ValueError, want, gfm.solve, np.stack([X0, X0]), np.stack([X1, X1]), **kw)


@pytest.mark.parametrize("name", ["lam", "tol", "lr", "clip", "eps", "support_threshold"])
@pytest.mark.parametrize(
    "value, shown", [(True, "True"), ("1.0", "'1.0'"), (1j, "1j"), (np.array([True]), "")]
)
def test_scalar_hyperparameters_must_be_real_numbers(name, value, shown):
    if shown:
        raises_one_line(TypeError, rf"{name}={re.escape(shown)}: expected a real number [>]",
                        gfm.solve, X0, X1, **(KW | {name: value}))  # fmt: skip
    else:
        raises_one_line(TypeError, rf"{name}=\[True\]: expected a real number",
                        gfm.solve, X0, X1, **(KW | {name: value}))  # fmt: skip


def test_real_scalars_of_any_numeric_type_are_accepted():
    kw = dict(lam=np.float32(0.5), tol=jnp.asarray(1e-3), lr=np.array(0.05), clip=np.int64(5))
    path, rep = gfm.solve(np.array([0, 1]), np.array([1, 2]), score=lambda x: -x, **(KW | kw))
    assert path.shape == (6, 2) and rep.lam == 0.5 and rep.tol == pytest.approx(1e-3)


def test_initial_path_must_be_real_and_of_the_solve_shape():
    line = np.asarray(gfm.chord(X0, X1, 6))
    raises_one_line(TypeError, r"init=.* has dtype complex\d+: expected real numbers, a path of "
                    r"shape \(6, 2\)", gfm.solve, X0, X1, init=line + 0j, **KW)  # fmt: skip
    raises_one_line(TypeError, r"init=.* has dtype bool", gfm.solve, X0, X1, init=line > 0, **KW)
    raises_one_line(ValueError, r"init has shape \(6, 2\), expected \(2, 6, 2\)",
                    gfm.solve, np.stack([X0, X0]), np.stack([X1, X1]), init=line, **KW)  # fmt: skip


@pytest.mark.parametrize("n_points", [True, 6.0, np.float64(6)])
def test_n_points_must_be_an_int(n_points):
    raises_one_line(ValueError, rf"n_points must be an int >= 3, got {re.escape(repr(n_points))}",
                    gfm.solve, X0, X1, n_points=n_points, method="adam")  # fmt: skip


def test_output_shapes_are_checked_once_per_score_structure():
    traces = []

    class Counting(eqx.Module):
        sigma: jax.Array

        def __call__(self, x):
            traces.append(1)  # runs only while tracing
            return -x / self.sigma

    gfm.solve(X0, X1, score=Counting(jnp.asarray(1.0)), **KW)
    n = len(traces)
    gfm.solve(X0, X1, score=Counting(jnp.asarray(2.0)), **KW)  # new values, same structure
    assert len(traces) == n
