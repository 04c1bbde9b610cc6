"""The optimisers of the training loop: weight decay reaches hidden matrices only."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from geomopt.lm import OptimConfig, build_optimizer, lr_schedule


def gpt_like_params():
    return {
        "wte": jnp.ones((8, 4)),
        "blocks": {0: {"mlp": {"fc": {"kernel": jnp.full((4, 16), 2.0), "bias": jnp.ones(16)}}}},
        "ln_f": {"scale": jnp.ones(4)},
    }


@pytest.mark.parametrize(
    "name", ["sgd", "sign_sgd", "signum", "adamw", "muon", "normuon", "muon_cautious", "muon_aol"]
)
def test_decay_only_on_hidden_matrices(name):
    """With zero gradients the only motion is weight decay: kernels shrink by lr * wd (coupled
    L2 for sgd gives the same first step), embeddings, gains and biases stay put."""
    cfg = OptimConfig(algorithm=name, lr=0.1, weight_decay=0.1, schedule="constant", clip=0.0)
    params = gpt_like_params()
    tx = build_optimizer(cfg, total_steps=10)
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, _ = jax.jit(tx.update)(zeros, tx.init(params), params)
    new = optax.apply_updates(params, updates)
    np.testing.assert_allclose(new["blocks"][0]["mlp"]["fc"]["kernel"], 2.0 * 0.99, rtol=1e-6)
    for leaf in (new["wte"], new["ln_f"]["scale"], new["blocks"][0]["mlp"]["fc"]["bias"]):
        np.testing.assert_array_equal(leaf, 1.0)


def test_one_cycle_schedule_endpoints():
    sched = lr_schedule("one_cycle", 1e-2, total_steps=100, warmup_frac=0.1, decay_frac=0.0)
    assert float(sched(0)) == pytest.approx(1e-4, rel=1e-5)
    assert float(sched(10)) == pytest.approx(1e-2, rel=1e-5)
    assert float(sched(100)) == pytest.approx(1e-4, rel=1e-5)
    with pytest.raises(ValueError, match="schedule 'linear'"):
        lr_schedule("linear", 1e-2, 100, 0.1, 0.0)


def test_a_registered_optimiser_trains_gpt2_by_name(fresh_registry):
    """GPT-2's optim.algorithm takes any name of geomopt.optim.OPTIMIZERS: the factory gets the
    OptimConfig fields it takes (here momentum and weight_decay with the hidden-matrix mask)."""
    from geomopt import optim
    from geomopt.lm._config_checks import check_optim_config

    _registry = fresh_registry
    seen = {}

    def signum_wd(learning_rate, momentum=0.5, weight_decay=0.0, mask=None):
        seen.update(momentum=momentum, weight_decay=weight_decay)
        return optim.signum(learning_rate, momentum=momentum, weight_decay=weight_decay, mask=mask)

    _registry.register_optimizer("signum_wd", signum_wd)
    cfg = OptimConfig(algorithm="signum_wd", lr=0.1, weight_decay=0.1, momentum=0.8,
                      schedule="constant", clip=0.0)  # fmt: skip
    check_optim_config(cfg)
    params = gpt_like_params()
    tx = build_optimizer(cfg, total_steps=10)
    assert seen == {"momentum": 0.8, "weight_decay": 0.1}
    zeros = jax.tree.map(jnp.zeros_like, params)
    new = optax.apply_updates(params, jax.jit(tx.update)(zeros, tx.init(params), params)[0])
    np.testing.assert_allclose(new["blocks"][0]["mlp"]["fc"]["kernel"], 2.0 * 0.99, rtol=1e-6)
    np.testing.assert_array_equal(new["wte"], 1.0)  # the mask reached the factory
    with pytest.raises(ValueError, match=r"optim.algorithm='nope': expected one of .*signum_wd"):
        check_optim_config(OptimConfig(algorithm="nope"))
    _registry.register_optimizer("plain", lambda learning_rate: optax.sgd(learning_rate))
    with pytest.raises(ValueError, match="optim.weight_decay=0.1: optimiser 'plain' takes no"):
        build_optimizer(OptimConfig(algorithm="plain", weight_decay=0.1), total_steps=10)


def test_muon_variants_route_embeddings_to_adam_as_muon_does():
    """A Muon variant of the table gets Muon's options from the OptimConfig (the hidden-matrix
    labels, the AdamW part's learning rate and betas), so its embeddings go to AdamW."""
    from geomopt import optim
    from geomopt.lm._optimizer import _muon_label

    cfg = OptimConfig(algorithm="normuon", lr=0.05, adam_lr=0.002, schedule="constant",
                      clip=0.0, momentum=0.9)  # fmt: skip
    params = gpt_like_params()
    grads = jax.tree.map(lambda p: jnp.sin(p + jnp.arange(p.size).reshape(p.shape)), params)
    tx = build_optimizer(cfg, total_steps=10)
    got = tx.update(grads, tx.init(params), params)[0]
    want = optim.muon(0.05, momentum=0.9, nesterov=False, normuon=True, adam_learning_rate=0.002,
                      adam_b1=0.9, adam_b2=0.95, label_fn=_muon_label)  # fmt: skip
    want = want.update(grads, want.init(params), params)[0]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, want)
    # AdamW's first step on the embedding: -adam_lr * sign(g) (bias-corrected)
    np.testing.assert_allclose(got["wte"], -0.002 * np.sign(grads["wte"]), rtol=1e-4)
