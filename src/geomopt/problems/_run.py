"""Vmapped runs of an optimiser on a batch of problems x step sizes x seeds.

A run applies an optax transformation from :mod:`geomopt.optim` to the problem's stochastic
gradient, one gradient evaluation per step (batch size 1, so steps = gradient evaluations). The
optimiser is built inside the vmapped function from a traced learning rate, so a step-size grid
is a vmap axis: changing the grid values (or the seeds, sigma, L ...) never recompiles.

Noise of step ``t`` in run ``(problem, lr, seed)`` uses ``fold_in(key_seed, t)``: every step
size and every problem of a batch sees the same noise draws for a given seed (common random
numbers), which makes the comparison across the grid less noisy and costs nothing.

Two drivers:

- :func:`run_trajectories`: ``steps`` steps as one jitted ``lax.scan`` (over log points) of a
  ``fori_loop`` (``log_every`` steps), under ``vmap``; returns the stationarity measure and the
  loss at every log point, shape ``(P, G, S, steps // log_every + 1)``.
- :func:`steps_to_reach`: the number of gradient evaluations until the seed- and
  iterate-averaged stationarity measure drops to ``eps`` for the best step size. The state
  advances between
  geometrically spaced checkpoints by one jitted, vmapped ``fori_loop`` whose trip count is a
  traced integer (compiled once); only the ``(P, G)`` seed means cross to the host per checkpoint
  and the run stops as soon as every problem has reached ``eps`` (or at ``max_steps``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from geomopt import optim
from geomopt.optim import orthogonalized_sgd

__all__ = [
    "OPTIMIZERS",
    "METHODS",
    "make_optimizer",
    "optimizer_factory",
    "orthogonalized_sgd",
    "run_trajectories",
    "steps_to_reach",
    "stack_problems",
    "check_step_sizes",
    "geometric_checkpoints",
    "complexity_from_curves",
]

OPTIMIZERS = ("sgd", "signsgd", "signum", "muon_svd", "muon_ns")
"""The paper's toy-problem methods by name: each is a :func:`geomopt.optim.make_optimizer` call
(:data:`METHODS`); runners also take any factory ``lr -> GradientTransformation``."""

METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "sgd": ("sgd", {"momentum": 0.0}),  # the theory's plain SGD
    "signsgd": ("sign_sgd", {}),
    "signum": ("signum", {}),  # momentum: the runner's ``momentum``
    "muon_svd": ("orthogonalized_sgd", {"method": "svd"}),
    "muon_ns": ("orthogonalized_sgd", {"method": "newton_schulz"}),
}

Factory = Callable[[Any], optax.GradientTransformation]


def make_optimizer(name: str, learning_rate, *, momentum: float = 0.9):
    """The method ``name`` of :data:`OPTIMIZERS` (``"sgd"`` plain, no momentum; ``"signsgd"``;
    ``"signum"`` with ``momentum``; ``"muon_svd"`` / ``"muon_ns"`` momentum-free Muon, exact or
    quintic Newton-Schulz) at ``learning_rate``, through :func:`geomopt.optim.make_optimizer`."""
    return optimizer_factory(name, momentum)(learning_rate)


@functools.cache
def _named_factory(name: str, momentum: float) -> Factory:
    if name not in METHODS:
        if name in optim.OPTIMIZERS:  # any registered optimiser at its defaults
            return functools.partial(optim.make_optimizer, name)
        raise ValueError(
            f"optimizer {name!r}: expected one of {OPTIMIZERS}, a name registered in "
            f"geomopt.optim.OPTIMIZERS {sorted(optim.OPTIMIZERS)} or a factory "
            "lr -> GradientTransformation"
        )
    registered, kwargs = METHODS[name]
    if name == "signum":
        kwargs = {**kwargs, "momentum": momentum}
    # one object per (name, momentum): the jitted runners key their compilation on it
    return functools.partial(optim.make_optimizer, registered, **kwargs)


def optimizer_factory(optimizer: str | Factory, momentum: float = 0.9) -> Factory:
    """``lr -> GradientTransformation`` for a method name of :data:`OPTIMIZERS`, a name of
    :data:`geomopt.optim.OPTIMIZERS` (at its defaults) or a factory (returned as it is). The
    runners compile once per factory object: pass the same one (e.g.
    ``functools.partial(optim.signum, momentum=0.8, weight_decay=1e-3)`` kept in a variable) to
    reuse a compilation."""
    if callable(optimizer):
        return optimizer
    if not isinstance(optimizer, str):
        raise TypeError(f"optimizer {optimizer!r}: expected a name or a callable lr -> optimizer")
    return _named_factory(optimizer, float(momentum))


def check_step_sizes(lrs, n_problems: int | None = None) -> jax.Array:
    """Finite, positive step sizes, else ValueError naming the values.

    ``lrs`` is one grid ``(G,)`` shared by all problems or one grid per problem ``(P, G)``; with
    ``n_problems`` given the result is broadcast to ``(P, G)``.
    """
    a = np.asarray(lrs, dtype=np.float64)
    if a.ndim not in (1, 2) or a.size == 0:
        raise ValueError(f"step sizes {lrs!r}: expected a non-empty (G,) or (P, G) array")
    if n_problems is not None:
        if a.ndim == 1:
            a = np.broadcast_to(a, (n_problems, a.shape[0]))
        if a.shape[0] != n_problems:
            raise ValueError(f"step sizes of shape {a.shape}: expected ({n_problems}, G)")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"step sizes {a.tolist()}: expected finite values > 0")
    return jnp.asarray(a, jnp.float32)


def stack_problems(problems) -> Any:
    """Stack problems of equal shapes (and equal static fields) along a new leading axis."""
    problems = list(problems)
    if not problems:
        raise ValueError("stack_problems: expected at least one problem")
    shapes = {tuple(x.shape for x in jax.tree.leaves(p)) for p in problems}
    if len(shapes) != 1:
        raise ValueError(f"problems have different shapes {sorted(shapes)}: expected equal")
    return jax.tree.map(lambda *xs: jnp.stack(xs), *problems)


def _n_problems(problems) -> int:
    leaves = jax.tree.leaves(problems)
    if not leaves or leaves[0].ndim < 1:
        raise ValueError(
            "problems: expected problems stacked along a leading axis (stack_problems)"
        )
    return int(leaves[0].shape[0])


def _init(problem, factory, lr, x0):
    opt = factory(lr)
    return x0, opt.init(x0)


def _advance(problem, factory, lr, key, carry, t0, n):
    """``n`` optimiser steps from step ``t0`` (fori_loop; ``n`` may be traced).

    ``carry`` is ``(x, opt_state)`` or ``(x, opt_state, acc)``; with ``acc`` the stationarity
    measure of every iterate visited (before its update) is added to it.
    """
    opt = factory(lr)

    def body(t, c):
        x, s = c[0], c[1]
        g = problem.stochastic_grad(x, jax.random.fold_in(key, t))
        u, s = opt.update(g, s, x)
        new = (optax.apply_updates(x, u), s)
        return new + (c[2] + problem.stationarity(x),) if len(c) == 3 else new

    return jax.lax.fori_loop(t0, t0 + n, body, carry)


def _vmap_pgs(f, *, x0_per_seed: bool = False):
    """vmap ``f(problem, lr, key, carry_or_x0, ...)`` over problems (P), step sizes (G) and
    seeds (S)."""
    seed_axis = jax.vmap(f, in_axes=(None, None, 0, 0, None, None))
    grid_axis = jax.vmap(seed_axis, in_axes=(None, 0, None, 0, None, None))
    return jax.vmap(grid_axis, in_axes=(0, 0, None, 0, None, None))


def _broadcast_x0(problems, n_grid, keys, x0):
    """Initial points of shape (P, G, S, ...): the problem's x0, or ``x0`` (S, ...) per seed."""
    P = jax.tree.leaves(problems)[0].shape[0]
    S = keys.shape[0]
    n_grid = n_grid.shape[-1]
    if x0 is None:
        base = problems.x0
        return jnp.broadcast_to(base[:, None, None], (P, n_grid, S, *base.shape[1:]))
    return jnp.broadcast_to(x0[None, None], (P, n_grid, *x0.shape))


