"""Collocation solvers for GFM and for the path-energy baselines.

The unknowns are the interior waypoints of a path with fixed endpoints. Every residual row
depends on a window of ``window`` consecutive waypoints (3 for the GFM force balance, 2 for the
segment energies of the baselines), so the Jacobian is block-banded. Three methods:

- ``"lm"``: Levenberg-Marquardt on the stacked residuals. ``J^T J`` is assembled from the
  per-window Jacobian blocks (forward mode on the local residual, vmapped over windows:
  ``window`` block columns, never the dense Jacobian; taken from the linearisation kept when the
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
- ``"gauss_newton"``: for the square GFM system (one d-vector residual per interior waypoint) the
  Newton step ``J delta = -r`` is solved directly with the block-tridiagonal Jacobian (which
  avoids squaring its condition number, useful in float32), with a backtracking Armijo line
  search; for non-square problems the undamped normal equations are used.
- ``"adam"``: the official code's optimiser: Adam on the mean squared residual, gradient
  clipping at global norm ``clip``, score treated as a constant, with the ``lr`` / ``eps`` /
  ``clip`` / iterations given (the official settings differ per problem). The official code
  runs a fixed number of iterations; here it also stops once the residual norm reaches ``tol``.

Every stop has a reason code (:data:`REASONS`) and a :class:`Status`: only ``converged``
reached ``tol``; ``stalled``, ``max_iters``, ``diverged`` and ``invalid_start`` did not.

We do not use ``optimistix.LevenbergMarquardt``: with a lineax operator it either materialises the
dense ``(K d)^2`` normal matrix or runs an unpreconditioned iterative solve, while the banded
solve here costs ``O(K d^3)`` per step and is exact.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._banded import solve_block_pentadiagonal, solve_block_tridiagonal

__all__ = ["SolveReport", "REASONS", "Status", "STATUS_OF_CODE", "Method", "minimise_path"]

Method = Literal["lm", "gauss_newton", "adam"]
METHODS: tuple[str, ...] = ("lm", "gauss_newton", "adam")

RUNNING = -1
REASONS: dict[int, str] = {
    0: "converged: residual norm <= tol",
    1: "max_iters reached before the residual norm fell below tol",
    2: "non-finite residual at the initial path (metric not SPD or potential not finite)",
    3: "stalled: steps became negligible before reaching tol (tol below attainable precision "
    "or a local minimum of the residual)",
    4: "stalled: no step decreases the residual (damping / line search exhausted)",
    5: "stationary: gradient of the energy below gtol",
    6: "diverged: the path or residual became non-finite during the solve (the report names the "
    "iteration and waypoint); the last finite path is returned",
    7: "stalled: at the rate of the last iterations the residual would not reach tol within "
    "max_iters (slow linear convergence, e.g. to a local minimum of the residual at a "
    "discontinuity of the force)",
}
CONVERGED_CODES = (0, 5)


class Status(enum.StrEnum):
    """What a solve's reason code means, in four words (a string enum: ``status == "stalled"``).

    Only ``CONVERGED`` reached its tolerance; ``STALLED`` (the solver gave up short of ``tol``:
    negligible steps, no decreasing step, or too slow to finish) is never counted as converged.
    """

    CONVERGED = "converged"
    """Residual norm <= tol (codes 0, 5)."""
    STALLED = "stalled"
    """Stopped short of tol because progress stopped or became too slow (codes 3, 4, 7)."""
    MAX_ITERS = "max_iters"
    """Ran out of iterations while still progressing (code 1)."""
    DIVERGED = "diverged"
    """The path or residual became non-finite during the solve (code 6)."""
    INVALID_START = "invalid_start"
    """Non-finite residual at the initial path (code 2)."""


STATUS_OF_CODE: dict[int, Status] = {
    0: Status.CONVERGED,
    5: Status.CONVERGED,
    1: Status.MAX_ITERS,
    3: Status.STALLED,
    4: Status.STALLED,
    7: Status.STALLED,
    6: Status.DIVERGED,
    2: Status.INVALID_START,
}


@dataclasses.dataclass(frozen=True)
class SolveReport:
    """Outcome of a solve; for a batch every field except ``wall_time`` is an array over pairs.

    Attributes:
        iterations: optimiser iterations taken (LM counts rejected trial steps too).
        residual: final ``sqrt(mean_i r_i^T G(x_i) r_i)`` (GFM) or ``sqrt(mean_i |e_i|^2)``.
        converged: residual reached ``tol`` (or, for energies, the gradient reached ``gtol``);
            the same as ``status == "converged"``.
        code: the reason code, a key of :data:`REASONS`.
        wall_time: seconds of the whole (batched) solve, compilation included on a first call.
        method: the method used.
        bad_iteration, bad_waypoint: for a solve that diverged (code 6), the iteration at which
            the path or residual became non-finite and the first offending waypoint; -1
            otherwise (and ``None`` where a solver does not track them).
    """

    iterations: np.ndarray
    residual: np.ndarray
    converged: np.ndarray
    code: np.ndarray
    wall_time: float
    method: str
    bad_iteration: np.ndarray | None = None
    bad_waypoint: np.ndarray | None = None

    @property
    def status(self):
        """:class:`Status` of the solve (a NumPy object array of them for a batch)."""
        codes = np.asarray(self.code)
        if codes.ndim == 0:
            return STATUS_OF_CODE[int(codes)]
        out = np.empty(codes.shape, object)
        for i, c in np.ndenumerate(codes):
            out[i] = STATUS_OF_CODE[int(c)]
        return out

    def _reason(self, code, bad_it, bad_wp) -> str:
        text = REASONS[int(code)]
        if int(code) == 6 and bad_it is not None and int(bad_it) >= 0:
            text += f" [iteration {int(bad_it)}, waypoint {int(bad_wp)}]"
        return text

    @property
    def reason(self):
        """Human-readable reason(s) for stopping."""
        codes = np.asarray(self.code)
        n = codes.size
        its = [None] * n if self.bad_iteration is None else np.asarray(self.bad_iteration).ravel()
        wps = [None] * n if self.bad_waypoint is None else np.asarray(self.bad_waypoint).ravel()
        texts = [self._reason(c, i, w) for c, i, w in zip(codes.ravel(), its, wps, strict=True)]
        return texts[0] if codes.ndim == 0 else texts

    def __getitem__(self, i) -> SolveReport:
        """The report of pair ``i`` of a batched solve."""
        pick = lambda a: None if a is None else np.asarray(a)[i]  # noqa: E731
        return SolveReport(
            np.asarray(self.iterations)[i],
            np.asarray(self.residual)[i],
            np.asarray(self.converged)[i],
            np.asarray(self.code)[i],
            self.wall_time,
            self.method,
            pick(self.bad_iteration),
            pick(self.bad_waypoint),
        )


def _windows(path, window):
    m = path.shape[0] - window + 1
    return tuple(path[j : j + m] for j in range(window))


def _eval(path, local, window, with_jac: bool):
    pts = _windows(path, window)
    w = jax.vmap(local)(*pts)
    if not with_jac:
        return w, None
    # One jacfwd per waypoint of the window, not one over all of them: an input that is not
    # differentiated stays a constant, so e.g. the score at the middle waypoint is pushed
    # forward along d tangents instead of window * d (about 2x faster for GFM on the torus).
    jac = tuple(jax.vmap(jax.jacfwd(local, argnums=a))(*pts) for a in range(window))
    return w, jac


def _linearised_rows(path, local, window):
    """The residual rows at ``path`` and, per waypoint of the window, their forward-mode
    linearisation (:func:`jax.linearize`): the residual's intermediates are kept, so the Jacobian
    blocks (:func:`_blocks_of`) later cost only the tangent pass, not a second evaluation of the
    residual (and of the score inside it). The ``window`` primal evaluations are identical and
    XLA computes them once."""
    pts = _windows(path, window)
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


def _normal_equations(w, jac, n_points: int, window: int):
    """Interior blocks ``(diag, upper1, upper2)`` of ``J^T J`` and the gradient ``J^T w``."""
    k, d = n_points, jac[0].shape[-1]
    m = w.shape[0]
    dtype = w.dtype
    diag = jnp.zeros((k, d, d), dtype)
    up1 = jnp.zeros((k - 1, d, d), dtype)
    up2 = jnp.zeros((max(k - 2, 0), d, d), dtype)
    g = jnp.zeros((k, d), dtype)
    for a in range(window):
        g = g.at[a : a + m].add(jnp.einsum("mri,mr->mi", jac[a], w))
        for b in range(a, window):
            blk = jnp.einsum("mri,mrj->mij", jac[a], jac[b])
            if b == a:
                diag = diag.at[a : a + m].add(blk)
            elif b == a + 1:
                up1 = up1.at[a : a + m].add(blk)
            else:
                up2 = up2.at[a : a + m].add(blk)
    return diag[1 : k - 1], up1[1 : k - 2], up2[1 : k - 3], g[1 : k - 1]


def _cost(w):
    return 0.5 * jnp.sum(w**2)


def _rms(w):
    return jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))


def _stop_code(rms, gnorm, it, tol, gtol, max_iters):
    return jnp.where(
        rms <= tol,
        0,
        jnp.where(gnorm <= gtol, 5, jnp.where(it >= max_iters, 1, RUNNING)),
    )


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

    return jax.vmap(one)(*_windows(path, window), *_windows(step, window))


def _first_bad(path, w, jac, window):
    """Index of the first waypoint where the path, or a residual row / Jacobian block that
    involves it, is non-finite (rows are attributed to their window's centre); -1 if none."""
    k = path.shape[0]
    bad = ~jnp.all(jnp.isfinite(path), axis=-1)
    rows = ~jnp.all(jnp.isfinite(w.reshape(w.shape[0], -1)), axis=-1)
    for j in jac:
        rows = rows | ~jnp.all(jnp.isfinite(j.reshape(j.shape[0], -1)), axis=-1)
    off = (window - 1) // 2
    bad = bad.at[off : off + rows.shape[0]].set(bad[off : off + rows.shape[0]] | rows)
    return jnp.where(jnp.any(bad), jnp.argmax(bad), -1), jnp.any(bad) & (k > 0)


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


def _lm(path0, local, window, tol, gtol, max_iters, geodesic=True, accel_ratio=0.75,
        slow_factor=_SLOW_FACTOR, damping=1e-3, branches=True, batch_axis=None):  # fmt: skip
    """Levenberg-Marquardt with geodesic acceleration; the first loop pass only evaluates the
    initial path (one traced evaluation site keeps compilation short). ``branches`` /
    ``batch_axis``: see :func:`minimise_path`."""
    k, d = path0.shape
    dtype = path0.dtype
    xtol = 100.0 * jnp.finfo(dtype).eps
    m = k - window + 1
    r_dim = jax.eval_shape(local, *_windows(path0, window)[0][:1].repeat(window, 0))
    w_init = jnp.zeros((m,) + r_dim.shape, dtype)
    jac_init = tuple(jnp.zeros((m,) + r_dim.shape + (d,), dtype) for _ in range(window))
    ne_init = (
        jnp.zeros((k - 2, d, d), dtype),
        jnp.zeros((k - 3, d, d), dtype),
        jnp.zeros((max(k - 4, 0), d, d), dtype),
        jnp.zeros((k - 2, d), dtype),
    )
    one = jnp.ones((), dtype)
    minus1 = jnp.asarray(-1)
    state0 = (
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

    def cond(state):
        return state[-2] == RUNNING

    def body(state):
        path, w, jac, (dg, u1, u2, g), mu, nu, it, slow, (hist, mu_hist), bad, _, first = state
        eye = jnp.eye(d, dtype=dtype)
        damped = dg + mu * eye[None]

        def propose():
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

        # The first pass only evaluates the initial path. Branches (lax.cond) skip work that a
        # pass does not need: the step on the first pass, the trial's residual when the
        # acceleration test already rejects the step, the trial's Jacobian and normal
        # equations when the step is rejected or the trial meets tol. Under vmap a cond on a
        # per-pair predicate runs both branches; with ``batch_axis`` the predicates are
        # counted over the batch (_batch_cond), so a branch no active pair takes is skipped.
        zeros = jnp.zeros_like(path[1:-1])
        if batch_axis is not None:
            branch = _batch_cond(batch_axis, state[-2] == RUNNING)
        else:
            branch = jax.lax.cond if branches else _select
        linearised = branches or batch_axis is not None
        delta, step, accel_ok = branch(first, lambda: (zeros, zeros, jnp.asarray(True)), propose)
        trial = path.at[1:-1].add(step)
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
            w_t, jac_all = _eval(trial, local, window, True)
        cost, cost_t = _cost(w), jnp.where(accel_ok, _cost(w_t), jnp.inf)
        finite_w = jnp.all(jnp.isfinite(trial)) & jnp.all(jnp.isfinite(w_t))
        pred = 0.5 * jnp.sum(delta * (mu * delta - g))
        rho = (cost - cost_t) / pred
        ok_w = jnp.where(first, finite_w, finite_w & accel_ok & (rho > 0))

        def linearise():
            jac_t = _blocks_of(lins_t, m, d, dtype) if linearised else jac_all
            return jac_t, _normal_equations(w_t, jac_t, k, window)

        # A path that meets tol needs no Jacobian: the loop stops after this pass (a start
        # handed over converged by the action descent, and the last step of every converged
        # solve, where the Jacobian was a third or more of a short solve's time).
        need_jac = ok_w & ~(_rms(w_t) <= tol)
        jac_t, ne_t = branch(need_jac, linearise, lambda: (jac, (dg, u1, u2, g)))
        # A non-finite trial residual, or a non-finite Jacobian at a trial that would be
        # accepted, stops the solve (below); the waypoint is named from the trial path, its
        # residual rows and (accepted trials only) its Jacobian blocks.
        bad_wp, any_bad = _first_bad(trial, w_t, jac_t, window)
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
        code = _stop_code(_rms(w_n), jnp.max(jnp.abs(ne_n[3])), it_n, tol, gtol, max_iters)
        # Stalled: 10 accepted steps in a row that each cut the cost by < 0.1% (e.g. a path
        # pinned at a discontinuity of the force), or a negligible step.
        slow_n = jnp.where(ok, jnp.where(cost - cost_t < 1e-3 * cost, slow + 1, 0), slow)
        code = jnp.where((code == RUNNING) & ok & (small | (slow_n >= 10)) & ~first, 3, code)
        code = jnp.where((code == RUNNING) & (mu_new > 1e30), 4, code)
        # Too slow to finish: hist[it % window] holds the residual norm `window` iterations ago
        # and mu_hist the damping then. Judged only in the second half of the budget and not
        # while the damping has fallen 10x over the window: before, LM may still be in its
        # globalisation phase (slow, then quadratic), where the linear extrapolation of the rate
        # badly underestimates the speed-up to come (on the torus run A with a trained
        # denoiser it stopped LM at iteration 10, residual 29.9, on a path that converges).
        rms_n = _rms(w_n)
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
        # A non-finite trial (path, residual or Jacobian) stops the solve: diverged, named.
        code = jnp.where(~first & ~finite, 6, code)
        bad = jax.tree.map(lambda new, old: jnp.where(~finite, new, old), (it_n, bad_wp), bad)
        code = jnp.where(first & ~finite, 2, code)
        state = (path_n, w_n, jac_n, ne_n, mu_new, nu_new, it_n, slow_n, (hist, mu_hist), bad)
        return (*state, code, False)

    path, w, _, _, _, _, it, _, _, bad, code, _ = jax.lax.while_loop(cond, body, state0)
    return path, _rms(w), it, code, bad


_ALPHA_MIN = 2.0**-20


def _gauss_newton(path0, local, window, tol, gtol, max_iters):
    """Gauss-Newton with backtracking (step halving, Armijo); the first pass only evaluates."""
    k, d = path0.shape
    dtype = path0.dtype
    xtol = 100.0 * jnp.finfo(dtype).eps
    m = k - window + 1
    r_dim = jax.eval_shape(local, *_windows(path0, window)[0][:1].repeat(window, 0)).shape[-1]
    square = window == 3 and r_dim == d

    def direction(w, jac):
        dg, u1, u2, g = _normal_equations(w, jac, k, window)
        if square:
            delta = solve_block_tridiagonal(jac[0][1:], jac[1], jac[2][:-1], -w)
        else:
            reg = 1e-10 * jnp.max(jnp.diagonal(dg, axis1=1, axis2=2)) * jnp.eye(d, dtype=dtype)
            delta = solve_block_pentadiagonal(dg + reg[None], u1, u2, -g)
        return delta, g

    one = jnp.ones((), dtype)
    zeros_kd = jnp.zeros((k - 2, d), dtype)
    state0 = (
        path0,
        jnp.zeros((m, r_dim), dtype),
        zeros_kd,
        zeros_kd,
        one,
        jnp.asarray(0),
        (jnp.asarray(-1), jnp.asarray(-1)),
        jnp.asarray(RUNNING),
        True,
    )

    def cond(state):
        return state[-2] == RUNNING

    def body(state):
        path, w, delta, g, alpha, it, bad, _, first = state
        trial = path.at[1:-1].add(alpha * delta)  # the initial path on the first pass
        w_t, jac_t = _eval(trial, local, window, True)
        cost, cost_t = _cost(w), _cost(w_t)
        bad_wp, any_bad = _first_bad(trial, w_t, jac_t, window)
        finite = ~any_bad
        armijo = cost_t <= cost + 1e-4 * alpha * jnp.sum(g * delta)
        ok = jnp.where(first, finite, finite & armijo)
        delta_t, g_t = direction(w_t, jac_t)
        sel = lambda a, b: jax.tree.map(lambda p, q: jnp.where(ok, p, q), a, b)  # noqa: E731
        path_n, w_n, delta_n, g_n = sel((trial, w_t, delta_t, g_t), (path, w, delta, g))
        alpha_n = jnp.where(ok, one, 0.5 * alpha)
        it_n = jnp.where(first, it, it + 1)
        small = alpha * jnp.max(jnp.abs(delta)) <= xtol * (jnp.max(jnp.abs(path)) + xtol)
        code = _stop_code(_rms(w_n), jnp.max(jnp.abs(g_n)), it_n, tol, gtol, max_iters)
        code = jnp.where((code == RUNNING) & ok & small & ~first, 3, code)
        code = jnp.where((code == RUNNING) & (alpha_n < _ALPHA_MIN), 4, code)
        code = jnp.where(~first & ~finite, 6, code)
        bad = jax.tree.map(lambda new, old: jnp.where(~finite, new, old), (it_n, bad_wp), bad)
        code = jnp.where(first & ~finite, 2, code)
        return (path_n, w_n, delta_n, g_n, alpha_n, it_n, bad, code, False)

    path, w, _, _, _, it, bad, code, _ = jax.lax.while_loop(cond, body, state0)
    return path, _rms(w), it, code, bad


def _adam(path0, local, window, tol, gtol, max_iters, lr, clip, eps, reduce):
    """Adam as in the official code (clip by global norm, then Adam), plus a residual stop."""
    opt = optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr, eps=eps))
    x0, x1 = path0[0], path0[-1]
    m = path0.shape[0] - window + 1

    def full(inner):
        return jnp.concatenate([x0[None], inner, x1[None]], axis=0)

    def loss_fn(inner):
        w = _eval(full(inner), local, window, False)[0]
        sq = jnp.sum(w**2, axis=-1)
        return jnp.mean(sq) if reduce == "mean" else jnp.sum(sq), w

    def cond(state):
        return state[-1] == RUNNING

    def body(state):
        inner, prev, opt_state, w_prev, it, where, _ = state
        (_, w), g = jax.value_and_grad(loss_fn, has_aux=True)(inner)
        # A non-finite gradient row is attributed to its waypoint via a padded pseudo-path.
        g_rows = jnp.zeros_like(path0).at[1:-1].set(g)
        bad_wp, bad = _first_bad(full(inner) + 0.0 * g_rows, w, (), window)
        code = _stop_code(_rms(w), jnp.max(jnp.abs(g)), it, tol, gtol, max_iters)
        code = jnp.where(bad, jnp.where(it == 0, 2, 6), code)
        where = jax.tree.map(lambda new, old: jnp.where(bad, new, old), (it, bad_wp), where)
        upd, opt_state_n = opt.update(g, opt_state, inner)
        inner_n = jnp.where(code == RUNNING, optax.apply_updates(inner, upd), inner)
        # On a non-finite evaluation fall back to the last finite iterate.
        inner_n = jnp.where(bad, prev, inner_n)
        w = jnp.where(bad, w_prev, w)
        it_n = jnp.where(code == RUNNING, it + 1, it)
        return (inner_n, inner, opt_state_n, w, it_n, where, code)

    inner0 = path0[1:-1]
    r_dim = jax.eval_shape(local, *_windows(path0, window)[0][:1].repeat(window, 0)).shape[-1]
    w0 = jnp.full((m, r_dim), jnp.nan, path0.dtype)
    minus1 = jnp.asarray(-1)
    state0 = (inner0, inner0, opt.init(inner0), w0, jnp.asarray(0), (minus1, minus1),
              jnp.asarray(RUNNING))  # fmt: skip
    inner, _, _, w, it, where, code = jax.lax.while_loop(cond, body, state0)
    return full(inner), _rms(w), it, code, where


