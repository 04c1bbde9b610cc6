"""The fast paths of the banded solver: unrolled Gauss-Jordan pivots and the LM-shaped system."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm
from geomopt.gfm._banded import _gauss_jordan


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
        jax.jit(_gauss_jordan)(spd, b), np.linalg.solve(np.asarray(spd), np.asarray(b)), rtol=1e-9
    )


@pytest.mark.parametrize("n_points", [13])
def test_pentadiagonal_solves_damped_normal_equations_of_a_banded_jacobian(n_points):
    """``J^T J + mu I`` from a random block-tridiagonal ``J`` (the LM system); odd n pads."""
    n, m = n_points - 2, 3
    k = jax.random.split(jax.random.key(n_points), 4)
    lower = jax.random.normal(k[0], (n - 1, m, m))
    diag = jax.random.normal(k[1], (n, m, m))
    upper = jax.random.normal(k[2], (n - 1, m, m))
    jac = gfm.block_tridiagonal_to_dense(lower, diag, upper)
    a = jac.T @ jac + 1e-3 * np.eye(n * m)
    blocks = a.reshape(n, m, n, m)
    d = np.stack([blocks[i, :, i] for i in range(n)])
    u1 = np.stack([blocks[i, :, i + 1] for i in range(n - 1)])
    u2 = np.stack([blocks[i, :, i + 2] for i in range(n - 2)])
    if n > 3:
        np.testing.assert_array_equal(blocks[0, :, 3], 0.0)  # truly pentadiagonal
    rhs = jax.random.normal(k[3], (n, m))
    x = jax.jit(gfm.solve_block_pentadiagonal)(d, u1, u2, rhs)
    ref = np.linalg.solve(a, np.asarray(rhs).reshape(-1))
    np.testing.assert_allclose(x.reshape(-1), ref, rtol=1e-7, atol=1e-9)


def test_pentadiagonal_rejects_unknown_method():
    z = jnp.zeros((3, 2, 2))
    with pytest.raises(ValueError, match="'dense'"):
        gfm.solve_block_pentadiagonal(z, z[:2], z[:1], jnp.zeros((3, 2)), method="dense")
