"""The protocol every GFM path solver follows, the loop that runs it, and the pieces the solvers
share (residual rows over windows of waypoints, stop codes, locating a non-finite value).

A solver (:class:`AbstractPathSolver`, an Equinox module holding its problem and options, like
optimistix's ``AbstractMinimiser``) is one ``lax.while_loop``: :meth:`~AbstractPathSolver.init`
builds the loop state from the initial path, :meth:`~AbstractPathSolver.step` is one pass,
:meth:`~AbstractPathSolver.terminate` is true once the state holds a reason code
(:data:`geomopt.gfm.REASONS`), and :meth:`~AbstractPathSolver.postprocess` returns
``(path, rms_residual, iterations, code, (bad_iteration, bad_waypoint))``. :func:`iterate` runs
it. The solvers (``_levenberg_marquardt``, ``_gauss_newton``, ``_adam``, ``_action``,
``_newton_krylov``) know nothing of each other.

What users pass is a :class:`BandedSolver` (``gfm.LM``, ``gfm.Action``, ``gfm.GaussNewton``,
``gfm.Adam``): a frozen dataclass of options whose :meth:`~BandedSolver.minimise` builds its loop
for a :class:`PathProblem` and runs it, so the fronts (:func:`geomopt.gfm.solve`,
:func:`geomopt.gfm.minimise_path`) call one method and never branch on a method's name.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .._status import RUNNING

__all__ = ["AbstractPathSolver", "BandedSolver", "PathProblem", "iterate", "run"]


class AbstractPathSolver(eqx.Module):
    """One collocation method: a loop state, one pass, a stop test and the result (module doc).

    Traceable: construct it inside ``jit`` / ``vmap`` with traced ``tol`` / ``max_iters``."""

    @abc.abstractmethod
    def init(self, path0) -> Any:
        """The loop state before the first pass, from the initial path ``(K, d)``."""

    @abc.abstractmethod
    def step(self, state) -> Any:
        """One pass of the loop."""

    @abc.abstractmethod
    def terminate(self, state) -> jax.Array:
        """True once ``state`` holds a reason code (the loop stops)."""

    @abc.abstractmethod
    def postprocess(self, state) -> tuple:
        """``(path, rms_residual, iterations, code, (bad_iteration, bad_waypoint))``."""


def run(solver: AbstractPathSolver, path0):
    """The loop: ``solver``'s state from ``path0`` until it terminates."""
    # Plain closures, not bound methods: jax hashes the loop's functions, and a solver's fields
    # may be tracers.
    step = lambda s: solver.step(s)  # noqa: E731
    return jax.lax.while_loop(lambda s: ~solver.terminate(s), step, solver.init(path0))


def iterate(solver: AbstractPathSolver, path0) -> tuple:
    """Run ``solver`` from ``path0``; returns its ``postprocess`` of the final state."""
    return solver.postprocess(run(solver, path0))


class PathProblem(NamedTuple):
    """What a banded solver minimises: ``sum_rows |local(window consecutive waypoints)|^2``
    over the interior of a path (``reduce``: Adam's loss scale, ``"mean"`` as in the official
    GFM loss, ``"sum"`` for path energies). ``score`` / ``lam`` / ``metric``: the potential and
    prior metric (``None``: Euclidean) of a GFM problem, which the action descent needs."""

    local: Callable
    window: int
    reduce: str = "mean"
    score: Callable | None = None
    lam: Any = None
    metric: Callable | None = None


@dataclasses.dataclass(frozen=True)
class BandedSolver(abc.ABC):
    """A banded path solver's options (a frozen, hashable dataclass: the static part of a
    jitted solve); :meth:`minimise` runs it. Class attributes: ``name`` (the report's
    ``method``), the default ``max_iters``, ``traced`` (fields the jitted front passes as arrays,
    so changing them does not recompile), ``score_grad`` (differentiate through the score by
    default) and ``cpu_batch`` (the measured batch mode on the CPU, see
    :func:`geomopt.gfm.solve`)."""

    name: ClassVar[str]
    max_iters: ClassVar[int]
    traced: ClassVar[tuple[str, ...]] = ()
    score_grad: ClassVar[bool] = True
    cpu_batch: ClassVar[str] = "map"

    @abc.abstractmethod
    def minimise(self, path0, problem: PathProblem, *, tol, gtol, max_iters, branches=True,
                 batch_axis=None) -> tuple:  # fmt: skip
        """Solve ``problem`` from ``path0`` (traceable; ``tol`` / ``gtol`` / ``max_iters`` may
        be traced); returns ``(path, rms_residual, iterations, code, (bad_iteration,
        bad_waypoint))``. ``branches`` / ``batch_axis``: see :func:`geomopt.gfm.minimise_path`."""


