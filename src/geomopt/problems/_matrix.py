"""Matrix problems with spectral-norm smoothness and low-rank or full-rank noise.

Stationarity is measured by the nuclear norm ``||grad F(W)||_*`` (sum of singular values), the
dual of the spectral norm in which the objectives are smooth; the noise size by the trace norm
``||Sigma||_*`` of ``Sigma`` with ``E[N N^T] = Sigma^2``.

- :class:`EmbeddedMatrixProblem` is the paper's lower-bound construction:
  ``F(W) = sum_i L_i h((Q W P^T)_ii)`` for orthogonal ``Q`` (m x m), ``P`` (n x n) and ``h`` as
  in :mod:`geomopt.problems._separable`. With ``z = diag(Q W P^T)``,
  ``grad F(W) = Q^T diag(L h'(z)) P`` and the noise is ``N = Q^T diag(sigma * xi) P``, so
  ``E[N N^T] = Q^T diag(sigma^2) Q``, ``||Sigma||_* = ||sigma||_1`` and ``rank N = #{sigma_i > 0}``
  (one noisy coordinate = rank-1 noise). Since ``msign(Q^T D P) = Q^T sign(D) P`` for diagonal
  ``D`` with nonzero entries, Muon with the exact (SVD) msign on ``F`` is SignSGD on ``z``, and
  SGD on ``F`` is SGD on ``z``: the matrix rates are the vector rates with ``||sigma||_1 ->
  ||Sigma||_*`` and ``L_inf -> L_* = ||L||_1``.
- :class:`QuadraticMatrixProblem`: ``F(W) = 1/2 ||A W B||_F^2`` with noise
  ``N = U diag(tau) Z / sqrt(n)`` (``U`` m x r orthonormal, ``Z`` r x n i.i.d. unit variance), so
  ``E[N N^T] = U diag(tau^2) U^T``, ``||Sigma||_* = ||tau||_1`` and rank ``r``. By Hoelder
  (``||XY||_* <= ||X||_* ||Y||_op``) the gradient ``A^T A W B B^T`` is Lipschitz from spectral to
  nuclear norm with ``L_* <= ||A||_F^2 ||B||_op^2`` (:attr:`spectral_smoothness_bound`).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from geomopt.problems._separable import (
    KINDS,
    NOISES,
    _check_vector,
    l1_norm,
    sample_noise,
    sgd_hard_instance,
)

__all__ = [
    "EmbeddedMatrixProblem",
    "QuadraticMatrixProblem",
    "embedded_problem",
    "quadratic_matrix_problem",
    "random_orthogonal",
    "nuclear_norm",
    "sgd_hard_matrix_instance",
]


def nuclear_norm(g):
    """``||G||_*``: the sum of the singular values over the last two axes."""
    return jnp.sum(jnp.linalg.svd(g, compute_uv=False), axis=-1)


def random_orthogonal(key, n: int, dtype=jnp.float32):
    """A Haar-random ``n x n`` orthogonal matrix (QR of a Gaussian with the sign fix)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n={n!r}: expected an integer >= 1")
    q, r = jnp.linalg.qr(jax.random.normal(key, (n, n), jnp.float32))
    q = q * jnp.sign(jnp.diagonal(r))[None, :]
    return q.astype(dtype)


def _diag_embed(v, m, n):
    k = v.shape[-1]
    return jnp.zeros((m, n), v.dtype).at[jnp.arange(k), jnp.arange(k)].set(v)


class EmbeddedMatrixProblem(eqx.Module):
    """``F(W) = sum_i L_i h((Q W P^T)_ii)``, noise ``Q^T diag(sigma xi) P`` (module docstring)."""

    L: jax.Array
    sigma: jax.Array
    Q: jax.Array
    P: jax.Array
    x0: jax.Array
    kind: str = eqx.field(static=True, default="quadratic")
    noise: str = eqx.field(static=True, default="gaussian")
    df: float = eqx.field(static=True, default=4.0)

    def _h(self, z):
        if self.kind == "quadratic":
            return 0.5 * z * z
        a = jnp.abs(z)
        return a + jnp.log1p(jnp.exp(-2.0 * a)) - jnp.log(jnp.asarray(2.0, z.dtype))

    def _dh(self, z):
        return z if self.kind == "quadratic" else jnp.tanh(z)

    def diagonal(self, W):
        """``z = diag(Q W P^T)``: the vector problem's coordinates."""
        return jnp.diagonal(self.Q @ W @ self.P.T)

    def value(self, W):
        return jnp.sum(self.L * self._h(self.diagonal(W)))

    def grad(self, W):
        m, n = W.shape
        return self.Q.T @ _diag_embed(self.L * self._dh(self.diagonal(W)), m, n) @ self.P

    def noise_matrix(self, key, shape):
        xi = sample_noise(key, self.sigma.shape, self.noise, self.df, self.L.dtype)
        return self.Q.T @ _diag_embed(self.sigma * xi, *shape) @ self.P

    def stochastic_grad(self, W, key):
        return self.grad(W) + self.noise_matrix(key, W.shape)

    def stationarity(self, W):
        """``||grad F(W)||_* = sum_i |L_i h'(z_i)|`` (``Q``, ``P`` orthogonal; no SVD needed,
        the tests check it against :func:`nuclear_norm` of the gradient)."""
        return jnp.sum(jnp.abs(self.L * self._dh(self.diagonal(W))))

    @property
    def trace_norm(self):
        """``||Sigma||_* = ||sigma||_1``."""
        return l1_norm(self.sigma)

    @property
    def spectral_smoothness(self):
        """``L_* = ||L||_1``."""
        return l1_norm(self.L)

    @property
    def noise_rank(self):
        return jnp.sum(self.sigma > 0)


