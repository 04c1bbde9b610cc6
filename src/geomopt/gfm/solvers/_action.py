"""Trust-region Newton descent on the path action: GFM's ``method="action"``.

The GFM residual with the Euclidean prior is the gradient of the discrete action::

    S(x) = sum_j 1/2 |x_{j+1} - x_j|^2 / dt^2 + lam sum_i U(x_i)
    -dS/dx_i = a_i + lam s(x_i) = r_i

(``U = -log p``, ``s = grad log p``). Levenberg-Marquardt drives ``|r|^2`` to zero and accepts any
Euler-Lagrange solution it meets: on learned torus potentials it converges from the chord to
solutions that cut through the tube (saddle points of ``S``: the path sits where ``U`` is high)
and it stops at local minima of ``|r|^2`` that are not solutions. This method instead *descends*
``S``: the step solves ``(H + m I) delta = r`` with ``H = -sym(J)`` (the action's Hessian,
block-tridiagonal: ``2/dt^2 I - lam sym(grad s(x_i))`` on the diagonal, ``-1/dt^2 I`` off it),
``m >= mu`` raised until the block Cholesky factorisation of ``H + m I`` succeeds (so the step
is a descent direction for ``S`` even where ``U`` is concave), and the step is accepted when the
action falls by a fraction of the quadratic model's prediction; ``mu`` follows Nielsen's update.
Stationary points it can reach are minima of ``S`` (stable, on-support paths), not saddles.

With a prior metric ``G`` the kinetic term is the midpoint rule
``sum_j 1/2 dx_j^T G((x_j + x_{j+1}) / 2) dx_j / dt^2`` (gradient and Hessian blocks by autodiff).
Its gradient is a different, equally consistent discretisation of the Euler-Lagrange equations
than the official central-difference residual, so the descent only brings the path next to a
minimiser and the LM polish converges to the official residual's solution there.

The potential is known only through its score, so the change of ``lam sum U`` along a step is
the line integral ``-lam sum_i int_0^1 s(x_i + t delta_i) . delta_i dt``, by the corrected
trapezoidal rule ``(f(0) + f(1)) / 2 - (f'(1) - f'(0)) / 12`` with ``f' = delta^T J delta``
(exact for cubic ``f``, like Simpson's rule, but from the scores and score Jacobians at the path
and the trial, which the step computes anyway: no extra score evaluation; Simpson's midpoint
evaluation was a third of an iteration's cost), and the kinetic change is computed from the step
(no cancellation). This is
**approximate for a learned score**: a denoiser's score is not exactly a gradient (on the torus
denoiser the antisymmetric part of its tangential Jacobian is 2 % of the symmetric part at sigma
0.5 and 20-30 % at sigma <= 0.1), so the "action" is then path-dependent and ``sym(J)`` is not the
residual's Jacobian, which slows the final convergence to linear. The descent therefore hands
over to Levenberg-Marquardt (:mod:`._levenberg_marquardt`) once the residual has
fallen by ``handover`` (default 1e-4) relative to the start, or when the descent stalls or uses
half the iteration budget; LM then converges to the solution next to the descent's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._status import RUNNING
from ._banded import small_cholesky, small_tri_solve
from ._interface import AbstractPathSolver, PathProblem, iterate, rms_of
from ._levenberg_marquardt import LM

__all__ = ["Action", "ActionDescent", "score_work"]


def _block_cholesky_solve(diag, off, rhs):
    """Solve ``A x = rhs`` for SPD block-tridiagonal ``A`` (``diag`` (n, d, d), ``off`` (n-1, d, d)
    with ``off[i] = A[i, i+1]``) by block Cholesky. Returns ``(x, ok)``; ``ok`` is False when a
    Schur complement is not positive definite (then ``x`` is not finite)."""
    lower = lambda a, b: small_tri_solve(a, b, transpose=False)  # noqa: E731

    def fwd(carry, inp):
        l_prev, w_prev_rhs = carry
        d_i, u_prev, b_i = inp
        w = lower(l_prev, u_prev)  # L_{i-1}^{-1} A[i-1, i]
        s = d_i - w.T @ w
        l_i = small_cholesky(s)
        y = lower(l_i, b_i - w.T @ w_prev_rhs)
        return (l_i, y), (l_i, w, y)

    l0 = small_cholesky(diag[0])
    y0 = lower(l0, rhs[0])
    _, (ls, ws, ys) = jax.lax.scan(fwd, (l0, y0), (diag[1:], off, rhs[1:]))
    ls = jnp.concatenate([l0[None], ls])
    ys = jnp.concatenate([y0[None], ys])

    def bwd(x_next, inp):
        l_i, w_next, y_i = inp
        x = small_tri_solve(l_i, y_i - w_next @ x_next, transpose=True)
        return x, x

    x_last = small_tri_solve(ls[-1], ys[-1], transpose=True)
    _, xs = jax.lax.scan(bwd, x_last, (ls[:-1], ws, ys[:-1]), reverse=True)
    x = jnp.concatenate([xs, x_last[None]])
    return x, jnp.all(jnp.isfinite(x))


def score_work(delta, s0, j0, s1, j1):
    """``sum_i int_0^1 s(x_i + t delta_i) . delta_i dt`` (the fall of ``U`` along the step) from
    the score ``s0`` / ``s1`` (K, d) and its Jacobian ``j0`` / ``j1`` (K, d, d) at both ends: the
    trapezoidal rule with its Euler-Maclaurin end correction ``-(f'(1) - f'(0)) / 12``, where
    ``f(t) = s(x + t delta) . delta`` and ``f' = delta^T J delta``. Exact when ``f`` is a cubic
    (``U`` a quartic polynomial along the step), like Simpson's rule, without its midpoint score."""
    curv = lambda j: jnp.einsum("ki,kij,kj->", delta, j, delta)  # noqa: E731
    return 0.5 * jnp.sum((s0 + s1) * delta) - (curv(j1) - curv(j0)) / 12.0


