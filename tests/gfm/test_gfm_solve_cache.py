"""The per-call caches of geomopt.gfm.solve never serve stale parameters or skip a check.

``solve`` keeps the split of ``(score, metric)`` into array leaves and static parts by object
identity, and remembers metric values it already found SPD; these tests change the arrays
between calls (new modules of the same structure, objects freed and re-created) and check
every answer against the exact discrete solution, and that a bad metric value is still
rejected after good ones were cached."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import gfm


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


class Well(eqx.Module):
    """Score of the Gaussian well ``U = |x - centre|^2 / (2 width^2)``."""

    centre: jax.Array
    width: float = eqx.field(static=True, default=0.5)

    def __call__(self, x):
        return -(x - self.centre.astype(x.dtype)) / self.width**2


def exact_discrete_path(x0, x1, centre, lam, width, n):
    """The collocation solution: ``(x_{i+1} - 2 x_i + x_{i-1}) / dt^2 = lam (x_i - c) / w^2``
    at every interior waypoint, a linear tridiagonal system (solved densely)."""
    dt = 1.0 / (n - 1)
    k2 = lam / width**2
    m = n - 2
    a = (np.diag(np.full(m, -2.0 / dt**2 - k2)) + np.diag(np.ones(m - 1), 1) / dt**2
         + np.diag(np.ones(m - 1), -1) / dt**2)  # fmt: skip
    rhs = np.tile(-k2 * np.asarray(centre), (m, 1))
    rhs[0] -= np.asarray(x0) / dt**2
    rhs[-1] -= np.asarray(x1) / dt**2
    inner = np.linalg.solve(a, rhs)
    return np.concatenate([np.asarray(x0)[None], inner, np.asarray(x1)[None]])


def test_new_parameters_of_the_same_structure_are_used():
    x0, x1 = np.array([0.0, 0.0]), np.array([1.0, 0.0])
    n, lam = 12, 1.0
    centres = [(0.5, 1.0), (0.5, -1.0), (0.5, 1.0), (0.0, 2.0)]
    paths = []
    for c in centres:
        # A fresh module each time (the previous one is dropped), same tree structure.
        path, rep = gfm.solve(x0, x1, score=Well(jnp.asarray(c)), lam=lam, n_points=n, tol=1e-10)
        assert rep.converged
        np.testing.assert_allclose(
            path, exact_discrete_path(x0, x1, c, lam, 0.5, n), atol=1e-8, err_msg=f"centre {c}"
        )
        paths.append(np.asarray(path))
    assert not np.allclose(paths[0], paths[1])
    # The same object solved twice gives the same answer.
    well = Well(jnp.asarray((0.3, 0.4)))
    again = [np.asarray(gfm.solve(x0, x1, score=well, n_points=n)[0]) for _ in range(2)]
    np.testing.assert_array_equal(again[0], again[1])


def test_a_bad_metric_value_is_rejected_after_good_ones_were_seen():
    class Diagonal(eqx.Module):
        """``G(x) = diag(x_0, 1)``: SPD only where ``x_0 > 0``."""

        def __call__(self, x):
            return jnp.diag(jnp.stack([x[0], jnp.ones((), x.dtype)]))

    metric = Diagonal()
    x1 = np.array([2.0, 1.0])
    for _ in range(2):  # the second call takes the cached "already checked" path
        _, rep = gfm.solve(np.array([1.0, 0.0]), x1, metric=metric, lam=0.0, n_points=6)
        assert np.isfinite(rep.residual)
    with pytest.raises(ValueError, match="positive-definite: smallest eigenvalue -1"):
        gfm.solve(np.array([-1.0, 0.0]), x1, metric=metric, lam=0.0, n_points=6)

    def skew(x):
        return jnp.array([[1.0, 0.5], [0.0, 1.0]], x.dtype)

    with pytest.raises(ValueError, match="not symmetric"):
        gfm.solve(np.array([1.0, 0.0]), x1, metric=skew, lam=0.0, n_points=6)
