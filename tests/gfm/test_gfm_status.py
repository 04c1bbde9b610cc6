"""Honest solve reports: statuses that separate converged / stalled / max_iters / diverged, a
non-finite value mid-solve named by iteration and waypoint, and Adam's hyperparameters."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from geomopt import gfm
from geomopt.gfm._status import STATUS_OF_CODE, Status


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def lift(x):
    """A uniform upward force (the EL solution is the parabola y = 4 t (1 - t) between
    (-1, 0) and (1, 0)), undefined (NaN) above y = 0.3."""
    return jnp.where(x[1] > 0.3, jnp.nan, 1.0) * jnp.array([0.0, 8.0], x.dtype)


X0, X1 = np.array([-1.0, 0.0]), np.array([1.0, 0.0])


def test_every_code_has_a_status_and_only_converged_codes_count():
    assert set(STATUS_OF_CODE) == set(gfm.REASONS)
    for code, status in STATUS_OF_CODE.items():
        assert (status == Status.CONVERGED) == (code in (0, 5))
        if status == Status.STALLED:
            assert gfm.REASONS[code].startswith("stalled")


def test_converged_and_max_iters_statuses():
    _, rep = gfm.solve(
        X0, X1, score=lambda x: jnp.array([0.0, 8.0], x.dtype), n_points=9, method="lm"
    )
    assert rep.status == "converged" and rep.converged
    _, rep = gfm.solve(X0, X1, score=lift, n_points=9, method="adam", max_iters=3)
    assert rep.status == Status.MAX_ITERS and not rep.converged
    assert rep.bad_iteration == -1 and rep.bad_waypoint == -1


@pytest.mark.parametrize("method", ["lm", "gauss_newton"])
def test_nan_mid_solve_stops_and_names_iteration_and_waypoint(method):
    # The first (Newton-like) step jumps onto the parabola, where waypoint 1 sits at
    # y = 4 (1/8)(7/8) = 0.44 > 0.3 (and so do the others): the score is NaN there.
    path, rep = gfm.solve(X0, X1, score=lift, n_points=9, method=method)
    assert rep.status == Status.DIVERGED and rep.code == 6 and not rep.converged
    assert (int(rep.bad_iteration), int(rep.bad_waypoint)) == (1, 1)
    assert "[iteration 1, waypoint 1]" in rep.reason
    np.testing.assert_allclose(path, gfm.straight_line(X0, X1, 9))  # last finite path


def test_nan_mid_solve_with_adam_names_the_first_waypoint_over_the_edge():
    path, rep = gfm.solve(X0, X1, score=lift, n_points=9, method="adam", lr=0.05)
    assert rep.status == "diverged"
    it, wp = int(rep.bad_iteration), int(rep.bad_waypoint)
    assert 0 < it < 1501 and 1 <= wp <= 7
    assert bool(jnp.all(path[:, 1] <= 0.3))  # the last finite path, below the edge


def test_batch_reports_per_pair_statuses():
    y0 = np.stack([X0, X0])
    y1 = np.stack([X1, X1 + np.array([0.0, 0.1])])
    force = lambda x: jnp.array([0.0, 1.0], x.dtype)  # noqa: E731  parabola max 1/8 < 0.3
    _, rep = gfm.solve(y0, y1, score=force, n_points=9, method="lm")
    assert list(rep.status) == ["converged", "converged"]
    _, rep2 = gfm.solve(y0, y1, score=lift, n_points=9, method="lm")
    assert list(rep2.status) == ["diverged", "diverged"] and rep2[1].bad_waypoint == 1


def test_adam_takes_lr_eps_clip_as_given():
    # Oracle: the same loss minimised by a plain optax loop (clip, then Adam with eps).
    k, lr, eps, clip, iters = 7, 0.01, 1e-3, 0.5, 5

    def score(x):
        return -x + jnp.array([0.0, 2.0], x.dtype)

    path, rep = gfm.solve(X0, X1, score=score, n_points=k, method="adam", lr=lr, eps=eps,
                          clip=clip, max_iters=iters, tol=1e-30)  # fmt: skip
    line = gfm.straight_line(jnp.asarray(X0), jnp.asarray(X1), k)

    def detached(x):  # the official code's constant force
        return jax.lax.stop_gradient(score(x))

    def loss(inner):
        p = jnp.concatenate([line[:1], inner, line[-1:]])
        return jnp.mean(jnp.sum(gfm.path_residuals(p, lam=1.0, score=detached, metric=None,
                                                   kind="euclidean") ** 2, -1))  # fmt: skip

    opt = optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr, eps=eps))
    inner = line[1:-1]
    state = opt.init(inner)
    for _ in range(iters):
        upd, state = opt.update(jax.grad(loss)(inner), state, inner)
        inner = optax.apply_updates(inner, upd)
    np.testing.assert_allclose(path[1:-1], inner, atol=1e-6)  # Adam amplifies rounding
    assert rep.iterations == iters
    other, _ = gfm.solve(X0, X1, score=score, n_points=k, method="adam", lr=lr, eps=1.0,
                         clip=clip, max_iters=iters, tol=1e-30)  # fmt: skip
    assert float(jnp.max(jnp.abs(other - path))) > 1e-4  # eps is used, not hard-coded
