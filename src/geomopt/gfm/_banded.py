"""Block-banded linear algebra for collocation solves.

Each GFM residual touches three neighbouring waypoints, so the Jacobian of the stacked residuals
with respect to the interior waypoints is block-tridiagonal and ``J^T J`` is block-pentadiagonal.
Both are solved here in ``O(n m^3)`` by a block Thomas recursion (``lax.scan``), instead of the
``O((n m)^3)`` dense solve that a generic least-squares library (optimistix/lineax with a
materialised or matrix-free operator) would do. The pentadiagonal system is solved by grouping
pairs of block rows into ``2m x 2m`` blocks, which makes it block-tridiagonal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "solve_block_tridiagonal",
    "solve_block_pentadiagonal",
    "block_tridiagonal_to_dense",
    "block_pentadiagonal_to_dense",
]


def _gauss_jordan(a, b):
    """Solve ``a x = b`` for small ``(m, m)`` / ``(m, c)`` blocks by unpivoted Gauss-Jordan.

    Unrolled over the ``m`` columns with plain elementwise ops (no LAPACK call), so inside a
    ``lax.scan`` step and under ``vmap`` it is a handful of fused vector ops instead of one
    batched LU call per step (the LU call dominated the per-iteration cost of batched LM).
    Needs non-zero leading principal minors, which SPD blocks (damped normal equations and
    their Schur complements) always have.
    """
    m = a.shape[-1]
    aug = jnp.concatenate([a, b], axis=-1)
    for j in range(m):
        row = aug[..., j, :] / aug[..., j, j : j + 1]
        aug = aug - aug[..., :, j : j + 1] * row[..., None, :]
        aug = aug.at[..., j, :].set(row)
    return aug[..., m:]


def _mm_small(a, b):
    """``a @ b`` for tiny matrices as a broadcast multiply-sum (fuses; no GEMM call)."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def _mv_small(a, x):
    return jnp.sum(a * x[..., None, :], axis=-1)


def _thomas(lower, diag, upper, rhs, small_solve, unrolled=False):
    n, m, _ = diag.shape
    zero = jnp.zeros((1, m, m), diag.dtype)
    lower_p = jnp.concatenate([zero, lower], axis=0)
    upper_p = jnp.concatenate([upper, zero], axis=0)

    def forward(carry, blocks):
        c_prev, d_prev = carry
        low, dia, up, b = blocks
        if unrolled:
            pivot = dia - _mm_small(low, c_prev)
            b = b - _mv_small(low, d_prev)
        else:
            pivot = dia - low @ c_prev
            b = b - low @ d_prev
        sol = small_solve(pivot, jnp.concatenate([up, b[:, None]], axis=1))
        c, d = sol[:, :m], sol[:, m]
        return (c, d), (c, d)

    init = (jnp.zeros((m, m), diag.dtype), jnp.zeros((m,), diag.dtype))
    _, (cs, ds) = jax.lax.scan(forward, init, (lower_p, diag, upper_p, rhs))

    def backward(x_next, blocks):
        c, d = blocks
        x = d - (_mv_small(c, x_next) if unrolled else c @ x_next)
        return x, x

    _, xs = jax.lax.scan(backward, jnp.zeros((m,), diag.dtype), (cs, ds), reverse=True)
    return xs


def solve_block_tridiagonal(
    lower: Float[Array, "n-1 m m"],
    diag: Float[Array, "n m m"],
    upper: Float[Array, "n-1 m m"],
    rhs: Float[Array, "n m"],
) -> Float[Array, "n m"]:
    """Solve ``A x = rhs`` for block-tridiagonal ``A`` by the block Thomas algorithm.

    ``lower[i] = A[i+1, i]``, ``diag[i] = A[i, i]``, ``upper[i] = A[i, i+1]``. No pivoting
    between blocks (each block pivot is solved by LU with partial pivoting), so ``A`` should be
    block diagonally dominant or SPD, as the Gauss-Newton and damped normal-equation matrices are.
    """
    n, m, _ = diag.shape
    if lower.shape != (n - 1, m, m) or upper.shape != (n - 1, m, m) or rhs.shape != (n, m):
        raise ValueError(
            f"block shapes lower {lower.shape}, diag {diag.shape}, upper {upper.shape}, rhs "
            f"{rhs.shape}: expected ({n - 1}, {m}, {m}), ({n}, {m}, {m}), ({n - 1}, {m}, {m}), "
            f"({n}, {m})"
        )
    return _thomas(lower, diag, upper, rhs, jnp.linalg.solve)


