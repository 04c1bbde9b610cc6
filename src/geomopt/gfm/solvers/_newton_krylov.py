"""The matrix-free solver phases of :func:`geomopt.gfm.solve_matrix_free`
(:mod:`geomopt.gfm._matrix_free`), and :class:`MatrixFree`, their options: inexact
Newton-GMRES, then Levenberg-Marquardt with PCG where Newton's line search fails, and their
stencil preconditioner.

The banded solvers (:mod:`._levenberg_marquardt`) form dense ``d x d`` Jacobian blocks:
``O(K d^2)`` memory and ``O(K d^3)`` work per iteration, gigabytes at ``d = 4096``. Here the
Jacobian is never formed. Each iteration linearises the stacked residual
``R(x_1..x_{K-2}) in R^{(K-2) x d}`` once (``jax.linearize``: the JVP, and its transpose, the
VJP) and solves a linear system with Krylov steps on those products only.

**Newton-GMRES (``method="newton"``, the default).** ``R`` has as many rows as unknowns, so the
Newton step solves ``J delta = -R`` directly: GMRES, right-preconditioned, one JVP per step
(CG on the normal equations needs a JVP and a VJP per step and squares the condition number).
GMRES stops at ``|R + J delta| <= eta_k |R|``, ``eta_k = min(0.1, sqrt(|R_k| / |R_0|))``
(Eisenstat-Walker type forcing), or once the linear model is at half of ``tol`` (no solve
beyond what the tolerance needs). A backtracking line search (``t = 1, 1/2, 1/4, 1/8``, Armijo
on ``|R|^2``) globalises it; an inexact Newton step with ``eta < 1`` is a descent direction of
``|R|^2``. If no step length decreases ``|R|^2`` enough (``J`` near singular, a strongly
nonlinear force), the LM below continues from that point. On the latent benchmark
(``benchmarks/bench_gfm_latent.py``, d = 512 to 16,384) Newton reaches the official Adam's final
residual in 2 iterations and 5-6 GMRES steps in total, where LM takes 2-3 iterations and 16-24
CG steps. Memory: the GMRES basis, ``gmres_max_iters + 1`` arrays of shape ``(K-2, d)``
(GMRES and PCG: :mod:`._krylov`).

**Levenberg-Marquardt (``method="lm"``, and the fallback).** Damped normal equations
``(J^T J + mu I) delta = -J^T r`` by preconditioned conjugate gradients (PCG) using only
``v -> J^T (J v)``: memory ``O(K d)`` plus the network's activations at the ``K - 2``
waypoints. CG stops at relative residual ``eta_k = min(0.1, sqrt(|g_k| / |g_0|))`` or after
``cg_max_iters``. The gain ratio uses the model ``-(g . delta) - |J delta|^2 / 2`` with
``|J delta|^2`` from CG's residual (no extra JVP), Nielsen's damping update, and a step is
accepted only if the residual stays finite and the cost decreases, so the returned path is
never NaN.

**Preconditioner.** For the Euclidean residual ``r_i = a_i + lam s(x_i)`` the Jacobian is
``J = C (x) I_d + lam S`` where ``C`` is the ``(K-2) x (K-2)`` second-difference matrix of the
acceleration stencil (``1/dt^2 tridiag(1, -2, 1)``, the same for every coordinate) and
``S = blockdiag(ds/dx(x_i))`` the score Jacobians. We approximate ``J`` by ``B (x) I_d`` with
``B = C + diag(c_i)``, ``c_i`` an estimate of the mean eigenvalue of the ``i``-th diagonal block
of ``J - C (x) I_d`` (one Rademacher probe ``v``: ``c_i = <v_i, (J v - C v)_i> / d``; ``c = 0``
with ``precond="fd"``). Newton uses ``(B^T B + eps I)^{-1} B^T`` (``B^{-1}`` where ``B`` is well
conditioned), LM ``(B^T B + mu I)^{-1}``, each applied as a ``(K-2) x (K-2)`` matrix times a
``(K-2) x d`` array. For a score whose Jacobian is close to a multiple of the identity per
waypoint it is nearly exact; otherwise it still removes the ill-conditioning of the
finite-difference part (``cond(C) ~ K^2``). For the hypersphere residual (``tangent=True``) the
steps are restricted to the tangent space of the sphere through each waypoint: the projected
residual is insensitive to radial moves to first order, a near-null space that float32 Krylov
solves resolve badly; the waypoints' norms then change only at second order,
``|x + delta|^2 = |x|^2 + |delta|^2``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._status import RUNNING
from ._interface import AbstractPathSolver
from ._krylov import gmres, pcg

__all__ = [
    "METHODS",
    "MatrixFree",
    "PRECONDITIONERS",
    "NewtonGMRES",
    "PCGLevenbergMarquardt",
    "second_difference",
]

PRECONDITIONERS = ("fd_trace", "fd", "none")
METHODS = ("newton", "lm")


@dataclasses.dataclass(frozen=True)
class MatrixFree:
    """The matrix-free backend (:func:`geomopt.gfm.solve_matrix_free`, ``gfm.MatrixFree``;
    memory O(K d); Euclidean / hypersphere residual): ``method="newton"`` (inexact
    Newton-GMRES, LM-PCG from where its line search fails) or ``"lm"`` (LM-PCG only), the
    preconditioner ``precond`` (``"fd_trace"``, ``"fd"``, ``"none"``), and the Krylov caps per
    iteration."""

    method: str = "newton"
    precond: str = "fd_trace"
    cg_max_iters: int = 50
    gmres_max_iters: int = 20
    name: ClassVar[str] = "matrix_free"
    max_iters: ClassVar[int] = 200


def second_difference(n_inner: int, dt, dtype=jnp.float32):
    """``C = tridiag(1, -2, 1) / dt^2`` of shape ``(n_inner, n_inner)``: the derivative of the
    accelerations ``a_i`` at the interior waypoints with respect to the interior waypoints (the
    same for every coordinate)."""
    eye = jnp.eye(n_inner, dtype=dtype)
    off = jnp.eye(n_inner, k=1, dtype=dtype) + jnp.eye(n_inner, k=-1, dtype=dtype)
    return (off - 2.0 * eye) / jnp.asarray(dt, dtype) ** 2


def _rms(w):
    return jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))


def _stencil_matrix(jvp, inner, cmat, precond, key, it):
    """``B = C + diag(c)``: the stencil plus (``fd_trace``) the per-waypoint trace estimate
    ``c_i = <v_i, (J v - C v)_i> / d`` of the rest of ``J`` from one Rademacher probe ``v``."""
    if precond != "fd_trace":
        return cmat
    v = jax.random.rademacher(jax.random.fold_in(key, it), inner.shape, inner.dtype)
    shift = jnp.sum(v * (jvp(v) - cmat @ v), axis=-1) / inner.shape[-1]
    return cmat + jnp.diag(shift)


def _tangent_projection(inner, tangent):
    if not tangent:
        return lambda u: u
    nrm = inner / jnp.linalg.norm(inner, axis=-1, keepdims=True)
    return lambda u: u - jnp.sum(u * nrm, axis=-1, keepdims=True) * nrm


class _MatrixFreeSolver(AbstractPathSolver):
    """Fields shared by the two phases: ``residual`` maps a full path ``(K, d)`` to its rows at
    the interior waypoints ``(K-2, d)``; ``tangent`` restricts steps to the spheres through the
    waypoints (hypersphere residual); ``key`` seeds the trace probes of ``fd_trace``."""

    residual: Callable
    tol: jax.Array
    max_iters: jax.Array
    precond: str = "fd_trace"
    tangent: bool = False
    key: jax.Array | None = None

    def _f(self, ends):
        x0, x1 = ends
        return lambda inner: self.residual(jnp.concatenate([x0[None], inner, x1[None]], axis=0))

    def _key(self):
        return jax.random.key(0) if self.key is None else self.key

    def postprocess(self, state):
        (x0, x1), inner, r, it, krylov, code = state[0], state[2], state[3], *state[-3:]
        path = jnp.concatenate([x0[None], inner, x1[None]], axis=0)
        minus1 = jnp.asarray(-1)
        return path, _rms(r), it, code, (minus1, minus1), krylov


def _start(path0):
    k = path0.shape[0]
    return (path0[0], path0[-1]), second_difference(k - 2, 1.0 / (k - 1), path0.dtype)


class NewtonGMRES(_MatrixFreeSolver):
    """Inexact Newton on the square system ``R(x) = 0``: right-preconditioned GMRES (one JVP
    per step) to relative residual ``eta_k``, then a backtracking line search on ``|R|^2``
    (``t = 1, 1/2, 1/4, 1/8``; Armijo factor 1e-4). Stops at ``tol``, at ``max_iters``, or
    (code 4) when no step length decreases the residual enough, where LM takes over."""

    gmres_max_iters: int = 20

    def init(self, path0):
        ends, cmat = _start(path0)
        inner0 = path0[1:-1]
        r0 = self._f(ends)(inner0)
        n0 = jnp.sqrt(jnp.sum(r0**2))
        code0 = jnp.where(jnp.isfinite(n0), jnp.where(_rms(r0) <= self.tol, 0, RUNNING), 2)
        return ends, (cmat, n0), inner0, r0, jnp.asarray(0), jnp.asarray(0), code0

    def step(self, s):
        ends, (cmat, n0), inner, r, it, krylov, _ = s
        f, tol, precond = self._f(ends), self.tol, self.precond
        m = inner.shape[0]
        dtype = inner.dtype
        eye = jnp.eye(m, dtype=dtype)
        reg = 1e-6 * jnp.max(jnp.linalg.eigvalsh(cmat.T @ cmat))
        # No linear solve beyond what the tolerance needs: stop GMRES at half of it.
        atol = 0.5 * tol * jnp.sqrt(jnp.asarray(m, dtype))
        _, jvp = jax.linearize(f, inner)
        bmat = _stencil_matrix(jvp, inner, cmat, precond, self._key(), it)
        if precond == "none":
            m_inv = eye
        else:  # B^+ = (B^T B + reg I)^{-1} B^T: B^{-1} where B is well conditioned
            m_inv = jnp.linalg.solve(bmat.T @ bmat + reg * eye, bmat.T)
        proj = _tangent_projection(inner, self.tangent)
        prec = lambda u: proj(m_inv @ u)  # noqa: E731
        rn = jnp.sqrt(jnp.sum(r**2))
        eta = jnp.minimum(0.1, jnp.sqrt(rn / jnp.maximum(n0, 1e-30)))
        y, k, lin = gmres(
            lambda u: proj(jvp(prec(u))), -proj(r), rtol=eta, atol=atol,
            max_iters=self.gmres_max_iters,
        )  # fmt: skip
        delta = prec(y)
        decrease = 1e-4 * (1.0 - lin / jnp.maximum(rn, 1e-30))
        cost = 0.5 * rn**2

        def ls_cond(b):
            return ~b[3] & (b[2] < 4)

        def ls_body(b):
            t, _, n, _ = b
            t = jnp.where(n == 0, t, 0.5 * t)
            r_t = f(inner + t * delta)
            cost_t = 0.5 * jnp.sum(r_t**2)
            ok = jnp.isfinite(cost_t) & (cost_t <= cost * (1.0 - t * decrease)) & (cost_t < cost)
            return t, r_t, n + 1, ok

        ls0 = (jnp.ones((), dtype), r, jnp.asarray(0), jnp.asarray(False))
        t, r_t, _, ok = jax.lax.while_loop(ls_cond, ls_body, ls0)
        inner_n = jnp.where(ok, inner + t * delta, inner)
        r_n = jnp.where(ok, r_t, r)
        it_n = it + 1
        code = jnp.where(_rms(r_n) <= tol, 0, jnp.where(it_n >= self.max_iters, 1, RUNNING))
        code = jnp.where((code == RUNNING) & ~ok, 4, code)
        return ends, (cmat, n0), inner_n, r_n, it_n, krylov + k, code

    def terminate(self, state):
        return state[-1] != RUNNING


class PCGLevenbergMarquardt(_MatrixFreeSolver):
    """Levenberg-Marquardt with PCG on the damped normal equations (module docstring). A
    continuation of another phase passes its residual ``r0`` at ``path0``, its iterations
    ``it0`` and Krylov steps ``krylov0``."""

    cg_max_iters: jax.Array | int = 50
    r0: jax.Array | None = None
    it0: jax.Array | int = 0
    krylov0: jax.Array | int = 0

    def init(self, path0):
        ends, cmat = _start(path0)
        inner0 = path0[1:-1]
        r0 = self._f(ends)(inner0) if self.r0 is None else self.r0
        it0 = jnp.asarray(self.it0)
        one = jnp.ones((), path0.dtype)
        ctc_max = jnp.max(jnp.linalg.eigvalsh(cmat.T @ cmat))
        code0 = jnp.where(_rms(r0) <= self.tol, 0, jnp.where(it0 >= self.max_iters, 1, RUNNING))
        code0 = jnp.where(jnp.isfinite(jnp.sum(r0**2)), code0, 2)
        return (
            ends,
            cmat,
            inner0,
            r0,
            1e-6 * ctc_max * one,  # mu
            2.0 * one,  # nu
            jnp.asarray(0),  # slow accepted steps in a row
            jnp.asarray(-1.0, path0.dtype),  # |g_0|, set on the first pass
            it0,
            jnp.asarray(self.krylov0),  # Krylov steps
            code0,
        )

    def step(self, s):
        ends, cmat, inner, r, mu, nu, slow, g0, it, cg_total, _ = s
        f, precond = self._f(ends), self.precond
        m = inner.shape[0]
        dtype = inner.dtype
        xtol = 100.0 * jnp.finfo(dtype).eps
        r_lin, jvp = jax.linearize(f, inner)
        vjp = jax.linear_transpose(jvp, inner)
        jt = lambda u: vjp(u)[0]  # noqa: E731
        g = jt(r_lin)
        gnorm = jnp.sqrt(jnp.sum(g**2))
        g0 = jnp.where(g0 < 0, gnorm, g0)
        bmat = _stencil_matrix(jvp, inner, cmat, precond, self._key(), it)
        if precond == "none":
            apply_fd = lambda u: u  # noqa: E731
        else:
            m_inv = jnp.linalg.inv(bmat.T @ bmat + mu * jnp.eye(m, dtype=dtype))
            apply_fd = lambda u: m_inv @ u  # noqa: E731
        # Hypersphere: steps in the tangent space of the sphere through each waypoint (the
        # projected residual is insensitive to radial moves to first order, a near-null space
        # of J^T J that float32 CG resolves badly); P = I for the Euclidean residual.
        proj = _tangent_projection(inner, self.tangent)
        g_lin = proj(g)
        apply_m = lambda u: proj(apply_fd(proj(u)))  # noqa: E731
        matvec = lambda u: proj(jt(jvp(proj(u)))) + mu * u  # noqa: E731
        eta = jnp.minimum(0.1, jnp.sqrt(gnorm / jnp.maximum(g0, 1e-30)))
        delta, k_cg, r_cg = pcg(matvec, -g_lin, apply_m, rtol=eta, max_iters=self.cg_max_iters)
        # |J delta|^2 from CG's residual (A delta = -g - r_cg), without another JVP.
        jd2 = jnp.sum(delta * (-g_lin - r_cg)) - mu * jnp.sum(delta**2)
        pred = -jnp.sum(g * delta) - 0.5 * jd2
        trial = inner + delta
        r_t = f(trial)
        cost, cost_t = 0.5 * jnp.sum(r**2), 0.5 * jnp.sum(r_t**2)
        finite = jnp.isfinite(cost_t) & jnp.all(jnp.isfinite(delta))
        rho = (cost - cost_t) / jnp.where(pred > 0, pred, 1.0)
        ok = finite & (pred > 0) & (cost_t < cost)
        mu_n = jnp.where(ok, mu * jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), mu * nu)
        nu_n = jnp.where(ok, 2.0, 2.0 * nu)
        inner_n = jnp.where(ok, trial, inner)
        r_n = jnp.where(ok, r_t, r)
        it_n = it + 1
        slow_n = jnp.where(ok, jnp.where(cost - cost_t < 1e-3 * cost, slow + 1, 0), slow)
        small = jnp.max(jnp.abs(delta)) <= xtol * (jnp.max(jnp.abs(inner)) + xtol)
        code = jnp.where(_rms(r_n) <= self.tol, 0, jnp.where(it_n >= self.max_iters, 1, RUNNING))
        code = jnp.where((code == RUNNING) & ok & (small | (slow_n >= 10)), 3, code)
        code = jnp.where((code == RUNNING) & (mu_n > 1e30), 4, code)
        return (ends, cmat, inner_n, r_n, mu_n, nu_n, slow_n, g0, it_n, cg_total + k_cg, code)

    def terminate(self, state):
        return state[-1] != RUNNING
