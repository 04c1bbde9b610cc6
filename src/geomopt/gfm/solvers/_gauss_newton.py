"""Gauss-Newton with a backtracking line search: ``method="gauss_newton"``.

For the square GFM system (one d-vector residual per interior waypoint) the Newton step
``J delta = -r`` is solved directly with the block-tridiagonal Jacobian (which avoids squaring
its condition number, useful in float32), with a backtracking Armijo line search (step halving);
for non-square problems (the baselines' energies) the undamped normal equations are used. Fast
where the start is in Newton's region (torus run B: 4 iterations), but it stalls where LM and the
action descent converge (runs A and C; see ``experiments/gfm/README_solver.md``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._status import RUNNING
from ._banded import solve_block_pentadiagonal, solve_block_tridiagonal
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
)

__all__ = ["GaussNewton", "GaussNewtonLoop"]

_ALPHA_MIN = 2.0**-20


class GaussNewtonLoop(AbstractPathSolver):
    """Gauss-Newton with backtracking (step halving, Armijo); the first pass only evaluates."""

    local: Callable
    window: int
    tol: jax.Array
    gtol: jax.Array
    max_iters: jax.Array

    def _direction(self, w, jac):
        k, d = jac[0].shape[0] + self.window - 1, jac[0].shape[-1]
        dg, u1, u2, g = normal_equations(w, jac, k, self.window)
        if self.window == 3 and w.shape[-1] == d:  # square: Newton on J directly
            delta = solve_block_tridiagonal(jac[0][1:], jac[1], jac[2][:-1], -w)
        else:
            reg = 1e-10 * jnp.max(jnp.diagonal(dg, axis1=1, axis2=2)) * jnp.eye(d, dtype=w.dtype)
            delta = solve_block_pentadiagonal(dg + reg[None], u1, u2, -g)
        return delta, g

    def init(self, path0):
        k, d = path0.shape
        dtype = path0.dtype
        m = k - self.window + 1
        zeros_kd = jnp.zeros((k - 2, d), dtype)
        w0 = jnp.zeros((m, row_dim(self.local, path0, self.window)), dtype)
        minus1 = jnp.asarray(-1)
        one = jnp.ones((), dtype)
        return (path0, w0, zeros_kd, zeros_kd, one, jnp.asarray(0), (minus1, minus1),
                jnp.asarray(RUNNING), True)  # fmt: skip

    def step(self, state):
        path, w, delta, g, alpha, it, bad, _, first = state
        xtol = 100.0 * jnp.finfo(path.dtype).eps
        trial = path.at[1:-1].add(alpha * delta)  # the initial path on the first pass
        w_t, jac_t = eval_rows(trial, self.local, self.window, True)
        cost, cost_t = cost_of(w), cost_of(w_t)
        bad_wp, any_bad = first_bad(trial, w_t, jac_t, self.window)
        finite = ~any_bad
        armijo = cost_t <= cost + 1e-4 * alpha * jnp.sum(g * delta)
        ok = jnp.where(first, finite, finite & armijo)
        delta_t, g_t = self._direction(w_t, jac_t)
        sel = lambda a, b: jax.tree.map(lambda p, q: jnp.where(ok, p, q), a, b)  # noqa: E731
        path_n, w_n, delta_n, g_n = sel((trial, w_t, delta_t, g_t), (path, w, delta, g))
        alpha_n = jnp.where(ok, jnp.ones_like(alpha), 0.5 * alpha)
        it_n = jnp.where(first, it, it + 1)
        small = alpha * jnp.max(jnp.abs(delta)) <= xtol * (jnp.max(jnp.abs(path)) + xtol)
        code = stop_code(rms_of(w_n), jnp.max(jnp.abs(g_n)), it_n, self.tol, self.gtol,
                         self.max_iters)  # fmt: skip
        code = jnp.where((code == RUNNING) & ok & small & ~first, 3, code)
        code = jnp.where((code == RUNNING) & (alpha_n < _ALPHA_MIN), 4, code)
        code = jnp.where(~first & ~finite, 6, code)
        bad = jax.tree.map(lambda new, old: jnp.where(~finite, new, old), (it_n, bad_wp), bad)
        code = jnp.where(first & ~finite, 2, code)
        return (path_n, w_n, delta_n, g_n, alpha_n, it_n, bad, code, False)

    def terminate(self, state):
        return state[-2] != RUNNING

    def postprocess(self, state):
        path, w, _, _, _, it, bad, code, _ = state
        return path, rms_of(w), it, code, bad


@dataclasses.dataclass(frozen=True)
class GaussNewton(BandedSolver):
    """Newton on the square system (block-tridiagonal Jacobian) with a line search
    (:class:`GaussNewtonLoop`, ``gfm.GaussNewton``)."""

    name: ClassVar[str] = "gauss_newton"
    max_iters: ClassVar[int] = 100

    def minimise(self, path0, problem: PathProblem, *, tol, gtol, max_iters, branches=True,
                 batch_axis=None):  # fmt: skip
        return iterate(GaussNewtonLoop(problem.local, problem.window, tol, gtol, max_iters), path0)
