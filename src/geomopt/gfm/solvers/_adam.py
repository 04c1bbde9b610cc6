"""The official GFM optimiser: ``method="adam"``.

Adam on the mean squared residual (``reduce="sum"``: the sum, for path energies), gradient
clipping at global norm ``clip``, the score treated as a constant, with the ``lr`` / ``eps`` /
``clip`` / iterations given (the official settings differ per problem). The official code runs a
fixed number of iterations; here it also stops once the residual norm reaches ``tol``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax

from .._status import RUNNING
from ._interface import (
    AbstractPathSolver,
    BandedSolver,
    PathProblem,
    eval_rows,
    first_bad,
    iterate,
    rms_of,
    row_dim,
    stop_code,
)

__all__ = ["Adam", "AdamLoop"]


class AdamLoop(AbstractPathSolver):
    """Adam as in the official code (clip by global norm, then Adam), plus a residual stop."""

    local: Callable
    window: int
    tol: jax.Array
    gtol: jax.Array
    max_iters: jax.Array
    lr: jax.Array
    clip: jax.Array
    eps: jax.Array
    reduce: str = "mean"

    @property
    def _opt(self):
        return optax.chain(optax.clip_by_global_norm(self.clip), optax.adam(self.lr, eps=self.eps))

    def _loss(self, inner, ends):
        w = eval_rows(_full(inner, ends), self.local, self.window, False)[0]
        sq = jnp.sum(w**2, axis=-1)
        return jnp.mean(sq) if self.reduce == "mean" else jnp.sum(sq), w

    def init(self, path0):
        inner0 = path0[1:-1]
        m = path0.shape[0] - self.window + 1
        w0 = jnp.full((m, row_dim(self.local, path0, self.window)), jnp.nan, path0.dtype)
        minus1 = jnp.asarray(-1)
        ends = (path0[0], path0[-1])
        return (inner0, inner0, self._opt.init(inner0), w0, jnp.asarray(0), (minus1, minus1),
                ends, jnp.asarray(RUNNING))  # fmt: skip

    def step(self, state):
        inner, prev, opt_state, w_prev, it, where, ends, _ = state
        (_, w), g = jax.value_and_grad(self._loss, has_aux=True)(inner, ends)
        # A non-finite gradient row is attributed to its waypoint via a padded pseudo-path.
        path = _full(inner, ends)
        g_rows = jnp.zeros_like(path).at[1:-1].set(g)
        bad_wp, bad = first_bad(path + 0.0 * g_rows, w, (), self.window)
        code = stop_code(rms_of(w), jnp.max(jnp.abs(g)), it, self.tol, self.gtol, self.max_iters)
        code = jnp.where(bad, jnp.where(it == 0, 2, 6), code)
        where = jax.tree.map(lambda new, old: jnp.where(bad, new, old), (it, bad_wp), where)
        upd, opt_state_n = self._opt.update(g, opt_state, inner)
        inner_n = jnp.where(code == RUNNING, optax.apply_updates(inner, upd), inner)
        # On a non-finite evaluation fall back to the last finite iterate.
        inner_n = jnp.where(bad, prev, inner_n)
        w = jnp.where(bad, w_prev, w)
        it_n = jnp.where(code == RUNNING, it + 1, it)
        return (inner_n, inner, opt_state_n, w, it_n, where, ends, code)

    def terminate(self, state):
        return state[-1] != RUNNING

    def postprocess(self, state):
        inner, _, _, w, it, where, ends, code = state
        return _full(inner, ends), rms_of(w), it, code, where


def _full(inner, ends):
    return jnp.concatenate([ends[0][None], inner, ends[1][None]], axis=0)


@dataclasses.dataclass(frozen=True)
class Adam(BandedSolver):
    """The official optimiser (:class:`AdamLoop`, ``gfm.Adam``): clip the gradient at global
    norm ``clip``, then Adam with ``lr`` and ``eps``; the score a constant force by default. The
    official settings differ per problem (torus runs A/B/C: lr 1e-3 / 5e-3 / 5e-4, clip 10,
    eps 1e-8, 1501 iterations; 3-D shape latents: lr 0.01, no clip, eps 1e-5, 500 iterations).
    Passed to the solve as arrays: changing them does not recompile."""

    lr: float = 0.05
    clip: float = 10.0
    eps: float = 1e-8
    name: ClassVar[str] = "adam"
    max_iters: ClassVar[int] = 1501  # the official torus setting
    traced: ClassVar[tuple[str, ...]] = ("lr", "clip", "eps")
    score_grad: ClassVar[bool] = False
    # A fixed iteration count, where batching pays (see geomopt.gfm.solve's ``batch``)
    cpu_batch: ClassVar[str] = "vmap"

    def minimise(self, path0, problem: PathProblem, *, tol, gtol, max_iters, branches=True,
                 batch_axis=None):  # fmt: skip
        loop = AdamLoop(problem.local, problem.window, tol, gtol, max_iters, self.lr, self.clip,
                        self.eps, problem.reduce)  # fmt: skip
        return iterate(loop, path0)
