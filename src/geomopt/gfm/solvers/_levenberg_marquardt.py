"""Levenberg-Marquardt with banded linear algebra: GFM's ``method="lm"`` (and the polish of
``method="action"``), for the GFM residual (window 3) and the baselines' path energies (window 2).

The unknowns are the interior waypoints of a path with fixed endpoints. Every residual row
depends on a window of ``window`` consecutive waypoints, so the Jacobian is block-banded.
``J^T J`` is assembled from the per-window Jacobian blocks (forward mode on the local
residual, vmapped over windows: ``window`` block columns, never the dense Jacobian; taken from
the linearisation kept when the
trial's residual was evaluated, see :func:`_linearised_rows`) and the damped normal equations
``(J^T J + mu I) v = -J^T r`` are solved by the block-banded elimination of :mod:`._banded` in
``O(K d^3)``. Nielsen's damping update, starting from ``mu = 1e-3 max diag(J^T J)`` (Madsen,
Nielsen & Tingleff's general-purpose choice; 1e-6 let the first steps overshoot and be
rejected on the learned torus potentials). Geodesic acceleration (Transtrum & Sethna 2012, on by
default): the step is ``v + a/2`` with ``a = -(J^T J + mu I)^{-1} J^T r_vv``, ``r_vv`` the
second directional derivative of the residual along ``v`` (nested forward-mode ``jvp``, one
more banded solve), accepted only while ``2|a| <= 0.75 |v|``; on a learned potential that
confines the path to a thin shell (a narrow, curved valley of the residual) this keeps LM
from stepping across it. A step is accepted only if the residual decreases. Besides
``tol`` / ``gtol`` / ``max_iters`` it stops, unconverged ("stalled"), when the steps become
negligible or ten accepted steps in a row each cut the cost by < 0.1% (code 3), or when the
residual's rate of decrease over the last 10 iterations is too slow to reach ``tol`` within
ten times the iterations left, judged only in the second half of ``max_iters`` and while the
damping is not falling (code 7). A non-finite trial
path, residual or Jacobian stops the solve ("diverged", code 6) with the iteration and the
first offending waypoint, and the last finite path is returned.

We do not use ``optimistix.LevenbergMarquardt``: with a lineax operator it either materialises the
dense ``(K d)^2`` normal matrix or runs an unpreconditioned iterative solve, while the banded
solve here costs ``O(K d^3)`` per step and is exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._status import RUNNING
from ._banded import solve_block_pentadiagonal
from ._interface import (
    AbstractPathSolver,
    BandedSolver,
    PathProblem,
    cost_of,
    eval_rows,
    first_bad,
    iterate,
    normal_equations,
    rms_of,
    row_dim,
    stop_code,
    windows,
)

__all__ = ["LM", "LevenbergMarquardt"]


def _linearised_rows(path, local, window):
    """The residual rows at ``path`` and, per waypoint of the window, their forward-mode
    linearisation (:func:`jax.linearize`): the residual's intermediates are kept, so the Jacobian
    blocks (:func:`_blocks_of`) later cost only the tangent pass, not a second evaluation of the
    residual (and of the score inside it). The ``window`` primal evaluations are identical and
    XLA computes them once."""
    pts = windows(path, window)
    lins = []
    for a in range(window):
        rows = lambda x, a=a: jax.vmap(local)(*pts[:a], x, *pts[a + 1 :])  # noqa: E731
        w, lin = jax.linearize(rows, pts[a])
        lins.append(lin)
    return w, tuple(lins)


def _blocks_of(lins, m: int, d: int, dtype):
    """Per-window Jacobian blocks ``(m, r, d)`` from :func:`_linearised_rows`' linearisations
    (``d`` tangents each: the same numbers as :func:`_eval`'s ``jacfwd``)."""
    basis = jnp.broadcast_to(jnp.eye(d, dtype=dtype)[:, None, :], (d, m, d))
    return tuple(jnp.moveaxis(jax.vmap(lin)(basis), 0, -1) for lin in lins)


# LM's "too slow to finish" rule (code 7): over the last _SLOW_WINDOW iterations (rejected trial
# steps included) the residual norm fell at a rate at which reaching tol would take more than
# _SLOW_FACTOR times the iterations left (judged in the second half of the budget only). Such a
# solve would end at max_iters anyway; on the torus tube potential (a force that jumps across
# the medial axis of the torus) these are pairs whose residual has no zero, where LM otherwise
# crawls to max_iters and holds up a vmapped batch.
_SLOW_WINDOW = 10
_SLOW_FACTOR = 10.0


def _jt(w, jac, n_points: int, window: int):
    """``J^T w`` at the interior waypoints, from the per-window Jacobian blocks."""
    m = w.shape[0]
    g = jnp.zeros((n_points, jac[0].shape[-1]), w.dtype)
    for a in range(window):
        g = g.at[a : a + m].add(jnp.einsum("mri,mr->mi", jac[a], w))
    return g[1 : n_points - 1]


def _second_directional(path, step, local, window):
    """``d^2/dt^2 r(path + t step)`` at ``t = 0``, row by row (nested forward-mode jvp)."""

    def one(*pv):
        p, v = pv[:window], pv[window:]
        return jax.jvp(lambda *q: jax.jvp(local, q, v)[1], p, v)[1]

    return jax.vmap(one)(*windows(path, window), *windows(step, window))


def _select(pred, true_fn, false_fn):
    """``lax.cond`` as a select: both branches run (what vmap makes of a batched cond)."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), true_fn(), false_fn())


def _batch_cond(axis: str, active):
    """A per-pair ``pred ? true_fn() : false_fn()`` for a batch vmapped with ``axis_name=axis``
    whose branches are real ``lax.cond``s: the predicates are counted over the batch's
    ``active`` pairs (``psum``, unbatched), so a branch runs only when some active pair takes
    it, and both run (then a select) only when the active pairs disagree. (A plain ``cond`` on a
    per-pair predicate under ``vmap`` always runs both.) Inactive pairs' results are discarded
    by the vmapped ``while_loop``, so they may take either branch."""

    def branch(pred, true_fn, false_fn):
        n_true = jax.lax.psum((pred & active).astype(jnp.int32), axis)
        n_active = jax.lax.psum(active.astype(jnp.int32), axis)
        mixed = lambda: _select(pred, true_fn, false_fn)  # noqa: E731
        return jax.lax.cond(
            n_true == 0, false_fn, lambda: jax.lax.cond(n_true == n_active, true_fn, mixed)
        )

    return branch


class LevenbergMarquardt(AbstractPathSolver):
    """Levenberg-Marquardt with geodesic acceleration on ``sum_rows |local(window)|^2`` (module
    doc); the first loop pass only evaluates the initial path (one traced evaluation site keeps
    compilation short). ``branches`` / ``batch_axis``: see :func:`geomopt.gfm.minimise_path`."""

    local: Callable
    window: int
    tol: jax.Array
    gtol: jax.Array
    max_iters: jax.Array
    geodesic: bool = True
    accel_ratio: float = 0.75
    slow_factor: float = _SLOW_FACTOR
    damping: float = 1e-3
    branches: bool = True
    batch_axis: str | None = None

    def init(self, path0):
        local, window = self.local, self.window
        k, d = path0.shape
        dtype = path0.dtype
        m = k - window + 1
        r_dim = row_dim(local, path0, window)
        w_init = jnp.zeros((m, r_dim), dtype)
        jac_init = tuple(jnp.zeros((m, r_dim, d), dtype) for _ in range(window))
        ne_init = (
            jnp.zeros((k - 2, d, d), dtype),
            jnp.zeros((k - 3, d, d), dtype),
            jnp.zeros((max(k - 4, 0), d, d), dtype),
            jnp.zeros((k - 2, d), dtype),
        )
        one = jnp.ones((), dtype)
        minus1 = jnp.asarray(-1)
        return (
            path0,
            w_init,
            jac_init,
            ne_init,
            one,
            2.0 * one,
            jnp.asarray(0),
            jnp.asarray(0),
            (jnp.full((_SLOW_WINDOW,), jnp.inf, dtype), jnp.zeros((_SLOW_WINDOW,), dtype)),
            (minus1, minus1),
            jnp.asarray(RUNNING),
            True,
        )

    def _branch(self, state):
        """How a pass skips work: ``lax.cond`` (``branches``), a select of both branches
        (:func:`_select`), or with ``batch_axis`` a cond whose predicates are counted over the
        batch's running pairs (:func:`_batch_cond`)."""
        if self.batch_axis is not None:
            return _batch_cond(self.batch_axis, state[-2] == RUNNING)
        return jax.lax.cond if self.branches else _select

    def _propose(self, path, jac, damped, u1, u2, g):
        """The LM step ``delta`` from the damped normal equations, the step taken (``delta +
        a/2`` with geodesic acceleration) and whether the acceleration test accepts it."""
        local, window, geodesic, accel_ratio = (
            self.local, self.window, self.geodesic, self.accel_ratio
        )  # fmt: skip
        k = path.shape[0]
        delta = solve_block_pentadiagonal(damped, u1, u2, -g)
        if not geodesic:
            return delta, delta, jnp.asarray(True)
        # Geodesic acceleration (Transtrum & Sethna 2012): the second-order correction
        # a = -(J^T J + mu I)^{-1} J^T r_vv along the LM step v, taken as v + a/2 and only
        # while 2|a| <= accel_ratio |v| (otherwise the step counts as rejected and the
        # damping grows). It keeps steps inside narrow curved valleys of the residual.
        full = jnp.zeros_like(path).at[1:-1].set(delta)
        rvv = _second_directional(path, full, local, window)
        acc = solve_block_pentadiagonal(damped, u1, u2, -_jt(rvv, jac, k, window))
        vnorm = jnp.linalg.norm(delta)
        accel_ok = (vnorm == 0) | (2.0 * jnp.linalg.norm(acc) <= accel_ratio * vnorm)
        return delta, delta + 0.5 * acc, accel_ok & jnp.all(jnp.isfinite(acc))

    def _trial_rows(self, branch, trial, w, accel_ok):
        """The trial's residual rows ``w_t`` and ``linearise()``, its Jacobian blocks and normal
        equations: from the linearisation kept with the rows when the pass branches
        (``branches`` or ``batch_axis``), else from one fused :func:`eval_rows`."""
        local, window, geodesic = self.local, self.window, self.geodesic
        k, d = trial.shape
        dtype = trial.dtype
        m = k - window + 1
        linearised = self.branches or self.batch_axis is not None
        if linearised:
            # The trial's rows with their linearisation kept for its Jacobian (below); a pass
            # whose step the acceleration test rejects evaluates neither. The linearisation's
            # leaves cross the cond flattened (zeros when skipped).
            tree = {}

            def rows_and_lin():
                w_e, lins = _linearised_rows(trial, local, window)
                leaves, tree["def"] = jax.tree.flatten(lins)
                return w_e, leaves

            if geodesic:
                shapes = jax.eval_shape(rows_and_lin)[1]
                skipped = lambda: (w, [jnp.zeros(a.shape, a.dtype) for a in shapes])  # noqa: E731
                w_t, leaves = branch(accel_ok, rows_and_lin, skipped)
            else:  # no acceleration test: every pass evaluates its trial, no branch needed
                w_t, leaves = rows_and_lin()
            lins_t = jax.tree.unflatten(tree["def"], leaves)
        else:
            w_t, jac_all = eval_rows(trial, local, window, True)

        def linearise():
            jac_t = _blocks_of(lins_t, m, d, dtype) if linearised else jac_all
            return jac_t, normal_equations(w_t, jac_t, k, window)

        return w_t, linearise

    def _too_slow(self, code, w_n, hist, mu_hist, mu_new, it_n, first):
        """The "too slow to finish" stop (code 7, :data:`_SLOW_WINDOW`) and the residual and
        damping histories with this pass recorded: ``(code, hist, mu_hist)``."""
        tol, max_iters, slow_factor = self.tol, self.max_iters, self.slow_factor
        # Too slow to finish: hist[it % window] holds the residual norm `window` iterations ago
        # and mu_hist the damping then. Judged only in the second half of the budget and not
        # while the damping has fallen 10x over the window: before, LM may still be in its
        # globalisation phase (slow, then quadratic), where the linear extrapolation of the rate
        # badly underestimates the speed-up to come (on the torus run A with a trained
        # denoiser it stopped LM at iteration 10, residual 29.9, on a path that converges).
        rms_n = rms_of(w_n)
        slot = it_n % _SLOW_WINDOW
        rate = (rms_n / hist[slot]) ** (1.0 / _SLOW_WINDOW)  # 0 until the window is full
        needed = jnp.log(tol / rms_n) / jnp.log(rate)  # iterations to tol at this rate
        too_slow = (
            (tol > 0)
            & (rms_n > tol)
            & ((rate >= 1.0) | (needed > slow_factor * (max_iters - it_n)))
            & (mu_new >= 0.1 * mu_hist[slot])
            & (2 * it_n >= max_iters)
        )
        code = jnp.where((code == RUNNING) & too_slow & ~first, 7, code)
        hist = hist.at[slot].set(rms_n)  # every pass is an iteration (it_n = 0 on the first)
        mu_hist = mu_hist.at[slot].set(mu_new)
        return code, hist, mu_hist

    def step(self, state):
        window, tol, gtol, max_iters = self.window, self.tol, self.gtol, self.max_iters
        damping = self.damping
        k, d = state[0].shape
        dtype = state[0].dtype
        xtol = 100.0 * jnp.finfo(dtype).eps
        one = jnp.ones((), dtype)
        path, w, jac, (dg, u1, u2, g), mu, nu, it, slow, (hist, mu_hist), bad, _, first = state
        eye = jnp.eye(d, dtype=dtype)
        damped = dg + mu * eye[None]
        propose = lambda: self._propose(path, jac, damped, u1, u2, g)  # noqa: E731

        # The first pass only evaluates the initial path. Branches (lax.cond) skip work that a
        # pass does not need: the step on the first pass, the trial's residual when the
        # acceleration test already rejects the step, the trial's Jacobian and normal
        # equations when the step is rejected or the trial meets tol. Under vmap a cond on a
        # per-pair predicate runs both branches; with ``batch_axis`` the predicates are
        # counted over the batch (_batch_cond), so a branch no active pair takes is skipped.
        zeros = jnp.zeros_like(path[1:-1])
        branch = self._branch(state)
        delta, step, accel_ok = branch(first, lambda: (zeros, zeros, jnp.asarray(True)), propose)
        trial = path.at[1:-1].add(step)
        w_t, linearise = self._trial_rows(branch, trial, w, accel_ok)
        cost, cost_t = cost_of(w), jnp.where(accel_ok, cost_of(w_t), jnp.inf)
        finite_w = jnp.all(jnp.isfinite(trial)) & jnp.all(jnp.isfinite(w_t))
        pred = 0.5 * jnp.sum(delta * (mu * delta - g))
        rho = (cost - cost_t) / pred
        ok_w = jnp.where(first, finite_w, finite_w & accel_ok & (rho > 0))

        # A path that meets tol needs no Jacobian: the loop stops after this pass (a start
        # handed over converged by the action descent, and the last step of every converged
        # solve, where the Jacobian was a third or more of a short solve's time).
        need_jac = ok_w & ~(rms_of(w_t) <= tol)
        jac_t, ne_t = branch(need_jac, linearise, lambda: (jac, (dg, u1, u2, g)))
        # A non-finite trial residual, or a non-finite Jacobian at a trial that would be
        # accepted, stops the solve (below); the waypoint is named from the trial path, its
        # residual rows and (accepted trials only) its Jacobian blocks.
        bad_wp, any_bad = first_bad(trial, w_t, jac_t, window)
        finite = ~any_bad & jnp.all(jnp.isfinite(ne_t[0]))
        ok = ok_w & finite
        mu_first = damping * jnp.max(jnp.diagonal(ne_t[0], axis1=1, axis2=2))
        mu_first = jnp.where(jnp.isfinite(mu_first) & (mu_first > 0), mu_first, one)
        mu_new = jnp.where(ok, mu * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), mu * nu)
        mu_new = jnp.where(first, mu_first, mu_new)
        nu_new = jnp.where(ok, 2.0, 2.0 * nu)
        sel = lambda a, b: jax.tree.map(lambda p, q: jnp.where(ok, p, q), a, b)  # noqa: E731
        path_n, w_n, jac_n, ne_n = sel((trial, w_t, jac_t, ne_t), (path, w, jac, (dg, u1, u2, g)))
        it_n = jnp.where(first, it, it + 1)
        small = jnp.max(jnp.abs(step)) <= xtol * (jnp.max(jnp.abs(path)) + xtol)
        code = stop_code(rms_of(w_n), jnp.max(jnp.abs(ne_n[3])), it_n, tol, gtol, max_iters)
        # Stalled: 10 accepted steps in a row that each cut the cost by < 0.1% (e.g. a path
        # pinned at a discontinuity of the force), or a negligible step.
        slow_n = jnp.where(ok, jnp.where(cost - cost_t < 1e-3 * cost, slow + 1, 0), slow)
        code = jnp.where((code == RUNNING) & ok & (small | (slow_n >= 10)) & ~first, 3, code)
        code = jnp.where((code == RUNNING) & (mu_new > 1e30), 4, code)
        code, hist, mu_hist = self._too_slow(code, w_n, hist, mu_hist, mu_new, it_n, first)
        # A non-finite trial (path, residual or Jacobian) stops the solve: diverged, named.
        code = jnp.where(~first & ~finite, 6, code)
        bad = jax.tree.map(lambda new, old: jnp.where(~finite, new, old), (it_n, bad_wp), bad)
        code = jnp.where(first & ~finite, 2, code)
        state = (path_n, w_n, jac_n, ne_n, mu_new, nu_new, it_n, slow_n, (hist, mu_hist), bad)
        return (*state, code, False)

    def terminate(self, state):
        return state[-2] != RUNNING

    def postprocess(self, state):
        path, w, _, _, _, _, it, _, _, bad, code, _ = state
        return path, rms_of(w), it, code, bad


@dataclasses.dataclass(frozen=True)
class LM(BandedSolver):
    """Levenberg-Marquardt on the banded Jacobian (this module, ``gfm.LM``): ``geodesic``
    acceleration, the largest accepted ``2|a|/|v|`` (``accel_ratio``), the "too slow" stop
    (``slow_factor``, code 7) and the initial ``damping`` relative to ``max diag(J^T J)``."""

    geodesic: bool = True
    accel_ratio: float = 0.75
    slow_factor: float = _SLOW_FACTOR
    damping: float = 1e-3
    name: ClassVar[str] = "lm"
    max_iters: ClassVar[int] = 200

    def lm_options(self) -> tuple:
        """The options as sorted ``(name, value)`` items."""
        return tuple(sorted(dataclasses.asdict(self).items()))

    def minimise(self, path0, problem: PathProblem, *, tol, gtol, max_iters, branches=True,
                 batch_axis=None):  # fmt: skip
        solver = LevenbergMarquardt(
            problem.local, problem.window, tol, gtol, max_iters, **dict(self.lm_options()),
            branches=branches, batch_axis=batch_axis,
        )  # fmt: skip
        return iterate(solver, path0)