def minimise_path(
    path0,
    local: Callable,
    *,
    window: int,
    method: str,
    tol,
    gtol,
    max_iters,
    lr=0.05,
    clip=10.0,
    eps=1e-8,
    reduce: Literal["mean", "sum"] = "mean",
    diagnostics: bool = False,
    lm_options: dict | None = None,
    branches: bool = True,
    batch_axis: str | None = None,
):
    """Minimise ``sum_rows |local(window of waypoints)|^2`` over the interior of ``path0``.

    Traceable (call it inside ``jit``/``vmap``). ``local`` maps ``window`` consecutive waypoints
    to one residual row; rows run over all windows of the path. Returns
    ``(path, rms_residual, iterations, code)``, and with ``diagnostics=True`` also
    ``(bad_iteration, bad_waypoint)`` (where a diverged solve met a non-finite value; -1 when
    none). ``reduce`` only affects Adam's loss scale (``"mean"`` as in the official GFM loss,
    ``"sum"`` for path energies); ``lr`` / ``clip`` / ``eps`` are Adam's (PyTorch's default eps
    1e-8; the official 3-D shape runs use 1e-5). ``lm_options`` passes ``geodesic`` (default
    True), ``accel_ratio`` (0.75), ``slow_factor`` (10) and ``damping`` (1e-3: the initial
    damping relative to ``max diag(J^T J)``) to Levenberg-Marquardt. LM skips the parts of a
    pass it does not need with ``lax.cond`` (``branches=True``), which pays only where the
    predicates are not batched: for a single path (not under ``vmap``), or for a batch vmapped
    with ``axis_name=batch_axis``, where a part is skipped when no active pair of the batch
    needs it. ``branches=False`` (for a batch vmapped without an axis name, where every cond
    runs both branches) computes every part of a pass in one fused evaluation instead.
    """
    if method == "lm":
        opts = dict(lm_options or {}, branches=branches, batch_axis=batch_axis)
        out = _lm(path0, local, window, tol, gtol, max_iters, **opts)
    elif method == "gauss_newton":
        out = _gauss_newton(path0, local, window, tol, gtol, max_iters)
    elif method == "adam":
        out = _adam(path0, local, window, tol, gtol, max_iters, lr, clip, eps, reduce)
    else:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    return out if diagnostics else out[:4]
