import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import nn


def test_mlp_shapes_and_vmap(key):
    mlp = nn.MLP(3, 2, width=16, depth=2, key=key)
    assert len(mlp.layers) == 3
    x = jnp.ones((7, 3))
    assert jax.vmap(mlp)(x).shape == (7, 2)
    assert nn.MLP(3, 2, width=16, depth=0, key=key)(x[0]).shape == (2,)


def test_residual_blocks_start_as_identity(key):
    block = nn.ResidualBlock(8, key=key)
    x = jax.random.normal(jax.random.key(1), (8,))
    np.testing.assert_allclose(block(x), x)


def test_residual_mlp_dropout_only_with_key(key):
    model = nn.ResidualMLP(4, 3, width=32, n_blocks=2, dropout=0.5, key=key)
    # Make the blocks non-trivial so dropout has an effect.
    leaves, treedef = jax.tree.flatten(eqx.filter(model, eqx.is_inexact_array))
    keys = jax.random.split(jax.random.key(3), len(leaves))
    noisy = [a + 0.3 * jax.random.normal(k, a.shape) for a, k in zip(leaves, keys, strict=True)]
    model = eqx.combine(jax.tree.unflatten(treedef, noisy), model)
    x = jnp.arange(4.0)
    np.testing.assert_allclose(model(x), model(x))
    y1 = model(x, key=jax.random.key(1))
    y2 = model(x, key=jax.random.key(2))
    assert y1.shape == (3,)
    assert not np.allclose(y1, y2)


def test_sinusoidal_embedding_values():
    emb = nn.SinusoidalEmbedding(8, max_period=10_000.0)
    t = 0.3
    out = emb(jnp.asarray(t))
    freqs = 10_000.0 ** (-np.arange(4) / 4)
    np.testing.assert_allclose(out, np.concatenate([np.sin(t * freqs), np.cos(t * freqs)]), 1e-6)
    with pytest.raises(ValueError, match="even"):
        nn.SinusoidalEmbedding(7)
    with pytest.raises(ValueError, match="scalar"):
        emb(jnp.ones(2))


def test_fourier_features_fixed_and_correct(key):
    ff = nn.FourierFeatures(3, 5, scale=2.0, key=key)
    x = jnp.array([0.1, -0.2, 0.3])
    proj = 2 * np.pi * np.asarray(ff.B) @ np.asarray(x)
    np.testing.assert_allclose(ff(x), np.concatenate([np.cos(proj), np.sin(proj)]), atol=2e-5)
    assert ff.out_size == 10
    grads = jax.grad(lambda m: m(x).sum())(ff)
    np.testing.assert_array_equal(grads.B, 0.0)  # B is frozen
    with pytest.raises(ValueError, match=r"expected \(3,\)"):
        ff(jnp.ones(4))


@pytest.mark.parametrize(
    "make",
    [
        lambda k: nn.MLP(0, 2, 4, 1, key=k),
        lambda k: nn.MLP(2, 2, 4, -1, key=k),
        lambda k: nn.ResidualMLP(2, 2, 4, 1, dropout=1.0, key=k),
        lambda k: nn.FourierFeatures(2, 4, scale=float("nan"), key=k),
    ],
)
def test_bad_sizes_raise(key, make):
    with pytest.raises(ValueError):
        make(key)
