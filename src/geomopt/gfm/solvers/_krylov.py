"""Krylov solvers on matrix-vector products only: :func:`pcg` (preconditioned conjugate
gradients, SPD operators) and :func:`gmres` (right-preconditioned by composition), for the
matrix-free backend (:mod:`._matrix_free`).

We write them ourselves because ``lineax.GMRES`` (0.1.1) runs all ``restart`` Arnoldi steps of a
cycle before it tests convergence, where a loose forcing term needs 2-4, and our PCG takes a
traced forcing tolerance without operator wrappers (``lineax.CG`` took the same steps on the
latent benchmark and broke down at d = 16,384, see ``benchmarks/results/gfm_latent.md``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

__all__ = ["gmres", "pcg"]


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