def _parts(score, lam, metric, k, d, dtype):
    """The descent's pieces for paths of ``k`` waypoints in ``d`` dimensions: the linearisation
    at a path, the action change of a step and the shifted Hessian solve."""
    dt = 1.0 / (k - 1)
    inv_dt2 = jnp.asarray(1.0 / dt**2, dtype)
    eye = jnp.eye(d, dtype=dtype)
    # the score and its Jacobian at every interior waypoint from one forward-mode pass
    lin = jax.vmap(jax.jacfwd(lambda x: (lambda y: (y, y))(score(x)), has_aux=True))

    def segment(xa, xb):
        dx = xb - xa
        return 0.5 * dx @ (metric(0.5 * (xa + xb)) @ dx) * inv_dt2

    seg_grad = jax.vmap(jax.grad(segment, argnums=(0, 1)))
    seg_hess = jax.vmap(jax.hessian(segment, argnums=(0, 1)))

    def kinetic_parts(path):
        """Gradient (K-2, d) and Hessian blocks (diagonal (K-2, d, d), upper (K-3, d, d)) of the
        kinetic term with respect to the interior waypoints."""
        if metric is None:
            grad = -(path[2:] - 2.0 * path[1:-1] + path[:-2]) * inv_dt2
            diag = jnp.broadcast_to(2.0 * inv_dt2 * eye, (k - 2, d, d))
            return grad, diag, jnp.broadcast_to(-inv_dt2 * eye, (k - 3, d, d))
        ga, gb = seg_grad(path[:-1], path[1:])
        (haa, hab), (_, hbb) = seg_hess(path[:-1], path[1:])
        return gb[:-1] + ga[1:], hbb[:-1] + haa[1:], hab[1:-1]

    def linearise(path):
        """Score ``s`` and its Jacobian ``(s, J)`` ((K-2, d), (K-2, d, d)), the residual
        ``-grad S`` and the blocks of ``H`` at ``path``."""
        js, sc = lin(path[1:-1])
        g_kin, hd_kin, off = kinetic_parts(path)
        hd = hd_kin - lam * 0.5 * (js + jnp.swapaxes(js, 1, 2))
        return (sc, js), lam * sc - g_kin, hd, off

    def action_change(path, delta, lin0, lin1):
        """``S(path + step) - S(path)`` for the interior step ``delta`` (K-2, d), with the score
        and its Jacobian ``lin0`` / ``lin1`` at the path and at the trial (the potential's part
        by the corrected trapezoidal rule, see below)."""
        full = jnp.zeros_like(path).at[1:-1].set(delta)
        if metric is None:  # exact, without the cancellation of a difference of sums
            seg, dseg = path[1:] - path[:-1], full[1:] - full[:-1]
            kinetic = jnp.sum(dseg * (seg + 0.5 * dseg)) * inv_dt2
        else:
            new = path + full
            kinetic = jnp.sum(jax.vmap(segment)(new[:-1], new[1:])) - jnp.sum(
                jax.vmap(segment)(path[:-1], path[1:])
            )
        return kinetic - lam * score_work(delta, *lin0, *lin1)

    def shifted_solve(hd, off, r, mu):
        """Smallest shift ``m = mu + tau`` (tau doubling from 0) with ``H + m I`` SPD."""
        scale = jnp.max(jnp.abs(jnp.diagonal(hd, axis1=1, axis2=2)))

        def cond(c):
            return ~c[2] & (c[0] < 1e30 * scale)

        def body(c):
            tau, _, _ = c
            x, ok = _block_cholesky_solve(hd + (mu + tau) * eye[None], off, r)
            nxt = jnp.where(ok, tau, jnp.maximum(2.0 * tau, 1e-3 * scale))
            return nxt, x, ok

        start = (jnp.zeros((), dtype), jnp.zeros_like(r), False)
        _, x, ok = jax.lax.while_loop(cond, body, start)
        return x, ok

    return linearise, action_change, shifted_solve