@functools.partial(jax.jit, static_argnames=("factory", "steps", "log_every", "with_loss"))
def _trajectories(problems, lrs, keys, x0, *, factory, steps, log_every, with_loss):
    def one(problem, lr, key, x_init, _a, _b):
        carry = _init(problem, factory, lr, x_init)

        def measure(c):
            x = c[0]
            out = {"stationarity": problem.stationarity(x)}
            if with_loss:
                out["loss"] = problem.value(x)
            return out

        def chunk(c, i):
            c = _advance(problem, factory, lr, key, c, i * log_every, log_every)
            return c, measure(c)

        first = measure(carry)
        _, rest = jax.lax.scan(chunk, carry, jnp.arange(steps // log_every))
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)

    return _vmap_pgs(one)(problems, lrs, keys, x0, None, None)


def run_trajectories(
    problems,
    name: str | Factory,
    lrs,
    keys,
    *,
    steps: int,
    log_every: int = 1,
    x0=None,
    momentum: float = 0.9,
    with_loss: bool = True,
) -> dict[str, jax.Array]:
    """Run optimiser ``name`` on stacked ``problems`` (leading axis P) for every step size in
    ``lrs`` (G) and key in ``keys`` (S): one jitted scan under vmap. ``name`` is a method of
    :data:`OPTIMIZERS` (``momentum`` is Signum's) or a factory ``lr -> GradientTransformation``
    (:func:`optimizer_factory`).

    Returns ``{"stationarity": (P, G, S, K), "loss": (P, G, S, K)}`` at steps
    ``0, log_every, ..., steps`` (``K = steps // log_every + 1``). ``x0`` (S, ...) overrides the
    problems' starting points per seed.
    """
    factory = optimizer_factory(name, momentum)
    if steps < 1 or log_every < 1 or steps % log_every:
        raise ValueError(
            f"steps={steps}, log_every={log_every}: expected positive with log_every | steps"
        )
    lrs = check_step_sizes(lrs, _n_problems(problems))
    x0b = _broadcast_x0(problems, lrs, keys, x0)
    return _trajectories(
        problems,
        lrs,
        keys,
        x0b,
        factory=factory,
        steps=steps,
        log_every=log_every,
        with_loss=with_loss,
    )


@functools.partial(jax.jit, static_argnames=("factory",))
def _advance_batch(problems, lrs, keys, carry, t0, n, *, factory):
    def one(problem, lr, key, c, t0_, n_):
        return _advance(problem, factory, lr, key, c, t0_, n_)

    carry = _vmap_pgs(one)(problems, lrs, keys, carry, t0, n)
    # running average over the iterates x_0 .. x_{t-1}, per seed (P, G, S)
    return carry, carry[2] / (t0 + n).astype(carry[2].dtype)


@functools.partial(jax.jit, static_argnames=("factory",))
def _init_batch(problems, lrs, keys, x0, *, factory):
    def one(problem, lr, key, x_init, _a, _b):
        x, s = _init(problem, factory, lr, x_init)
        return x, s, jnp.zeros((), x.dtype)

    return _vmap_pgs(one)(problems, lrs, keys, x0, None, None)


def geometric_checkpoints(max_steps: int, per_decade: int = 20) -> np.ndarray:
    """Distinct integer steps ``1 <= t <= max_steps``, about ``per_decade`` per factor 10."""
    if max_steps < 1 or per_decade < 1:
        raise ValueError(f"max_steps={max_steps}, per_decade={per_decade}: expected >= 1")
    n = int(math.ceil(per_decade * math.log10(max_steps))) + 1
    t = np.unique(np.round(np.logspace(0, math.log10(max_steps), max(n, 2))).astype(np.int64))
    return t


def complexity_from_curves(curves, checkpoints, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``(index, best)`` of the first checkpoint at which some step size's curve is ``<= eps``:
    ``curves`` (K, P, G) (seed means of the iterate averages) -> per problem the checkpoint index
    (-1 if never) and the step-size index reaching the lowest value there (-1 if never)."""
    curves = np.asarray(curves)
    hit = curves <= eps  # (K, P, G)
    any_hit = hit.any(axis=-1)  # (K, P)
    first = np.where(any_hit.any(axis=0), np.argmax(any_hit, axis=0), -1)
    best = np.full(first.shape, -1)
    for p, k in enumerate(first):
        if k >= 0:
            best[p] = int(np.argmin(np.where(hit[k, p], curves[k, p], np.inf)))
    return first, best


def steps_to_reach(
    problems,
    name: str | Factory,
    lrs,
    keys,
    eps: float,
    *,
    max_steps: int,
    per_decade: int = 20,
    momentum: float = 0.9,
    overshoot: float = 1.0,
) -> dict[str, np.ndarray]:
    """Gradient evaluations ``T`` until ``(1/T) sum_{t<T} E||grad f(x_t)||  <= eps`` for the
    best step size.

    The measure is the one the paper's rates bound: the expected stationarity of an iterate drawn
    uniformly from ``x_0 .. x_{T-1}`` (the usual non-convex output rule); the expectation is the
    mean over seeds, and averaging over iterates also keeps the estimate from crossing ``eps`` by
    a lucky fluctuation. For every problem p the complexity is the first checkpoint ``T``
    (geometric grid, about ``per_decade`` per decade, so it is resolved to ``10^(1/per_decade)``)
    at which some step size ``lr_g`` meets it; equivalently ``min_g T_eps(lr_g)``. Problems
    that never get there within ``max_steps`` are censored (complexity -1). The run stops once
    every problem has reached ``eps`` and the step count is ``overshoot`` times the largest
    complexity (``overshoot > 1`` keeps going so that resamples of the seeds, which cross later,
    can be measured too: :func:`complexity_from_curves` on ``seed_curves``).

    Returns numpy arrays: ``complexity`` (P,), ``best_lr`` (P,) (nan if censored),
    ``checkpoints`` (K,), ``curves`` (K, P, G) the iterate-and-seed averages at the checkpoints
    visited, ``seed_curves`` (K, P, G, S) the iterate averages of every seed, and
    ``steps_run`` (total steps simulated per run).
    """
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps={eps!r}: expected a finite number > 0")
    if not (isinstance(overshoot, (int, float)) and math.isfinite(overshoot) and overshoot >= 1):
        raise ValueError(f"overshoot={overshoot!r}: expected a finite number >= 1")
    factory = optimizer_factory(name, momentum)
    lrs = check_step_sizes(lrs, _n_problems(problems))
    lrs_np = np.asarray(lrs)
    x0b = _broadcast_x0(problems, lrs, keys, None)
    carry = _init_batch(problems, lrs, keys, x0b, factory=factory)
    P = jax.tree.leaves(problems)[0].shape[0]
    complexity = np.full(P, -1, dtype=np.int64)
    best_lr = np.full(P, np.nan)
    curves, seed_curves, visited = [], [], []
    t_prev = 0
    for t in geometric_checkpoints(max_steps, per_decade):
        n = int(t - t_prev)
        carry, per_seed = _advance_batch(
            problems,
            lrs,
            keys,
            carry,
            jnp.asarray(t_prev, jnp.int32),
            jnp.asarray(n, jnp.int32),
            factory=factory,
        )
        per_seed = np.asarray(per_seed)
        means = per_seed.mean(axis=-1)
        t_prev = int(t)
        curves.append(means)
        seed_curves.append(per_seed)
        visited.append(t_prev)
        hit = means <= eps
        for p in range(P):
            if complexity[p] < 0 and hit[p].any():
                complexity[p] = t_prev
                best_lr[p] = lrs_np[p, np.argmin(np.where(hit[p], means[p], np.inf))]
        if np.all(complexity >= 0) and t_prev >= overshoot * complexity.max():
            break
    return {
        "complexity": complexity,
        "best_lr": best_lr,
        "checkpoints": np.asarray(visited),
        "curves": np.stack(curves),
        "seed_curves": np.stack(seed_curves),
        "steps_run": np.int64(t_prev),
    }