def embedded_problem(
    L, sigma, z0, Q, P, *, kind: str = "quadratic", noise: str = "gaussian", df: float = 4.0
) -> EmbeddedMatrixProblem:
    """A checked :class:`EmbeddedMatrixProblem` with ``W0 = Q^T diag(z0) P``; ``L``, ``sigma``,
    ``z0`` are vectors of length ``min(m, n)`` for ``Q`` m x m and ``P`` n x n."""
    if kind not in KINDS or noise not in NOISES:
        raise ValueError(f"kind={kind!r}, noise={noise!r}: expected one of {KINDS}, {NOISES}")
    if not (math.isfinite(df) and df > 2):
        raise ValueError(f"df={df!r}: expected a finite number > 2")
    _check_vector("L", L)
    _check_vector("sigma", sigma)
    _check_vector("z0", z0, nonneg=False)
    Q, P = jnp.asarray(Q, jnp.float32), jnp.asarray(P, jnp.float32)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1] or P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"Q {Q.shape}, P {P.shape}: expected square matrices")
    k = min(Q.shape[0], P.shape[0])
    shapes = {"L": np.shape(L), "sigma": np.shape(sigma), "z0": np.shape(z0)}
    if any(s != (k,) for s in shapes.values()):
        raise ValueError(f"mismatched shapes {shapes}: expected ({k},) = min(m, n) for Q, P")
    L, sigma, z0 = (jnp.asarray(v, jnp.float32) for v in (L, sigma, z0))
    W0 = Q.T @ _diag_embed(z0, Q.shape[0], P.shape[0]) @ P
    return EmbeddedMatrixProblem(L, sigma, Q, P, W0, kind=kind, noise=noise, df=float(df))


def sgd_hard_matrix_instance(
    n: int, rank: int, trace_norm: float, *, key, l_star: float = 1.0, delta: float = 0.5
) -> EmbeddedMatrixProblem:
    """:func:`geomopt.problems.sgd_hard_instance` (``d = n``, ``s = rank``) embedded in
    ``n x n`` matrices by random orthogonal ``Q``, ``P``: noise of rank ``rank`` with
    ``||Sigma||_* = trace_norm``, ``L_* = l_star``, ``F(W0) = delta``."""
    vec = sgd_hard_instance(n, rank, trace_norm, l_inf=l_star, delta=delta)
    kq, kp = jax.random.split(key)
    return embedded_problem(
        vec.L, vec.sigma, vec.x0, random_orthogonal(kq, n), random_orthogonal(kp, n)
    )


class QuadraticMatrixProblem(eqx.Module):
    """``F(W) = 1/2 ||A W B||_F^2`` with rank-``r`` noise ``U diag(tau) Z / sqrt(n)``."""

    A: jax.Array
    B: jax.Array
    U: jax.Array
    tau: jax.Array
    x0: jax.Array
    noise: str = eqx.field(static=True, default="gaussian")
    df: float = eqx.field(static=True, default=4.0)

    def value(self, W):
        r = self.A @ W @ self.B
        return 0.5 * jnp.sum(r * r)

    def grad(self, W):
        return self.A.T @ (self.A @ W @ self.B) @ self.B.T

    def noise_matrix(self, key, shape):
        z = sample_noise(key, (self.tau.shape[0], shape[1]), self.noise, self.df, self.A.dtype)
        return (self.U * self.tau[None, :]) @ z / jnp.sqrt(jnp.asarray(shape[1], z.dtype))

    def stochastic_grad(self, W, key):
        return self.grad(W) + self.noise_matrix(key, W.shape)

    def stationarity(self, W):
        return nuclear_norm(self.grad(W))

    @property
    def trace_norm(self):
        return l1_norm(self.tau)

    @property
    def spectral_smoothness_bound(self):
        """``||A||_F^2 ||B||_op^2 >= L_*``."""
        return jnp.sum(self.A * self.A) * jnp.linalg.norm(self.B, ord=2) ** 2


def quadratic_matrix_problem(
    A, B, W0, U, tau, *, noise: str = "gaussian", df: float = 4.0
) -> QuadraticMatrixProblem:
    """A checked :class:`QuadraticMatrixProblem`: ``A`` (p x m), ``W0`` (m x n), ``B`` (n x q),
    ``U`` (m x r) with orthonormal columns, ``tau`` (r,) finite and ``>= 0``."""
    if noise not in NOISES or not (math.isfinite(df) and df > 2):
        raise ValueError(f"noise={noise!r}, df={df!r}: expected one of {NOISES} and df > 2")
    A, B, W0, U = (jnp.asarray(v, jnp.float32) for v in (A, B, W0, U))
    _check_vector("tau", tau)
    m, n = W0.shape if W0.ndim == 2 else (None, None)
    if (
        W0.ndim != 2
        or A.ndim != 2
        or B.ndim != 2
        or U.ndim != 2
        or A.shape[1] != m
        or B.shape[0] != n
        or U.shape != (m, np.shape(tau)[0])
    ):
        raise ValueError(
            f"mismatched shapes A {A.shape}, W0 {W0.shape}, B {B.shape}, U {U.shape}, "
            f"tau {np.shape(tau)}: expected A (p, m), W0 (m, n), B (n, q), U (m, r), tau (r,)"
        )
    gram = np.asarray(U.T @ U)
    if not np.allclose(gram, np.eye(gram.shape[0]), atol=1e-4):
        raise ValueError("U: expected orthonormal columns (U^T U = I)")
    return QuadraticMatrixProblem(
        A, B, U, jnp.asarray(tau, jnp.float32), W0, noise=noise, df=float(df)
    )