class ActionDescent(AbstractPathSolver):
    """Trust-region Newton descent of the discrete action (module doc); traceable.
    ``metric=None`` is the Euclidean prior; otherwise the kinetic term is the midpoint rule
    ``1/2 dx^T G((x_j + x_{j+1}) / 2) dx / dt^2`` with its gradient and Hessian blocks by
    autodiff. Stops when the RMS of the action's gradient is ``<= tol`` (code 0), ``<= handover``
    times its initial value (code 1: hand over), when no step lowers the action (code 4) or the
    steps become negligible (code 3), or after ``max_iters`` iterations (code 1). The path is
    always finite."""

    score: Callable
    lam: jax.Array
    tol: jax.Array
    max_iters: jax.Array
    metric: Callable | None = None
    handover: float = 1e-4
    damping: float = 1e-3

    def _parts(self, k, d, dtype):
        return _parts(self.score, self.lam, self.metric, k, d, dtype)

    def init(self, path0):
        k, d = path0.shape
        linearise, _, _ = self._parts(k, d, path0.dtype)
        s0, r0, hd0, off0 = linearise(path0)
        rms0 = rms_of(r0)
        mu0 = self.damping * jnp.max(jnp.abs(jnp.diagonal(hd0, axis1=1, axis2=2)))
        start_code = jnp.where(rms0 <= self.tol, 0, jnp.where(jnp.isfinite(rms0), RUNNING, 2))
        two, zero = jnp.asarray(2.0, path0.dtype), jnp.asarray(0)
        return (path0, s0, r0, (hd0, off0), mu0, two, zero, rms0, start_code)

    def step(self, state):
        path, sc, r, (hd, off), mu, nu, it, rms0, _ = state
        k, d = path.shape
        linearise, action_change, shifted_solve = self._parts(k, d, path.dtype)
        tol, handover, xtol = self.tol, self.handover, 100.0 * jnp.finfo(path.dtype).eps
        delta, ok_solve = shifted_solve(hd, off, r, mu)
        delta = jnp.where(ok_solve, delta, 0.0)
        # quadratic model of the action change: -r.delta + 1/2 delta^T H delta
        h_delta = jnp.einsum("kij,kj->ki", hd, delta)
        h_delta = h_delta.at[:-1].add(jnp.einsum("kij,kj->ki", off, delta[1:]))
        h_delta = h_delta.at[1:].add(jnp.einsum("kji,kj->ki", off, delta[:-1]))
        pred = -jnp.sum(r * delta) + 0.5 * jnp.sum(delta * h_delta)
        trial = path.at[1:-1].add(delta)
        sc_t, r_t, hd_t, off_t = linearise(trial)
        actual = action_change(path, delta, sc, sc_t)
        rho = actual / pred
        ok = ok_solve & (pred < 0) & (rho > 1e-4) & jnp.isfinite(actual)
        ok = ok & jnp.all(jnp.isfinite(trial)) & jnp.all(jnp.isfinite(r_t))
        ok = ok & jnp.all(jnp.isfinite(hd_t)) & jnp.all(jnp.isfinite(off_t))
        sel = lambda a, b: jax.tree.map(lambda p, q: jnp.where(ok, p, q), a, b)  # noqa: E731
        path_n, sc_n, r_n, h_n = sel((trial, sc_t, r_t, (hd_t, off_t)), (path, sc, r, (hd, off)))
        mu_n = jnp.where(ok, mu * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), mu * nu)
        nu_n = jnp.where(ok, 2.0, 2.0 * nu)
        it_n = it + 1
        rms = rms_of(r_n)
        small = ok & (jnp.max(jnp.abs(delta)) <= xtol * (jnp.max(jnp.abs(path)) + xtol))
        code = jnp.where(rms <= tol, 0, RUNNING)
        code = jnp.where((code == RUNNING) & (rms <= handover * rms0), 1, code)
        code = jnp.where((code == RUNNING) & small, 3, code)
        code = jnp.where((code == RUNNING) & (mu_n > 1e30), 4, code)
        code = jnp.where((code == RUNNING) & (it_n >= self.max_iters), 1, code)
        return (path_n, sc_n, r_n, h_n, mu_n, nu_n, it_n, rms0, code)

    def terminate(self, state):
        return state[-1] != RUNNING

    def postprocess(self, state):
        path, _, r, _, _, _, it, _, code = state
        minus1 = jnp.asarray(-1)
        return path, rms_of(r), it, code, (minus1, minus1)


