"""Vmapped runs: equal to a per-seed loop and to a hand-written update, no recompilation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import problems as pr


def _problem(sigma0=2.0):
    L = np.array([4.0, 1.0, 0.5, 0.25, 0.1])
    sigma = np.array([sigma0, 0.0, 0.3, 0.0, 0.1])
    return pr.separable_problem(L, sigma, np.linspace(-1.0, 2.0, 5))


@jax.jit
def _hand_step(prob, lr, key, t, x):
    xi = jax.random.normal(jax.random.fold_in(key, t), x.shape, jnp.float32)
    x = x - lr * jnp.sign(prob.grad(x) + prob.sigma * xi)
    return x, prob.grad_l1(x)


def _hand_signsgd(prob, lr, key, steps):
    """x <- x - lr sign(grad f(x) + sigma xi_t), written out without optax."""
    x = prob.x0
    out = [float(prob.grad_l1(x))]
    for t in range(steps):
        x, s = _hand_step(prob, lr, key, t, x)
        out.append(float(s))
    return np.array(out)


def test_vmapped_run_equals_per_seed_loop_and_hand_update():
    prob = pr.stack_problems([_problem()])
    lrs = [0.01, 0.1]
    keys = jax.random.split(jax.random.key(0), 3)
    batch = pr.run_trajectories(prob, "signsgd", lrs, keys, steps=12, log_every=1)
    for g, lr in enumerate(lrs):
        for s in range(3):
            one = pr.run_trajectories(prob, "signsgd", [lr], keys[s : s + 1], steps=12, log_every=1)
            np.testing.assert_allclose(
                batch["stationarity"][0, g, s], one["stationarity"][0, 0, 0], rtol=1e-6
            )
            hand = _hand_signsgd(_problem(), lr, keys[s], 12)
            np.testing.assert_allclose(batch["stationarity"][0, g, s], hand, rtol=1e-5)


def test_sgd_run_matches_hand_update():
    prob = _problem()
    key = jax.random.key(5)
    out = pr.run_trajectories(pr.stack_problems([prob]), "sgd", [0.2], key[None], steps=6)
    x = prob.x0
    for t in range(6):
        g = prob.grad(x) + prob.sigma * jax.random.normal(jax.random.fold_in(key, t), (5,))
        x = x - 0.2 * g
    assert float(out["loss"][0, 0, 0, -1]) == pytest.approx(float(prob.value(x)), rel=1e-5)


def test_no_recompilation_when_step_sizes_sigma_or_seeds_change(compiles):
    keys = jax.random.split(jax.random.key(0), 2)
    pr.run_trajectories(pr.stack_problems([_problem()]), "signsgd", [0.1], keys, steps=4)
    with compiles() as log:
        pr.run_trajectories(pr.stack_problems([_problem(7.0)]), "signsgd", [0.3], keys, steps=4)
        keys2 = jax.random.split(jax.random.key(9), 2)
        pr.run_trajectories(pr.stack_problems([_problem(1.0)]), "signsgd", [1e-4], keys2, steps=4)
    assert log.count("_trajectories") == 0, log.names
    with compiles() as log:  # a new number of steps is a new program: the check can fail
        pr.run_trajectories(pr.stack_problems([_problem()]), "signsgd", [0.1], keys, steps=6)
    assert log.count("_trajectories") == 1, log.names


def test_steps_to_reach_no_recompilation_and_censoring(compiles):
    probs = pr.stack_problems([pr.sgd_hard_instance(20, 1, 0.25, reduced=True, levels=2)] * 2)
    keys = jax.random.split(jax.random.key(0), 4)
    res = pr.steps_to_reach(probs, "signsgd", [0.05, 0.2], keys, 0.3, max_steps=2000)
    assert np.all(res["complexity"] > 0)
    with compiles() as log:
        res2 = pr.steps_to_reach(probs, "signsgd", [0.07, 0.3], keys, 1e-6, max_steps=50)
    assert log.count("_advance_batch") == 0, log.names
    assert np.all(res2["complexity"] == -1) and np.all(np.isnan(res2["best_lr"]))
    assert res2["steps_run"] == 50


def test_steps_to_reach_is_the_first_average_crossing():
    probs = pr.stack_problems([pr.sgd_hard_instance(20, 1, 0.0, reduced=True, levels=2)])
    keys = jax.random.split(jax.random.key(0), 1)
    res = pr.steps_to_reach(probs, "sgd", [1.0], keys, 0.4, max_steps=1000, per_decade=1000)
    T = int(res["complexity"][0])
    traj = pr.run_trajectories(probs, "sgd", [1.0], keys, steps=T, with_loss=False)
    running = np.cumsum(np.asarray(traj["stationarity"][0, 0, 0]))[:-1] / np.arange(1, T + 1)
    assert running[T - 1] <= 0.4 < running[T - 2]


def test_seed_curves_give_the_complexity_and_overshoot_runs_on():
    probs = pr.stack_problems([pr.fixed_curvature_instance(20, 0.05, 0.5, reduced=True,
                                                           levels=2)])  # fmt: skip
    keys = jax.random.split(jax.random.key(0), 4)
    res = pr.steps_to_reach(probs, "sgd", [0.3, 1.0], keys, 0.4, max_steps=10_000)
    more = pr.steps_to_reach(probs, "sgd", [0.3, 1.0], keys, 0.4, max_steps=10_000, overshoot=3)
    assert res["seed_curves"].shape == (*res["curves"].shape, 4)
    np.testing.assert_allclose(res["seed_curves"].mean(-1), res["curves"], rtol=1e-6)
    first, best = pr.complexity_from_curves(res["curves"], res["checkpoints"], 0.4)
    assert res["checkpoints"][first[0]] == res["complexity"][0]
    assert [0.3, 1.0][best[0]] == res["best_lr"][0]
    assert more["complexity"][0] == res["complexity"][0]
    assert more["steps_run"] >= 3 * res["complexity"][0] > res["steps_run"]
    with pytest.raises(ValueError, match="overshoot"):
        pr.steps_to_reach(probs, "sgd", [0.3], keys, 0.4, max_steps=10, overshoot=0.5)


@pytest.mark.parametrize("lrs", [[-0.1], [float("nan")], [0.1, float("inf")], [], [0.0]])
def test_bad_step_sizes_raise(lrs):
    keys = jax.random.split(jax.random.key(0), 1)
    with pytest.raises(ValueError, match="step sizes"):
        pr.run_trajectories(pr.stack_problems([_problem()]), "sgd", lrs, keys, steps=2)


def test_other_bad_input():
    keys = jax.random.split(jax.random.key(0), 1)
    prob = pr.stack_problems([_problem()])
    with pytest.raises(ValueError, match="adam"):
        pr.run_trajectories(prob, "adam", [0.1], keys, steps=2)
    with pytest.raises(ValueError, match="log_every"):
        pr.run_trajectories(prob, "sgd", [0.1], keys, steps=5, log_every=2)
    with pytest.raises(ValueError, match="eps"):
        pr.steps_to_reach(prob, "sgd", [0.1], keys, -1.0, max_steps=10)
    with pytest.raises(ValueError, match="shapes"):
        pr.stack_problems([_problem(), pr.separable_problem([1.0], [0.0], [1.0])])
    with pytest.raises(ValueError, match="step sizes of shape"):
        pr.run_trajectories(prob, "sgd", np.ones((2, 3)), keys, steps=2)
