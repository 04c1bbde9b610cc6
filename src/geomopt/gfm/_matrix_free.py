"""Matrix-free Levenberg-Marquardt for GFM at latent scale (thousands of dimensions).

The banded solver of :mod:`._solve` forms dense ``d x d`` Jacobian blocks: ``O(K d^2)`` memory
and ``O(K d^3)`` work per iteration, gigabytes at ``d = 4096``. Here the Jacobian is never
formed. Each Levenberg-Marquardt iteration linearises the stacked residual
``R(x_1..x_{K-2}) in R^{(K-2) x d}`` once (``jax.linearize``: the JVP, and its transpose, the VJP)
and solves the damped normal equations

    (J^T J + mu I) delta = -J^T r

by preconditioned conjugate gradients (PCG) using only ``v -> J^T (J v)``: memory ``O(K d)``
plus the network's activations at the ``K - 2`` waypoints, as for one Adam gradient.

**Preconditioner.** For the Euclidean residual ``r_i = a_i + lam s(x_i)`` the Jacobian is
``J = (C + lam S) (x) ...`` where ``C`` is the ``(K-2) x (K-2)`` second-difference matrix of the
acceleration stencil (``1/dt^2 tridiag(1, -2, 1)``, the same for every coordinate, i.e.
``C (x) I_d``) and ``S = blockdiag(ds/dx(x_i))`` the score Jacobians. We precondition with
``(B^T B + mu I)^{-1} (x) I_d`` where ``B = C + diag(c_i)`` and ``c_i`` is an estimate of the
mean eigenvalue of the ``i``-th diagonal block of ``J - C (x) I_d`` (one Rademacher probe
``v``: ``c_i = <v_i, (J v - C v)_i> / d``; ``c = 0`` with ``precond="fd"``). Applying it costs
a ``(K-2) x (K-2)`` matrix times a ``(K-2) x d`` array. For a score whose Jacobian is close to a
multiple of the identity per waypoint (an isotropic Gaussian, or a small ``sigma``) it is
nearly exact; otherwise it still removes the ill-conditioning of the finite-difference part
(``cond(C^T C) ~ K^4``). For the hypersphere residual (``tangent=True``) the steps are
restricted to the tangent space of the sphere through each waypoint: the projected residual is
insensitive to radial moves to first order, a near-null space of ``J^T J`` that float32 CG
resolves badly (it halves the CG steps at d = 512 and avoids stalls at d = 4096); the
waypoints' norms then change only at second order, ``|x + delta|^2 = |x|^2 + |delta|^2``.

**Inexact steps.** CG stops at relative residual ``eta_k = min(0.1, sqrt(|g_k| / |g_0|))`` of the
normal equations (Eisenstat-Walker type forcing: superlinear convergence near a solution) or
after ``cg_max_iters``. The gain ratio uses the model ``-(g . delta) - |J delta|^2 / 2`` with
``|J delta|^2`` from CG's residual (no extra JVP), Nielsen's damping update, and a step is
accepted only if the residual stays finite and the cost decreases, so the returned path is
never NaN.

**Official latent conventions.** :func:`slerp` is the official GFM (``ELInterpolator``)
initialisation on the flattened latent; ``residual="hypersphere"`` is the official residual
(acceleration and force projected to the tangent space of the sphere through ``x_i``). The
official code's loss is the mean over all ``(K-2) d`` residual entries; the report's
``residual`` is ``sqrt(mean_i |r_i|^2)`` as for :func:`geomopt.gfm.solve`, i.e.
``sqrt(d * official_loss)``.

We write our own PCG instead of ``lineax.CG``: the forcing term needs the CG tolerance to change
per outer iteration (traced), the iteration count is reported, and the preconditioner acts on
``(K-2, d)`` arrays without a lineax operator wrapper; the loop is 25 lines.
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
    "minimise_path_matrix_free",
    "solve_matrix_free",
]

PRECONDITIONERS = ("fd_trace", "fd", "none")


@dataclasses.dataclass(frozen=True)
class MatrixFreeReport(SolveReport):
    """:class:`~geomopt.gfm.SolveReport` plus ``cg_iterations`` (total CG steps of the solve;
    each costs one JVP and one VJP of the residual)."""

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


def _rms(w):
    return jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))


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
):
    """Levenberg-Marquardt with PCG linear solves on ``residual(path) -> (K-2, d)``.

    Traceable (call it inside ``jit``/``vmap``). ``path0`` is ``(K, d)`` with fixed endpoints;
    ``residual`` maps a full path to one residual row per interior waypoint whose linear part in
    the waypoints is the acceleration stencil (GFM's Euclidean / hypersphere residual).
    Returns ``(path, rms_residual, iterations, code, cg_iterations)``; ``code`` as in
    :data:`geomopt.gfm.REASONS` (0 converged, 1 max_iters, 2 non-finite initial residual,
    3 stalled, 4 no decreasing step).
    """
    if precond not in PRECONDITIONERS:
        raise ValueError(f"precond {precond!r}: expected one of {PRECONDITIONERS}")
    k_pts, d = path0.shape
    m = k_pts - 2
    dtype = path0.dtype
    dt = 1.0 / (k_pts - 1)
    cmat = second_difference(m, dt, dtype)
    x0, x1 = path0[0], path0[-1]
    key = jax.random.key(0) if key is None else key
    xtol = 100.0 * jnp.finfo(dtype).eps

    def f(inner):
        return residual(jnp.concatenate([x0[None], inner, x1[None]], axis=0))

    inner0 = path0[1:-1]
    r0 = f(inner0)
    cost0 = 0.5 * jnp.sum(r0**2)
    one = jnp.ones((), dtype)
    ctc_max = jnp.max(jnp.linalg.eigvalsh(cmat.T @ cmat))
    code0 = jnp.where(jnp.isfinite(cost0), RUNNING, 2)
    code0 = jnp.where((code0 == RUNNING) & (_rms(r0) <= tol), 0, code0)
    state0 = (
        inner0,
        r0,
        1e-6 * ctc_max * one,  # mu
        2.0 * one,  # nu
        jnp.asarray(0),  # iterations
        jnp.asarray(0),  # slow accepted steps in a row
        jnp.asarray(0),  # CG iterations
        jnp.asarray(-1.0, dtype),  # |g_0|, set on the first pass
        code0,
    )

    def cond(s):
        return s[-1] == RUNNING

    def body(s):
        inner, r, mu, nu, it, slow, cg_total, g0, _ = s
        r_lin, jvp = jax.linearize(f, inner)
        vjp = jax.linear_transpose(jvp, inner)
        jt = lambda u: vjp(u)[0]  # noqa: E731
        g = jt(r_lin)
        gnorm = jnp.sqrt(jnp.sum(g**2))
        g0 = jnp.where(g0 < 0, gnorm, g0)
        if precond == "fd_trace":
            v = jax.random.rademacher(jax.random.fold_in(key, it), inner.shape, dtype)
            shift = jnp.sum(v * (jvp(v) - cmat @ v), axis=-1) / d
            bmat = cmat + jnp.diag(shift)
        else:
            bmat = cmat
        if precond == "none":
            apply_m = lambda u: u  # noqa: E731
        else:
            m_inv = jnp.linalg.inv(bmat.T @ bmat + mu * jnp.eye(m, dtype=dtype))
            apply_m = lambda u: m_inv @ u  # noqa: E731
        if tangent:
            # Steps in the tangent space of the sphere through each waypoint: the projected
            # residual is insensitive to radial moves to first order, a near-null space of
            # J^T J that float32 CG resolves badly. Solve the damped system restricted there.
            nrm = inner / jnp.linalg.norm(inner, axis=-1, keepdims=True)
            proj = lambda u: u - jnp.sum(u * nrm, axis=-1, keepdims=True) * nrm  # noqa: E731
            g_lin = proj(g)
            apply_fd = apply_m
            apply_m = lambda u: proj(apply_fd(proj(u)))  # noqa: E731
            matvec = lambda u: proj(jt(jvp(proj(u)))) + mu * u  # noqa: E731
        else:
            g_lin = g
            matvec = lambda u: jt(jvp(u)) + mu * u  # noqa: E731
        eta = jnp.minimum(0.1, jnp.sqrt(gnorm / jnp.maximum(g0, 1e-30)))
        delta, k_cg, r_cg = pcg(matvec, -g_lin, apply_m, rtol=eta, max_iters=cg_max_iters)
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

    inner, r, _, _, it, _, cg_total, _, code = jax.lax.while_loop(cond, body, state0)
    path = jnp.concatenate([x0[None], inner, x1[None]], axis=0)
    return path, _rms(r), it, code, cg_total


def gfm_residual(path, *, lam, score, kind: str):
    """GFM residuals at the interior waypoints of ``path`` (``kind``: ``"euclidean"`` or
    ``"hypersphere"``), from :func:`geomopt.gfm.local_residual`."""
    dt = 1.0 / (path.shape[0] - 1)
    loc = partial(local_residual, dt=dt, lam=lam, score=score, metric=None, kind=kind)
    return jax.vmap(loc)(path[:-2], path[1:-1], path[2:])


@eqx.filter_jit
def _solve_jit(x0, x1, init, score, hyper, max_iters, cg_max_iters, cfg):
    kind, precond, n_points, init_kind = cfg
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
        max_iters: Levenberg-Marquardt iterations (each: one linearisation, one PCG solve).
        cg_max_iters: cap on the CG steps per iteration.
        precond: ``"fd_trace"`` (finite-difference part plus a per-waypoint trace estimate of
            the score Jacobian), ``"fd"`` (finite-difference part only) or ``"none"``.

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
    if score is not None and not callable(score):
        raise TypeError(f"score must be a callable x -> s(x), got {type(score).__name__}")
    for name, v in (("max_iters", max_iters), ("cg_max_iters", cg_max_iters)):
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
    cfg = (residual, precond, int(n_points), init_kind)
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
