"""Matrix-free GFM solvers at latent scale (thousands of dimensions): inexact Newton-GMRES, then
Levenberg-Marquardt with PCG where Newton's line search fails.

The banded solver of :mod:`._solve` forms dense ``d x d`` Jacobian blocks: ``O(K d^2)`` memory
and ``O(K d^3)`` work per iteration, gigabytes at ``d = 4096``. Here the Jacobian is never
formed. Each iteration linearises the stacked residual ``R(x_1..x_{K-2}) in R^{(K-2) x d}``
once (``jax.linearize``: the JVP, and its transpose, the VJP) and solves a linear system with
Krylov steps on those products only.

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
CG steps. Memory: the GMRES basis, ``gmres_max_iters + 1`` arrays of shape ``(K-2, d)``. We
write GMRES ourselves (:func:`gmres`) because ``lineax.GMRES`` (0.1.1) runs all ``restart``
Arnoldi steps of a cycle before it tests convergence, where a loose forcing term needs 2-4.

**Levenberg-Marquardt (``method="lm"``, and the fallback).** Damped normal equations
``(J^T J + mu I) delta = -J^T r`` by preconditioned conjugate gradients (PCG) using only
``v -> J^T (J v)``: memory ``O(K d)`` plus the network's activations at the ``K - 2``
waypoints. CG stops at relative residual ``eta_k = min(0.1, sqrt(|g_k| / |g_0|))`` or after
``cg_max_iters``. The gain ratio uses the model ``-(g . delta) - |J delta|^2 / 2`` with
``|J delta|^2`` from CG's residual (no extra JVP), Nielsen's damping update, and a step is
accepted only if the residual stays finite and the cost decreases, so the returned path is
never NaN. ``method="lm_lineax"`` is the same LM with ``lineax.CG`` (same operator and
preconditioner; lineax's own stopping test, see :func:`_lineax_cg`) for comparison; our
:func:`pcg` is kept as the default LM solver because its forcing tolerance is an ordinary traced
value and it needs no operator wrappers; the two take the same CG steps on the benchmark.

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

**Official latent conventions.** :func:`slerp` is the official GFM (``ELInterpolator``)
initialisation on the flattened latent; ``residual="hypersphere"`` is the official residual
(acceleration and force projected to the tangent space of the sphere through ``x_i``). The
official code's loss is the mean over all ``(K-2) d`` residual entries; the report's
``residual`` is ``sqrt(mean_i |r_i|^2)`` as for :func:`geomopt.gfm.solve`, i.e.
``sqrt(d * official_loss)``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._residuals import local_residual
from ._solve import CONVERGED_CODES, REASONS, RUNNING, SolveReport

__all__ = [
    "MatrixFreeReport",
    "second_difference",
    "slerp",
    "pcg",
    "gmres",
    "minimise_path_matrix_free",
    "solve_matrix_free",
]

PRECONDITIONERS = ("fd_trace", "fd", "none")
METHODS = ("newton", "lm", "lm_lineax")


@dataclasses.dataclass(frozen=True)
class MatrixFreeReport(SolveReport):
    """:class:`~geomopt.gfm.SolveReport` plus ``cg_iterations``: the solve's Krylov steps, GMRES
    steps of the Newton phase (one JVP of the residual each) plus CG steps of the LM phase (one
    JVP and one VJP each)."""

    cg_iterations: np.ndarray = dataclasses.field(default_factory=lambda: np.asarray(0))

    def __getitem__(self, i) -> MatrixFreeReport:
        """The report of pair ``i`` of a batched solve."""
        base = super().__getitem__(i)
        return MatrixFreeReport(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(SolveReport)},
            cg_iterations=np.asarray(self.cg_iterations)[i],
        )


def second_difference(n_inner: int, dt, dtype=jnp.float32):
    """``C = tridiag(1, -2, 1) / dt^2`` of shape ``(n_inner, n_inner)``: the derivative of the
    accelerations ``a_i`` at the interior waypoints with respect to the interior waypoints (the
    same for every coordinate)."""
    eye = jnp.eye(n_inner, dtype=dtype)
    off = jnp.eye(n_inner, k=1, dtype=dtype) + jnp.eye(n_inner, k=-1, dtype=dtype)
    return (off - 2.0 * eye) / jnp.asarray(dt, dtype) ** 2


def slerp(x0, x1, n_points: int):
    """Spherical linear interpolation, the official GFM initialisation (``ELInterpolator``).

    ``x(t) = sin((1-t) w)/sin(w) x0 + sin(t w)/sin(w) x1`` with ``cos w = <x0, x1>/(|x0||x1|)``
    clipped to ``[-1 + 1e-7, 1 - 1e-7]``; linear interpolation where ``|sin w| < 1e-6``. The
    endpoints keep their norms (norms are not interpolated). ``x0``, ``x1``: ``(..., d)``;
    returns ``(..., n_points, d)`` with the exact endpoints.
    """
    x0, x1 = jnp.asarray(x0), jnp.asarray(x1)
    n0 = jnp.linalg.norm(x0, axis=-1, keepdims=True)
    n1 = jnp.linalg.norm(x1, axis=-1, keepdims=True)
    cos = jnp.sum(x0 * x1, axis=-1, keepdims=True) / jnp.maximum(n0 * n1, 1e-30)
    omega = jnp.arccos(jnp.clip(cos, -1 + 1e-7, 1 - 1e-7))[..., None, :]
    sin = jnp.sin(omega)
    t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)
    t = t.reshape((1,) * (x0.ndim - 1) + (n_points, 1))
    small = jnp.abs(sin) < 1e-6
    safe = jnp.where(small, 1.0, sin)
    w0 = jnp.where(small, 1.0 - t, jnp.sin((1.0 - t) * omega) / safe)
    w1 = jnp.where(small, t, jnp.sin(t * omega) / safe)
    path = w0 * x0[..., None, :] + w1 * x1[..., None, :]
    return path.at[..., 0, :].set(x0).at[..., -1, :].set(x1)


def pcg(matvec: Callable, b, precond: Callable, *, rtol, max_iters):
    """Preconditioned conjugate gradients for SPD ``matvec``, started at 0; returns
    ``(x, iterations, r)`` with the recurrence residual ``r ~ b - A x``. Stops when
    ``|r| <= rtol |b|`` or after ``max_iters`` steps."""
    dot = lambda u, v: jnp.sum(u * v)  # noqa: E731
    bnorm2 = dot(b, b)
    z = precond(b)
    state0 = (jnp.zeros_like(b), b, z, z, dot(b, z), jnp.asarray(0))

    def cond(s):
        _, r, _, _, _, k = s
        return (k < max_iters) & (dot(r, r) > rtol**2 * bnorm2)

    def body(s):
        x, r, z, p, rz, k = s
        ap = matvec(p)
        pap = dot(p, ap)
        alpha = jnp.where(pap > 0, rz / jnp.where(pap > 0, pap, 1.0), 0.0)
        x = x + alpha * p
        r = r - alpha * ap
        z = precond(r)
        rz_new = dot(r, z)
        beta = rz_new / jnp.where(rz > 0, rz, 1.0)
        # On breakdown (pap <= 0, only from rounding) stop with the iterate so far.
        k = jnp.where(pap > 0, k + 1, max_iters)
        return (x, r, z, z + beta * p, rz_new, k)

    x, r, _, _, _, k = jax.lax.while_loop(cond, body, state0)
    return x, k, r


def gmres(op: Callable, b, *, rtol, atol, max_iters: int):
    """GMRES for ``op(x) = b`` started at 0 (Arnoldi with classical Gram-Schmidt done twice,
    Givens rotations; no restarts). Returns ``(x, iterations, |b - op(x)|)``, the last from the
    rotated least-squares problem (exact up to rounding). Stops when that norm is
    ``<= max(rtol |b|, atol)`` or after ``max_iters`` steps (static; the Krylov basis of
    ``max_iters + 1`` vectors the size of ``b`` is stored: memory ``(max_iters + 1) b.size``).
    Each step costs one ``op``; precondition by composing ``op`` with the preconditioner
    (right preconditioning) and mapping the result back."""
    dtype = b.dtype
    nd = b.ndim
    beta = jnp.sqrt(jnp.sum(b * b))
    basis = jnp.zeros((max_iters + 1,) + b.shape, dtype)
    basis = basis.at[0].set(b / jnp.where(beta > 0, beta, 1.0))
    hess = jnp.zeros((max_iters + 1, max_iters), dtype)
    cs = jnp.zeros((max_iters,), dtype)
    sn = jnp.zeros((max_iters,), dtype)
    g = jnp.zeros((max_iters + 1,), dtype).at[0].set(beta)
    thresh = jnp.maximum(rtol * beta, atol)
    rows = jnp.arange(max_iters + 1)

    def cond(s):
        j, _, _, _, _, g = s
        return (j < max_iters) & (jnp.abs(g[j]) > thresh)

    def body(s):
        j, basis, hess, cs, sn, g = s
        w = op(basis[j])
        mask = (rows <= j).astype(dtype)
        h = jnp.tensordot(basis, w, axes=nd) * mask
        w = w - jnp.tensordot(h, basis, axes=1)
        h2 = jnp.tensordot(basis, w, axes=nd) * mask
        w = w - jnp.tensordot(h2, basis, axes=1)
        hn = jnp.sqrt(jnp.sum(w * w))
        basis = basis.at[j + 1].set(w / jnp.where(hn > 0, hn, 1.0))
        col = (h + h2).at[j + 1].set(hn)

        def rotate(i, col):
            a, c = col[i], col[i + 1]
            return col.at[i].set(cs[i] * a + sn[i] * c).at[i + 1].set(cs[i] * c - sn[i] * a)

        col = jax.lax.fori_loop(0, j, rotate, col)
        a, c = col[j], col[j + 1]
        rad = jnp.sqrt(a * a + c * c)
        safe = jnp.where(rad > 0, rad, 1.0)
        cj, sj = jnp.where(rad > 0, a / safe, 1.0), jnp.where(rad > 0, c / safe, 0.0)
        hess = hess.at[:, j].set(col.at[j].set(rad).at[j + 1].set(0.0))
        g = g.at[j + 1].set(-sj * g[j]).at[j].set(cj * g[j])
        return j + 1, basis, hess, cs.at[j].set(cj), sn.at[j].set(sj), g

    state0 = (jnp.asarray(0), basis, hess, cs, sn, g)
    k, basis, hess, _, _, g = jax.lax.while_loop(cond, body, state0)
    used = jnp.arange(max_iters) < k
    tri = jnp.where(
        used[:, None] & used[None, :], hess[:max_iters], jnp.eye(max_iters, dtype=dtype)
    )
    # A zero pivot only follows an exact breakdown with g already 0: its coefficient is 0.
    tri = tri + jnp.diag(jnp.where(jnp.diagonal(tri) == 0, 1.0, 0.0).astype(dtype))
    y = jax.scipy.linalg.solve_triangular(tri, jnp.where(used, g[:max_iters], 0.0), lower=False)
    return jnp.tensordot(y, basis[:max_iters], axes=1), k, jnp.abs(g[k])


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


def _lineax_cg(matvec, b, precond, *, rtol, max_iters):
    """PCG by ``lineax.CG`` (two-norm test ``|r| <= rtol |b|``; lineax also requires the last
    update to be that small, and recomputes the residual with an extra matvec every 10 steps).
    Returns ``(x, iterations, b - A x)`` like :func:`pcg` (one more matvec for the residual)."""
    import lineax as lx

    struct = jax.ShapeDtypeStruct(b.shape, b.dtype)
    psd = lx.positive_semidefinite_tag
    op = lx.FunctionLinearOperator(matvec, struct, tags=psd)
    pre = lx.FunctionLinearOperator(precond, struct, tags=psd)
    atol = rtol * jnp.sqrt(jnp.sum(b * b))
    two_norm = lambda u: jnp.sqrt(jnp.sum(u * u))  # noqa: E731
    solver = lx.CG(rtol=0.0, atol=atol, norm=two_norm, max_steps=max_iters)
    sol = lx.linear_solve(op, b, solver, options={"preconditioner": pre}, throw=False)
    x = sol.value
    return x, sol.stats["num_steps"], b - matvec(x)


def _newton_phase(f, inner0, r0, *, tol, max_iters, gmres_max_iters, cmat, precond, proj_of, key):
    """Inexact Newton on the square system ``R(x) = 0``: right-preconditioned GMRES (one JVP
    per step) to relative residual ``eta_k``, then a backtracking line search on ``|R|^2``
    (``t = 1, 1/2, 1/4, 1/8``; Armijo factor 1e-4). Stops at ``tol``, at ``max_iters``, or
    (code 4) when no step length decreases the residual enough, where LM takes over."""
    m = inner0.shape[0]
    dtype = inner0.dtype
    eye = jnp.eye(m, dtype=dtype)
    reg = 1e-6 * jnp.max(jnp.linalg.eigvalsh(cmat.T @ cmat))
    n0 = jnp.sqrt(jnp.sum(r0**2))
    # No linear solve beyond what the tolerance needs: stop GMRES at half of it.
    atol = 0.5 * tol * jnp.sqrt(jnp.asarray(m, dtype))

    def body(s):
        inner, r, it, krylov, _ = s
        _, jvp = jax.linearize(f, inner)
        bmat = _stencil_matrix(jvp, inner, cmat, precond, key, it)
        if precond == "none":
            m_inv = eye
        else:  # B^+ = (B^T B + reg I)^{-1} B^T: B^{-1} where B is well conditioned
            m_inv = jnp.linalg.solve(bmat.T @ bmat + reg * eye, bmat.T)
        proj = proj_of(inner)
        prec = lambda u: proj(m_inv @ u)  # noqa: E731
        rn = jnp.sqrt(jnp.sum(r**2))
        eta = jnp.minimum(0.1, jnp.sqrt(rn / jnp.maximum(n0, 1e-30)))
        y, k, lin = gmres(
            lambda u: proj(jvp(prec(u))), -proj(r), rtol=eta, atol=atol, max_iters=gmres_max_iters
        )
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
        code = jnp.where(_rms(r_n) <= tol, 0, jnp.where(it_n >= max_iters, 1, RUNNING))
        code = jnp.where((code == RUNNING) & ~ok, 4, code)
        return inner_n, r_n, it_n, krylov + k, code

    code0 = jnp.where(jnp.isfinite(n0), jnp.where(_rms(r0) <= tol, 0, RUNNING), 2)
    state0 = (inner0, r0, jnp.asarray(0), jnp.asarray(0), code0)
    return jax.lax.while_loop(lambda s: s[-1] == RUNNING, body, state0)


def _lm_phase(f, inner0, r0, it0, *, tol, max_iters, cg_max_iters, cmat, precond, proj_of, key, cg):
    """Levenberg-Marquardt with PCG on the damped normal equations (module docstring)."""
    m, d = inner0.shape
    dtype = inner0.dtype
    xtol = 100.0 * jnp.finfo(dtype).eps
    one = jnp.ones((), dtype)
    ctc_max = jnp.max(jnp.linalg.eigvalsh(cmat.T @ cmat))
    solve_cg = pcg if cg == "own" else _lineax_cg

    def body(s):
        inner, r, mu, nu, it, slow, cg_total, g0, _ = s
        r_lin, jvp = jax.linearize(f, inner)
        vjp = jax.linear_transpose(jvp, inner)
        jt = lambda u: vjp(u)[0]  # noqa: E731
        g = jt(r_lin)
        gnorm = jnp.sqrt(jnp.sum(g**2))
        g0 = jnp.where(g0 < 0, gnorm, g0)
        bmat = _stencil_matrix(jvp, inner, cmat, precond, key, it)
        if precond == "none":
            apply_fd = lambda u: u  # noqa: E731
        else:
            m_inv = jnp.linalg.inv(bmat.T @ bmat + mu * jnp.eye(m, dtype=dtype))
            apply_fd = lambda u: m_inv @ u  # noqa: E731
        # Hypersphere: steps in the tangent space of the sphere through each waypoint (the
        # projected residual is insensitive to radial moves to first order, a near-null space
        # of J^T J that float32 CG resolves badly); P = I for the Euclidean residual.
        proj = proj_of(inner)
        g_lin = proj(g)
        apply_m = lambda u: proj(apply_fd(proj(u)))  # noqa: E731
        matvec = lambda u: proj(jt(jvp(proj(u)))) + mu * u  # noqa: E731
        eta = jnp.minimum(0.1, jnp.sqrt(gnorm / jnp.maximum(g0, 1e-30)))
        delta, k_cg, r_cg = solve_cg(matvec, -g_lin, apply_m, rtol=eta, max_iters=cg_max_iters)
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
        rms_n = _rms(r_n)
        code = jnp.where(rms_n <= tol, 0, jnp.where(it_n >= max_iters, 1, RUNNING))
        code = jnp.where((code == RUNNING) & ok & (small | (slow_n >= 10)), 3, code)
        code = jnp.where((code == RUNNING) & (mu_n > 1e30), 4, code)
        return (inner_n, r_n, mu_n, nu_n, it_n, slow_n, cg_total + k_cg, g0, code)

    code0 = jnp.where(_rms(r0) <= tol, 0, jnp.where(it0 >= max_iters, 1, RUNNING))
    code0 = jnp.where(jnp.isfinite(jnp.sum(r0**2)), code0, 2)
    state0 = (
        inner0,
        r0,
        1e-6 * ctc_max * one,  # mu
        2.0 * one,  # nu
        it0,
        jnp.asarray(0),  # slow accepted steps in a row
        jnp.asarray(0),  # CG iterations
        jnp.asarray(-1.0, dtype),  # |g_0|, set on the first pass
        code0,
    )
    inner, r, _, _, it, _, cg_total, _, code = jax.lax.while_loop(
        lambda s: s[-1] == RUNNING, body, state0
    )
    return inner, r, it, cg_total, code


def minimise_path_matrix_free(
    path0,
    residual: Callable,
    *,
    tol,
    max_iters,
    cg_max_iters,
    precond: str = "fd_trace",
    tangent: bool = False,
    key=None,
    method: str = "newton",
    gmres_max_iters: int = 20,
):
    """Matrix-free solve of ``residual(path) = 0`` (``(K-2, d)``) for the interior waypoints.

    Traceable (call it inside ``jit``/``vmap``). ``path0`` is ``(K, d)`` with fixed endpoints;
    ``residual`` maps a full path to one residual row per interior waypoint whose linear part in
    the waypoints is the acceleration stencil (GFM's Euclidean / hypersphere residual).
    ``method``: ``"newton"`` (inexact Newton with GMRES, then LM from where a Newton line search
    fails), ``"lm"`` (LM with our PCG only) or ``"lm_lineax"`` (LM with ``lineax.CG``).
    Returns ``(path, rms_residual, iterations, code, krylov_steps)``: iterations of both
    phases; Krylov steps = GMRES steps (one JVP each) + CG steps (one JVP and one VJP each);
    ``code`` as in :data:`geomopt.gfm.REASONS` (0 converged, 1 max_iters, 2 non-finite initial
    residual, 3 stalled, 4 no decreasing step).
    """
    if precond not in PRECONDITIONERS:
        raise ValueError(f"precond {precond!r}: expected one of {PRECONDITIONERS}")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    k_pts = path0.shape[0]
    cmat = second_difference(k_pts - 2, 1.0 / (k_pts - 1), path0.dtype)
    x0, x1 = path0[0], path0[-1]
    key = jax.random.key(0) if key is None else key
    proj_of = partial(_tangent_projection, tangent=tangent)

    def f(inner):
        return residual(jnp.concatenate([x0[None], inner, x1[None]], axis=0))

    inner, r = path0[1:-1], f(path0[1:-1])
    it, krylov = jnp.asarray(0), jnp.asarray(0)
    common = dict(tol=tol, max_iters=max_iters, cmat=cmat, precond=precond, proj_of=proj_of)
    if method == "newton":
        inner, r, it, krylov, _ = _newton_phase(
            f, inner, r, gmres_max_iters=gmres_max_iters, key=key, **common
        )
    cg = "lineax" if method == "lm_lineax" else "own"
    inner, r, it, n_cg, code = _lm_phase(
        f, inner, r, it, cg_max_iters=cg_max_iters, key=key, cg=cg, **common
    )
    path = jnp.concatenate([x0[None], inner, x1[None]], axis=0)
    return path, _rms(r), it, code, krylov + n_cg


def gfm_residual(path, *, lam, score, kind: str):
    """GFM residuals at the interior waypoints of ``path`` (``kind``: ``"euclidean"`` or
    ``"hypersphere"``), from :func:`geomopt.gfm.local_residual`."""
    dt = 1.0 / (path.shape[0] - 1)
    loc = partial(local_residual, dt=dt, lam=lam, score=score, metric=None, kind=kind)
    return jax.vmap(loc)(path[:-2], path[1:-1], path[2:])


@eqx.filter_jit
def _solve_jit(x0, x1, init, score, hyper, max_iters, cg_max_iters, cfg):
    kind, precond, n_points, init_kind, method, gmres_max_iters = cfg
    lam, tol = hyper[0], hyper[1]
    if init_kind == "slerp":
        path0 = slerp(x0, x1, n_points)
    elif init_kind == "linear":
        t = jnp.linspace(0.0, 1.0, n_points, dtype=x0.dtype)[None, :, None]
        path0 = x0[:, None, :] * (1.0 - t) + x1[:, None, :] * t
    else:
        path0 = init
    res = partial(gfm_residual, lam=lam, score=score, kind=kind)

    def one(p):
        return minimise_path_matrix_free(
            p,
            res,
            tol=tol,
            max_iters=max_iters,
            cg_max_iters=cg_max_iters,
            precond=precond,
            tangent=kind == "hypersphere",
            method=method,
            gmres_max_iters=gmres_max_iters,
        )

    return jax.vmap(one)(path0)


def _check(name, x, dtype=None):
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} has dtype {arr.dtype}; expected a floating-point array")
    if dtype is not None and arr.dtype != dtype:
        raise TypeError(f"{name} has dtype {arr.dtype}, expected {dtype} (the dtype of x0)")
    if not np.isfinite(arr).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise ValueError(f"{name} has a non-finite entry {arr[bad]} at index {bad}")
    return arr


def solve_matrix_free(
    x0,
    x1,
    *,
    score: Callable | None,
    lam=1.0,
    n_points: int = 10,
    residual: str = "hypersphere",
    init="slerp",
    tol=None,
    max_iters: int = 50,
    cg_max_iters: int = 50,
    precond: str = "fd_trace",
    method: str = "newton",
    gmres_max_iters: int = 20,
):
    """Matrix-free GFM solve between ``x0`` and ``x1``; returns ``(path, MatrixFreeReport)``.

    Args:
        x0, x1: endpoints ``(d,)`` or a batch ``(B, d)`` (flatten latents first; see
            :mod:`geomopt.gfm.latent` for latents of any shape). Floating point, finite, one
            dtype.
        score: ``s(x) = grad log p(x)`` for one point ``(d,) -> (d,)`` (e.g.
            ``ScoreAt(denoiser, sigma)``; an Equinox module's arrays are traced, so new weights
            or sigma do not recompile); ``None``: no potential.
        lam: weight of the force (``>= 0``; traced).
        n_points: waypoints including both endpoints (``>= 3``; the official latent runs use 10).
        residual: ``"hypersphere"`` (official latent residual, tangent projections) or
            ``"euclidean"`` (``a_i + lam s(x_i)``).
        init: ``"slerp"`` (official), ``"linear"``, or a path ``(n_points, d)`` /
            ``(B, n_points, d)`` with the given endpoints.
        tol: stop when ``sqrt(mean_i |r_i|^2) <= tol``; default
            :func:`geomopt.gfm.default_tol` (near float rounding).
        max_iters: Newton + Levenberg-Marquardt iterations (each: one linearisation, one
            Krylov solve).
        cg_max_iters: cap on the CG steps per LM iteration.
        precond: ``"fd_trace"`` (finite-difference part plus a per-waypoint trace estimate of
            the score Jacobian), ``"fd"`` (finite-difference part only) or ``"none"``.
        method: ``"newton"`` (inexact Newton-GMRES, LM from where its line search fails; the
            fastest), ``"lm"`` (LM with PCG only) or ``"lm_lineax"`` (LM with ``lineax.CG``).
        gmres_max_iters: cap on the GMRES steps per Newton iteration (static; its Krylov basis
            of ``gmres_max_iters + 1`` arrays ``(n_points - 2, d)`` is kept in memory).

    Returns:
        ``path`` ``(n_points, d)`` / ``(B, n_points, d)`` and a :class:`MatrixFreeReport`
        (``method="matrix_free"``); unconverged solves return the best finite path.

    Raises:
        ValueError / TypeError: naming the bad argument (shape, dtype, non-finite entries).
    """
    from ._gfm import default_tol

    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 3:
        raise ValueError(f"n_points={n_points!r}: expected an int >= 3")
    a0 = _check("x0", x0)
    a1 = _check("x1", x1, a0.dtype)
    if a0.shape != a1.shape:
        raise ValueError(f"endpoints have shapes {a0.shape} and {a1.shape}; expected equal shapes")
    if a0.ndim not in (1, 2) or a0.shape[-1] < 1:
        raise ValueError(f"endpoints of shape {a0.shape}: expected (d,) or (batch, d)")
    if residual not in ("hypersphere", "euclidean"):
        raise ValueError(f"residual {residual!r}: expected 'hypersphere' or 'euclidean'")
    if residual == "hypersphere":
        for name, a in (("x0", a0), ("x1", a1)):
            if (np.linalg.norm(a, axis=-1) == 0).any():
                raise ValueError(f"{name} is zero; the hypersphere residual needs |x| > 0")
    if precond not in PRECONDITIONERS:
        raise ValueError(f"precond {precond!r}: expected one of {PRECONDITIONERS}")
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {METHODS}")
    if score is not None and not callable(score):
        raise TypeError(f"score must be a callable x -> s(x), got {type(score).__name__}")
    ints = (("max_iters", max_iters), ("cg_max_iters", cg_max_iters))
    for name, v in ints + (("gmres_max_iters", gmres_max_iters),):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r}: expected an int >= 1")
    lam_f = float(lam)
    if not (np.isfinite(lam_f) and lam_f >= 0):
        raise ValueError(f"lam={lam!r}: expected a finite number >= 0")
    batched = a0.ndim == 2
    b0 = a0 if batched else a0[None]
    b1 = a1 if batched else a1[None]
    if isinstance(init, str):
        if init not in ("slerp", "linear"):
            raise ValueError(f"init {init!r}: expected 'slerp', 'linear' or an array path")
        init_kind, init_arr = init, None
        scale = float(max(np.abs(b0).max(), np.abs(b1).max()))
    else:
        init_kind = "array"
        init_arr = _check("init", init, a0.dtype)
        want = (n_points, a0.shape[-1]) if not batched else (a0.shape[0], n_points, a0.shape[-1])
        if init_arr.shape != want:
            raise ValueError(f"init has shape {init_arr.shape}, expected {want}")
        init_arr = init_arr if batched else init_arr[None]
        gap = np.abs(init_arr[:, 0] - b0).max() + np.abs(init_arr[:, -1] - b1).max()
        scale = float(np.abs(init_arr).max())
        if gap > 1e-6 * (1.0 + scale):
            raise ValueError(f"init's endpoints differ from x0/x1 by {gap:.3g}")
    dtype = a0.dtype
    tol = default_tol(n_points, dtype, scale) if tol is None else float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol={tol!r}: expected a finite number > 0")
    hyper = np.array([lam_f, tol], dtype=dtype)
    cfg = (residual, precond, int(n_points), init_kind, method, int(gmres_max_iters))
    t0 = time.perf_counter()
    out = _solve_jit(
        jnp.asarray(b0),
        jnp.asarray(b1),
        init_arr,
        score,
        hyper,
        np.asarray(max_iters),
        np.asarray(cg_max_iters),
        cfg,
    )
    path, res, its, code, cg = jax.block_until_ready(out)
    wall = time.perf_counter() - t0
    res, its, code, cg = (np.asarray(a) for a in (res, its, code, cg))
    converged = np.isin(code, CONVERGED_CODES)
    if (code == 2).any():
        pair = int(np.nonzero(code == 2)[0][0])
        where = f"pair {pair}" if batched else "the initial path"
        raise ValueError(f"non-finite residual at {where} ({REASONS[2]})")
    report = MatrixFreeReport(
        iterations=its,
        residual=res,
        converged=converged,
        code=code,
        wall_time=wall,
        method="matrix_free",
        cg_iterations=cg,
    )
    if batched:
        return path, report
    return path[0], report[0]
