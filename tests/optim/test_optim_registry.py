"""geomopt.optim's one optimiser table: names mean the same update everywhere, options are the
factory's own, a new optimiser is one registration or one factory passed to a runner."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from geomopt import optim
from geomopt import problems as pr


def _steps(tx, n=3):
    """Three updates of ``tx`` on fixed gradients (a momentum changes the third)."""
    params = {"w": jnp.array([[1.0, -2.0], [0.5, 3.0]])}
    state = tx.init(params)
    out = []
    for i in range(n):
        g = jax.tree.map(lambda p, i=i: jnp.sin(p * (i + 1.0)), params)
        u, state = tx.update(g, state, params)
        params = optax.apply_updates(params, u)
        out.append(np.asarray(params["w"]))
    return np.stack(out)


@pytest.mark.parametrize(
    "name, direct",
    [
        ("sgd", lambda: optim.sgd(0.1)),  # momentum 0.9, as optim.sgd
        ("sign_sgd", lambda: optim.sign_sgd(0.1)),
        ("signum", lambda: optim.signum(0.1)),
        ("muon", lambda: optim.muon(0.1)),
        ("normuon", lambda: optim.muon(0.1, normuon=True)),
        ("muon_cautious", lambda: optim.muon(0.1, cautious_weight_decay=True, weight_decay=0.5)),
        ("muon_aol", lambda: optim.muon(0.1, preconditioning="aol", ns_steps=4)),
        ("orthogonalized_sgd", lambda: optim.orthogonalized_sgd(0.1)),
        ("adamw", lambda: optax.adamw(0.1)),
    ],
)
def test_a_name_is_its_factory_with_its_defaults(name, direct):
    kw = {"weight_decay": 0.5} if name == "muon_cautious" else {}
    np.testing.assert_allclose(_steps(optim.make_optimizer(name, 0.1, **kw)), _steps(direct()))


def test_muon_qkv_orthogonalises_the_fused_weight_in_three():
    params = {"attn": {"qkv": jnp.sin(jnp.arange(24.0)).reshape(4, 6)}, "w": jnp.ones((3, 3))}
    grads = jax.tree.map(lambda p: jnp.cos(3.0 * p), params)
    tx = optim.make_optimizer("muon_qkv", 0.1)
    got = tx.update(grads, tx.init(params), params)[0]
    want = optim.muon(0.1, blocks=optim.blocks_by_path("qkv", 3))
    want = want.update(grads, want.init(params), params)[0]
    jax.tree.map(np.testing.assert_allclose, got, want)
    plain = optim.muon(0.1)
    plain = plain.update(grads, plain.init(params), params)[0]
    assert not np.allclose(got["attn"]["qkv"], plain["attn"]["qkv"])


def test_options_are_the_factorys_and_plain_sgd_is_momentum_zero():
    plain = _steps(optim.make_optimizer("sgd", 0.1, momentum=0.0))
    assert not np.allclose(plain, _steps(optim.make_optimizer("sgd", 0.1)))
    # the toy problems' "sgd" is the theory's plain SGD, through the same table
    np.testing.assert_allclose(_steps(pr.make_optimizer("sgd", 0.1)), plain)
    np.testing.assert_allclose(
        _steps(pr.make_optimizer("signsgd", 0.1)), _steps(optim.sign_sgd(0.1))
    )
    with pytest.raises(ValueError, match=r"optimizer 'sgd': no option \['beta'\]; it takes"):
        optim.make_optimizer("sgd", 0.1, beta=0.9)
    with pytest.raises(ValueError, match=r"optimizer 'adam': expected one of \['adamw', "):
        optim.make_optimizer("adam", 0.1)


def test_register_a_new_optimiser(fresh_registry):
    assert "signum_wd" not in optim.OPTIMIZERS

    def signum_wd(learning_rate, weight_decay=1e-2):
        return optim.signum(learning_rate, momentum=0.9, weight_decay=weight_decay)

    optim.register_optimizer("signum_wd", signum_wd)
    assert optim.OPTIMIZERS["signum_wd"] is signum_wd  # the public view sees it
    with pytest.raises(ValueError, match="already registered"):
        optim.register_optimizer("signum_wd", signum_wd)
    got = _steps(optim.make_optimizer("signum_wd", 0.1, weight_decay=0.5))
    np.testing.assert_allclose(got, _steps(optim.signum(0.1, weight_decay=0.5)))
    assert not np.allclose(got, _steps(optim.signum(0.1)))


def test_runners_take_a_factory_and_compile_once_per_factory(compiles):
    """The issue's "Signum with weight decay" in the toy runner: one value passed in."""
    prob = pr.stack_problems([pr.separable_problem([1.0, 4.0], [0.5, 0.5], [2.0, -1.0])])
    keys = jax.random.split(jax.random.key(0), 2)
    kw = dict(steps=8, log_every=4)
    named = pr.run_trajectories(prob, "signum", [0.1], keys, **kw)
    same = pr.run_trajectories(prob, functools.partial(optim.signum, momentum=0.9), [0.1], keys,
                               **kw)  # fmt: skip
    np.testing.assert_allclose(same["loss"], named["loss"], rtol=1e-6)
    signum_wd = functools.partial(optim.signum, momentum=0.9, weight_decay=0.5)
    decayed = pr.run_trajectories(prob, signum_wd, [0.1], keys, **kw)
    assert not np.allclose(decayed["loss"], named["loss"])
    with compiles() as log:  # the same factory object, other step sizes: no recompilation
        pr.run_trajectories(prob, signum_wd, [0.2], keys, **kw)
    assert log.count("_trajectories") == 0, log.names


def test_every_training_loop_and_demo_optimiser_is_a_registered_name():
    """One table: lm's algorithms and the pretraining demo's list are names of the registry
    (lm builds them through optim.make_optimizer)."""
    import typing

    from geomopt.lm._config import OptimName
    from geomopt.lm.exp_pretrain_demo import OPTIMIZERS as DEMO

    assert set(typing.get_args(OptimName)) <= set(optim.OPTIMIZERS)
    assert sorted(DEMO) == sorted(typing.get_args(OptimName))
