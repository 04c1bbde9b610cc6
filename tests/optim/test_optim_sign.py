"""SignSGD, Signum and the paper's SGD: optax oracles, masked weight decay, traced learning
rates under vmap/jit, convergence, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from geomopt.optim import sgd, sign_sgd, signum


def _tree(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "w": jax.random.normal(k1, (5, 4)),
        "b": jax.random.normal(k2, (4,)),
        "nested": [jax.random.normal(k3, (3,))],
    }


def _run(opt, params, grads_seq):
    """Apply ``opt`` for each gradient in ``grads_seq`` (one jitted scan)."""
    stacked = jax.tree.map(lambda *g: jnp.stack(g), *grads_seq)

    @jax.jit
    def run(params, stacked):
        def step(carry, g):
            p, s = carry
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None

        (p, _), _ = jax.lax.scan(step, (params, opt.init(params)), stacked)
        return p

    return run(params, stacked)


def _grads(key, params, n=4):
    keys = jax.random.split(key, n)
    return [jax.tree.map(lambda p, k=k: jax.random.normal(k, p.shape), params) for k in keys]


def _assert_trees_close(a, b, **kw):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, **kw), a, b)


def test_sign_sgd_and_signum_equal_optax(key):
    params = _tree(key)
    grads = _grads(jax.random.fold_in(key, 1), params)
    # Exact zeros in the gradient: sign(0) = 0 must leave those coordinates alone.
    grads[0] = jax.tree.map(lambda g: g.at[..., 0].set(0.0), grads[0])
    _assert_trees_close(
        _run(sign_sgd(0.1), params, grads), _run(optax.sign_sgd(0.1), params, grads), rtol=0
    )
    _assert_trees_close(
        _run(signum(0.1, momentum=0.8), params, grads),
        _run(optax.signum(0.1, 0.8), params, grads),
        rtol=0,
    )


def test_sign_of_zero_is_zero(key):
    params = _tree(key)
    zeros = jax.tree.map(jnp.zeros_like, params)
    _assert_trees_close(_run(sign_sgd(0.5), params, [zeros] * 3), params, rtol=0)


def test_decoupled_weight_decay_only_on_mask(key):
    params = _tree(key)
    grads = _grads(jax.random.fold_in(key, 2), params, n=3)
    lr, wd = 0.1, 0.5
    mask = {"w": True, "b": False, "nested": [True]}

    expected = jax.tree.map(np.asarray, params)
    for g in grads:
        expected = jax.tree.map(
            lambda p, gi, m: p - lr * np.sign(gi) - (lr * wd * p if m else 0.0),
            expected,
            g,
            mask,
        )
    got = _run(sign_sgd(lr, weight_decay=wd, mask=mask), params, grads)
    _assert_trees_close(got, expected, rtol=1e-6, atol=1e-6)
    # A callable mask (as optax.add_decayed_weights) gives the same.
    got_fn = _run(sign_sgd(lr, weight_decay=wd, mask=lambda p: mask), params, grads)
    _assert_trees_close(got_fn, expected, rtol=1e-6, atol=1e-6)

    # Signum: zero gradient -> m stays 0, sign 0 -> only the masked decay p *= (1 - lr wd).
    zeros = jax.tree.map(jnp.zeros_like, params)
    got = _run(signum(lr, weight_decay=wd, mask=mask), params, [zeros] * 2)
    np.testing.assert_allclose(got["w"], params["w"] * (1 - lr * wd) ** 2, rtol=1e-6)
    np.testing.assert_allclose(got["b"], params["b"], rtol=0)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_coupled_l2_matches_reference(key, nesterov):
    params = _tree(key)
    grads = _grads(jax.random.fold_in(key, 3), params, n=4)
    lr, mom, wd = 0.05, 0.9, 0.1
    mask = {"w": True, "b": False, "nested": [False]}

    # PyTorch SGD (dampening 0): d = g + wd p; buf = mom buf + d; step = d + mom buf (Nesterov).
    flat_p, treedef = jax.tree.flatten(params)
    flat_m = jax.tree.leaves(mask)
    bufs = [np.zeros_like(p) for p in flat_p]
    ps = [np.asarray(p, np.float64) for p in flat_p]
    for g in grads:
        for i, gi in enumerate(jax.tree.leaves(g)):
            d = np.asarray(gi, np.float64) + (wd * ps[i] if flat_m[i] else 0.0)
            bufs[i] = mom * bufs[i] + d
            step = d + mom * bufs[i] if nesterov else bufs[i]
            ps[i] = ps[i] - lr * step
    expected = jax.tree.unflatten(treedef, ps)
    got = _run(sgd(lr, momentum=mom, weight_decay=wd, mask=mask, nesterov=nesterov), params, grads)
    _assert_trees_close(got, expected, rtol=1e-5, atol=1e-6)


def test_traced_learning_rates_under_vmap_and_no_recompile(key):
    params = _tree(key)
    grads = _grads(jax.random.fold_in(key, 4), params, n=3)
    grads_stacked = jax.tree.map(lambda *g: jnp.stack(g), *grads)
    ref_lrs = [0.01, 0.1]
    refs = [_run(signum(lr, weight_decay=0.1), params, grads) for lr in ref_lrs]
    traces = []

    @jax.jit
    def final_params(lr):
        traces.append(1)

        def run_one(lr_i):
            opt = signum(lr_i, weight_decay=0.1)
            state = opt.init(params)

            def step(carry, g):
                p, s = carry
                u, s = opt.update(g, s, p)
                return (optax.apply_updates(p, u), s), None

            (p, _), _ = jax.lax.scan(step, (params, state), grads_stacked)
            return p

        return jax.vmap(run_one)(lr)

    lrs = jnp.array(ref_lrs)
    out = final_params(lrs)
    for i, ref in enumerate(refs):
        _assert_trees_close(jax.tree.map(lambda x, i=i: x[i], out), ref, rtol=1e-5, atol=1e-6)
    final_params(lrs * 3.0)
    assert len(traces) == 1


def _quadratic_loss(p):
    scales = jnp.arange(1.0, p.shape[0] + 1.0)
    return 0.5 * jnp.sum(scales * p**2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: sign_sgd(optax.linear_schedule(0.05, 0.0, 200)),
        lambda: signum(optax.linear_schedule(0.05, 0.0, 200)),
        lambda: sgd(0.02, momentum=0.9, weight_decay=0.01),
    ],
)
def test_converges_on_quadratic(make, key):
    p = jax.random.normal(key, (8,))
    opt = make()
    state = opt.init(p)

    @jax.jit
    def step(carry, _):
        p, s = carry
        u, s = opt.update(jax.grad(_quadratic_loss)(p), s, p)
        return (optax.apply_updates(p, u), s), None

    (p_end, _), _ = jax.lax.scan(step, (p, state), None, length=200)
    assert _quadratic_loss(p_end) < 1e-3 * _quadratic_loss(p)


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: sign_sgd(-1e-3), "-0.001"),
        (lambda: sign_sgd(float("inf")), "inf"),
        (lambda: signum(1e-3, momentum=1.0), "momentum=1.0"),
        (lambda: signum(1e-3, momentum=-0.1), "momentum=-0.1"),
        (lambda: sign_sgd(1e-3, weight_decay=-0.1), "weight_decay=-0.1"),
        (lambda: sgd(float("nan")), "nan"),
        (lambda: sgd(1e-3, momentum=1.5), "momentum=1.5"),
    ],
)
def test_bad_input(make, needle):
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        make()