@dataclasses.dataclass(frozen=True)
class Action(LM):
    """Trust-region Newton descent of the path action (:class:`ActionDescent`, Euclidean or
    metric residual; at most half of ``max_iters``), handing over to :class:`LM` with these
    options to polish (``gfm.Action``). It reaches minima of the action, where LM alone also
    accepts saddles (paths through a torus's hole). Near a solution LM starts almost undamped:
    ``damping`` 1e-9 (one polishing iteration instead of ~7 on the torus pairs)."""

    damping: float = 1e-9
    name: ClassVar[str] = "action"
    # 800, of which at most half descends. At 200 the descent handed over to LM at iteration
    # 100 on 4 of 240 sigma-sweep solves at sigma 0.01 and LM stalled there (code 3); at 400
    # three of the four converge, at 800 all four. A converged solve stops where it converges.
    max_iters: ClassVar[int] = 800

    def minimise(self, path0, problem: PathProblem, *, tol, gtol, max_iters, branches=True,
                 batch_axis=None):  # fmt: skip
        if problem.lam is None:
            raise ValueError(
                "gfm.Action needs the GFM problem's score and lam (it descends the path action): "
                "run it through gfm.solve, or use gfm.LM on this residual"
            )
        score = problem.score if problem.score is not None else jnp.zeros_like
        budget = jnp.maximum(max_iters // 2, 1)
        descent = ActionDescent(score, problem.lam, tol, budget, metric=problem.metric)
        path, _, it1, _, _ = iterate(descent, path0)
        out = super().minimise(
            path, problem, tol=tol, gtol=gtol, max_iters=jnp.maximum(max_iters - it1, 1),
            branches=branches, batch_axis=batch_axis,
        )  # fmt: skip
        return (out[0], out[1], out[2] + it1, *out[3:])