def windows(path, window):
    """The ``window`` shifted views of ``path`` whose rows are the windows' waypoints."""
    m = path.shape[0] - window + 1
    return tuple(path[j : j + m] for j in range(window))


def eval_rows(path, local, window, with_jac: bool):
    """Residual rows of every window and, with ``with_jac``, their Jacobian blocks per waypoint of
    the window."""
    pts = windows(path, window)
    w = jax.vmap(local)(*pts)
    if not with_jac:
        return w, None
    # One jacfwd per waypoint of the window, not one over all of them: an input that is not
    # differentiated stays a constant, so e.g. the score at the middle waypoint is pushed
    # forward along d tangents instead of window * d (about 2x faster for GFM on the torus).
    jac = tuple(jax.vmap(jax.jacfwd(local, argnums=a))(*pts) for a in range(window))
    return w, jac


def row_dim(local, path, window) -> int:
    """Length of one residual row of ``local`` on ``path``'s windows."""
    return jax.eval_shape(local, *windows(path, window)[0][:1].repeat(window, 0)).shape[-1]


def cost_of(w):
    return 0.5 * jnp.sum(w**2)


def rms_of(w):
    return jnp.sqrt(jnp.mean(jnp.sum(w**2, axis=-1)))


def stop_code(rms, gnorm, it, tol, gtol, max_iters):
    """0 at ``tol``, 5 at ``gtol``, 1 at ``max_iters``, else running."""
    return jnp.where(
        rms <= tol,
        0,
        jnp.where(gnorm <= gtol, 5, jnp.where(it >= max_iters, 1, RUNNING)),
    )


def first_bad(path, w, jac, window):
    """Index of the first waypoint where the path, or a residual row / Jacobian block that
    involves it, is non-finite (rows are attributed to their window's centre); -1 if none."""
    k = path.shape[0]
    bad = ~jnp.all(jnp.isfinite(path), axis=-1)
    rows = ~jnp.all(jnp.isfinite(w.reshape(w.shape[0], -1)), axis=-1)
    for j in jac:
        rows = rows | ~jnp.all(jnp.isfinite(j.reshape(j.shape[0], -1)), axis=-1)
    off = (window - 1) // 2
    bad = bad.at[off : off + rows.shape[0]].set(bad[off : off + rows.shape[0]] | rows)
    return jnp.where(jnp.any(bad), jnp.argmax(bad), -1), jnp.any(bad) & (k > 0)


def normal_equations(w, jac, n_points: int, window: int):
    """Interior blocks ``(diag, upper1, upper2)`` of ``J^T J`` and the gradient ``J^T w``."""
    k, d = n_points, jac[0].shape[-1]
    m = w.shape[0]
    dtype = w.dtype
    diag = jnp.zeros((k, d, d), dtype)
    up1 = jnp.zeros((k - 1, d, d), dtype)
    up2 = jnp.zeros((max(k - 2, 0), d, d), dtype)
    g = jnp.zeros((k, d), dtype)
    for a in range(window):
        g = g.at[a : a + m].add(jnp.einsum("mri,mr->mi", jac[a], w))
        for b in range(a, window):
            blk = jnp.einsum("mri,mrj->mij", jac[a], jac[b])
            if b == a:
                diag = diag.at[a : a + m].add(blk)
            elif b == a + 1:
                up1 = up1.at[a : a + m].add(blk)
            else:
                up2 = up2.at[a : a + m].add(blk)
    return diag[1 : k - 1], up1[1 : k - 2], up2[1 : k - 3], g[1 : k - 1]
