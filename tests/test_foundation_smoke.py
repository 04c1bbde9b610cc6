import jax.numpy as jnp


def test_rank_promotion_raises():
    import pytest

    with pytest.raises(ValueError):
        jnp.ones((3,)) + jnp.ones((2, 3))