def solve_block_pentadiagonal(
    diag: Float[Array, "n m m"],
    upper1: Float[Array, "n-1 m m"],
    upper2: Float[Array, "n-2 m m"],
    rhs: Float[Array, "n m"],
    *,
    method: str = "auto",
) -> Float[Array, "n m"]:
    """Solve ``A x = rhs`` for a symmetric block-pentadiagonal ``A`` (e.g. ``J^T J + mu I``).

    ``upper1[i] = A[i, i+1]``, ``upper2[i] = A[i, i+2]``; the lower blocks are their transposes.

    Pairs of block rows are grouped into ``2m`` blocks (padding an odd ``n`` with an identity
    block that decouples) and solved by the block Thomas recursion (``lax.scan`` over ``n/2``
    steps, ``O(n m^3)``). Each ``2m x 2m`` pivot is solved by an unrolled, unpivoted
    Gauss-Jordan elimination (:func:`_gauss_jordan`) and the block products are written as
    broadcast multiply-sums, so a scan step is a few fused vector ops rather than LAPACK/GEMM
    calls on tiny matrices. This needs non-singular leading block minors (true for SPD ``A``).
    ``method`` is kept for API stability: only ``"thomas"`` (= ``"auto"``) exists; a dense LU
    of the assembled matrix was measured slower on CPU even at 90 unknowns.
    """
    n, m, _ = diag.shape
    if method not in ("auto", "thomas"):
        raise ValueError(f"method {method!r}: expected 'auto' or 'thomas'")
    if n == 1:
        return jnp.linalg.solve(diag[0], rhs[0])[None]
    if n == 2:
        top = jnp.concatenate([diag[0], upper1[0]], axis=1)
        bot = jnp.concatenate([upper1[0].T, diag[1]], axis=1)
        return jnp.linalg.solve(jnp.concatenate([top, bot], axis=0), rhs.reshape(-1)).reshape(2, m)
    pad = n % 2
    eye = jnp.eye(m, dtype=diag.dtype)[None]
    z = jnp.zeros((pad, m, m), diag.dtype)
    diag_p = jnp.concatenate([diag, jnp.broadcast_to(eye, (pad, m, m))], axis=0)
    up1_p = jnp.concatenate([upper1, z], axis=0)  # length n - 1 + pad
    up2_p = jnp.concatenate([upper2, z, jnp.zeros((1, m, m), diag.dtype)], axis=0)  # n - 1 + pad
    rhs_p = jnp.concatenate([rhs, jnp.zeros((pad, m), rhs.dtype)], axis=0)
    p = (n + pad) // 2
    d_even, d_odd = diag_p[0::2], diag_p[1::2]
    u1_even = up1_p[0::2]  # A[2k, 2k+1], k = 0..p-1
    u1_odd = up1_p[1::2]  # A[2k+1, 2k+2], k = 0..p-2
    u2_even = up2_p[0::2]  # A[2k, 2k+2]
    u2_odd = up2_p[1::2]  # A[2k+1, 2k+3]
    big_diag = jnp.concatenate(
        [
            jnp.concatenate([d_even, u1_even], axis=2),
            jnp.concatenate([jnp.swapaxes(u1_even, 1, 2), d_odd], axis=2),
        ],
        axis=1,
    )
    zero = jnp.zeros((p - 1, m, m), diag.dtype)
    big_upper = jnp.concatenate(
        [
            jnp.concatenate([u2_even[: p - 1], zero], axis=2),
            jnp.concatenate([u1_odd[: p - 1], u2_odd[: p - 1]], axis=2),
        ],
        axis=1,
    )
    big_lower = jnp.swapaxes(big_upper, 1, 2)
    x = _thomas(big_lower, big_diag, big_upper, rhs_p.reshape(p, 2 * m), _gauss_jordan, True)
    return x.reshape(2 * p, m)[:n]


def block_tridiagonal_to_dense(lower, diag, upper) -> np.ndarray:
    """The dense ``(n m) x (n m)`` NumPy matrix of a block-tridiagonal system (for tests)."""
    lower, diag, upper = (np.asarray(a) for a in (lower, diag, upper))
    n, m, _ = diag.shape
    a = np.zeros((n * m, n * m), diag.dtype)
    for i in range(n):
        a[i * m : (i + 1) * m, i * m : (i + 1) * m] = diag[i]
        if i + 1 < n:
            a[(i + 1) * m : (i + 2) * m, i * m : (i + 1) * m] = lower[i]
            a[i * m : (i + 1) * m, (i + 1) * m : (i + 2) * m] = upper[i]
    return a


def block_pentadiagonal_to_dense(diag, upper1, upper2) -> np.ndarray:
    """The dense symmetric NumPy matrix of a block-pentadiagonal system (for tests)."""
    diag, upper1, upper2 = (np.asarray(a) for a in (diag, upper1, upper2))
    n, m, _ = diag.shape
    a = block_tridiagonal_to_dense(np.swapaxes(upper1, 1, 2), diag, upper1)
    for i in range(n - 2):
        a[i * m : (i + 1) * m, (i + 2) * m : (i + 3) * m] = upper2[i]
        a[(i + 2) * m : (i + 3) * m, i * m : (i + 1) * m] = upper2[i].T
    return a
