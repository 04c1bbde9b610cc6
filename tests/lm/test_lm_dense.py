"""``geomopt.lm._model.dense``: the custom-VJP matmul of every GPT-2 linear layer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.lm._model import dense


@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 5)])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dense_value_and_gradients_equal_autodiff_of_dot(shape, dtype):
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, shape, jnp.float32).astype(dtype)
    w = jax.random.normal(kw, (5, 4), jnp.float32).astype(dtype)
    g = jax.random.normal(kg, (*shape[:-1], 4), jnp.float32).astype(dtype)
    y, vjp = jax.vjp(dense, x, w)
    y_ref, vjp_ref = jax.vjp(jnp.dot, x, w)
    tol = 1e-6 if dtype == jnp.float32 else 2e-2
    for a, b in zip((y, *vjp(g)), (y_ref, *vjp_ref(g)), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(
            np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol
        )


def test_dense_per_example_gradients_under_vmap():
    x = jax.random.normal(jax.random.key(1), (3, 6, 5))
    w = jax.random.normal(jax.random.key(2), (5, 4))

    def loss(f, w, xi):
        return jnp.sum(jnp.tanh(f(xi, w)))

    ours = jax.vmap(jax.grad(lambda w, xi: loss(dense, w, xi)), in_axes=(None, 0))(w, x)
    ref = jax.vmap(jax.grad(lambda w, xi: loss(jnp.dot, w, xi)), in_axes=(None, 0))(w, x)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
