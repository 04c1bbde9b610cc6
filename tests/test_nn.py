import jax.numpy as jnp
import numpy as np
import pytest

from geomopt import nn


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
