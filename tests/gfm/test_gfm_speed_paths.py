"""The fast paths of the banded solver: unrolled Gauss-Jordan pivots and the LM-shaped system
(direct bandwidth-two block elimination)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm.solvers._banded import _eliminate


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def test_gauss_jordan_matches_lapack_on_batched_spd_blocks():
    k = jax.random.split(jax.random.key(3), 2)
    a = jax.random.normal(k[0], (5, 6, 6))
    spd = a @ jnp.swapaxes(a, 1, 2) + 0.1 * jnp.eye(6)[None]
    b = jax.random.normal(k[1], (5, 6, 7))
    np.testing.assert_allclose(
        jax.jit(lambda a, b: _eliminate(jnp.concatenate([a, b], -1), 6))(spd, b),
        np.linalg.solve(np.asarray(spd), np.asarray(b)),
        rtol=1e-9,
    )


def _damped_normal_blocks(key, n, m, batch):
    """Blocks of ``J^T J + mu I`` for random block-tridiagonal ``J`` (the LM system), batched."""
    out = []
    for b in range(batch):
        k = jax.random.split(jax.random.fold_in(key, b), 4)
        lower = jax.random.normal(k[0], (n - 1, m, m))
        diag = jax.random.normal(k[1], (n, m, m))
        upper = jax.random.normal(k[2], (n - 1, m, m))
        jac = gfm.block_tridiagonal_to_dense(lower, diag, upper)
        a = jac.T @ jac + 1e-3 * np.eye(n * m)
        blocks = a.reshape(n, m, n, m)
        if n > 3:
            np.testing.assert_array_equal(blocks[0, :, 3], 0.0)  # truly pentadiagonal
        d = np.stack([blocks[i, :, i] for i in range(n)])
        u1 = np.asarray([blocks[i, :, i + 1] for i in range(n - 1)]).reshape(n - 1, m, m)
        u2 = np.asarray([blocks[i, :, i + 2] for i in range(n - 2)]).reshape(max(n - 2, 0), m, m)
        out.append((a, d, u1, u2, np.asarray(jax.random.normal(k[3], (n, m)))))
    return [np.stack(x) for x in zip(*out, strict=True)]


@pytest.mark.parametrize("n_points", [3, 4, 5, 13, 32])
def test_pentadiagonal_solves_damped_normal_equations_of_a_banded_jacobian(n_points):
    """``J^T J + mu I`` (the LM system, d = 3) for 1 to 30 interior waypoints, vmapped over
    systems as in batched LM, against a dense solve of each system."""
    n, m, batch = n_points - 2, 3, 4
    a, d, u1, u2, rhs = _damped_normal_blocks(jax.random.key(n_points), n, m, batch)
    np.testing.assert_allclose(a[0], gfm.block_pentadiagonal_to_dense(d[0], u1[0], u2[0]))
    x = jax.jit(jax.vmap(gfm.solve_block_pentadiagonal))(d, u1, u2, rhs)
    for b in range(batch):
        ref = np.linalg.solve(a[b], rhs[b].reshape(-1))
        np.testing.assert_allclose(
            x[b].reshape(-1), ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max()
        )


def test_pentadiagonal_is_exact_on_a_known_solution():
    """``A x = A @ x_true`` recovers ``x_true`` (SPD ``A`` with unit-scale blocks, m = 2)."""
    n, m = 9, 2
    a, d, u1, u2, _ = _damped_normal_blocks(jax.random.key(5), n, m, 1)
    x_true = np.arange(n * m, dtype=np.float64).reshape(n, m) / 7.0 - 1.0
    rhs = (a[0] @ x_true.reshape(-1)).reshape(n, m)
    x = jax.jit(gfm.solve_block_pentadiagonal)(d[0], u1[0], u2[0], rhs)
    # forward error <= ~cond(A) * eps for a backward-stable solve
    np.testing.assert_allclose(x, x_true, atol=10 * np.linalg.cond(a[0]) * np.finfo(float).eps)


def test_pentadiagonal_rejects_bad_shapes():
    z = jnp.zeros((4, 2, 2))
    with pytest.raises(ValueError, match=r"upper2 \(3, 2, 2\)"):
        gfm.solve_block_pentadiagonal(z, z[:3], z[:3], jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"rhs \(4, 3\)"):
        gfm.solve_block_pentadiagonal(z, z[:3], z[:2], jnp.zeros((4, 3)))


def test_pentadiagonal_rejects_unknown_method():
    z = jnp.zeros((3, 2, 2))
    with pytest.raises(ValueError, match="'dense'"):
        gfm.solve_block_pentadiagonal(z, z[:2], z[:1], jnp.zeros((3, 2)), method="dense")
