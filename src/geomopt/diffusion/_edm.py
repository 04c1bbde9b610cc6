"""The EDM-preconditioned denoiser of the GFM paper's synthetic experiments (Karras et al. 2022).

``D(x, sigma) = c_skip(sigma) x + c_out(sigma) F(c_in(sigma) x, c_noise(sigma))`` with

    c_skip = sigma_data^2 / (sigma^2 + sigma_data^2)
    c_out  = sigma sigma_data / sqrt(sigma^2 + sigma_data^2)
    c_in   = 1 / sqrt(sigma^2 + sigma_data^2)
    c_noise = log(sigma) / 4

(EDM Table 1; the official code uses sigma_data = 1). The network ``F`` is the official
"SimpleMLP": ``h = Linear(d -> width)(x)``, then ``n_blocks`` residual blocks
``h <- h + SiLU(Linear(width + embed_dim -> width)([h, e]))`` where ``e`` is a sinusoidal
embedding of ``c_noise``, then a zero-initialised ``Linear(width -> d)`` (so a fresh model is
``D = c_skip x``). The embedding is :class:`geomopt.nn.SinusoidalEmbedding` (frequencies
``10000^(-k/half)``; the official code uses ``10000^(-k/(half-1))``, a negligible difference).
The training loss (EDM eq. 8) is ``lambda(sigma) |D(x + sigma n, sigma) - x|^2`` with
``lambda = (sigma^2 + sigma_data^2) / (sigma sigma_data)^2`` and ``ln sigma ~ N(P_mean, P_std^2)``.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from geomopt.nn import SinusoidalEmbedding

__all__ = [
    "DenoiserConfig",
    "EDMDenoiser",
    "edm_preconditioning",
    "edm_loss_weight",
    "edm_loss",
]


@dataclasses.dataclass(frozen=True)
class DenoiserConfig:
    """Architecture of :class:`EDMDenoiser` (defaults: the official 128-wide, 4-block MLP)."""

    width: int = 128
    """Hidden width of the residual MLP."""
    n_blocks: int = 4
    """Number of residual SiLU blocks."""
    embed_dim: int = 128
    """Size of the sinusoidal noise-level embedding concatenated into every block."""
    sigma_data: float = 1.0
    """EDM's data standard deviation in the preconditioning (the official code uses 1)."""


def edm_preconditioning(sigma, sigma_data=1.0) -> tuple[Array, Array, Array, Array]:
    """``(c_skip, c_out, c_in, c_noise)`` of EDM (Karras et al. 2022, Table 1)."""
    sigma = jnp.asarray(sigma)
    s2 = sigma**2 + sigma_data**2
    return (
        sigma_data**2 / s2,
        sigma * sigma_data / jnp.sqrt(s2),
        1 / jnp.sqrt(s2),
        jnp.log(sigma) / 4,
    )


def edm_loss_weight(sigma, sigma_data=1.0) -> Array:
    """``lambda(sigma) = (sigma^2 + sigma_data^2) / (sigma sigma_data)^2`` (EDM eq. 8 weight)."""
    sigma = jnp.asarray(sigma)
    return (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2


class EDMDenoiser(eqx.Module):
    """``D(x, sigma)`` for ONE point ``x`` (shape ``(d,)``) and a scalar ``sigma`` > 0.

    ``score(x, sigma) = (D(x, sigma) - x) / sigma^2`` is the score of the smoothed data density
    (Tweedie), so the GFM force is ``lambda * score`` and the potential ``U = -log p`` has
    ``grad U = -score``.
    """

    input_proj: eqx.nn.Linear
    blocks: tuple[eqx.nn.Linear, ...]
    output_proj: eqx.nn.Linear
    embedding: SinusoidalEmbedding
    data_dim: int = eqx.field(static=True)
    sigma_data: float = eqx.field(static=True)

    def __init__(self, data_dim: int, config: DenoiserConfig = DenoiserConfig(), *, key):
        for name in ("width", "n_blocks", "embed_dim"):
            v = getattr(config, name)
            if not isinstance(v, int) or v < (0 if name == "n_blocks" else 1):
                raise ValueError(f"DenoiserConfig.{name} {v!r}: expected a positive integer")
        if not isinstance(data_dim, int) or data_dim < 1:
            raise ValueError(f"data_dim {data_dim!r}: expected a positive integer")
        if not config.sigma_data > 0:
            raise ValueError(f"sigma_data {config.sigma_data!r}: expected > 0")
        k_in, k_out, *k_blocks = jax.random.split(key, config.n_blocks + 2)
        w, e = config.width, config.embed_dim
        self.input_proj = eqx.nn.Linear(data_dim, w, key=k_in)
        self.blocks = tuple(eqx.nn.Linear(w + e, w, key=k) for k in k_blocks)
        out = eqx.nn.Linear(w, data_dim, key=k_out)
        self.output_proj = eqx.tree_at(
            lambda lin: (lin.weight, lin.bias),
            out,
            (jnp.zeros_like(out.weight), jnp.zeros_like(out.bias)),
        )
        self.embedding = SinusoidalEmbedding(e)
        self.data_dim, self.sigma_data = data_dim, float(config.sigma_data)

    def network(self, x_in: Float[Array, " d"], c_noise: Float[Array, ""]) -> Float[Array, " d"]:
        """The raw network ``F(c_in x, c_noise)``."""
        emb = self.embedding(c_noise)
        h = self.input_proj(x_in)
        for block in self.blocks:
            h = h + jax.nn.silu(block(jnp.concatenate([h, emb])))
        return self.output_proj(h)

    def __call__(self, x: Float[Array, " d"], sigma: Float[Array, ""]) -> Float[Array, " d"]:
        x, sigma = jnp.asarray(x), jnp.asarray(sigma)
        if x.shape != (self.data_dim,):
            raise ValueError(
                f"EDMDenoiser: x of shape {x.shape}, expected ({self.data_dim},); vmap batches"
            )
        if sigma.shape != ():
            raise ValueError(f"EDMDenoiser: sigma of shape {sigma.shape}, expected a scalar")
        c_skip, c_out, c_in, c_noise = edm_preconditioning(sigma, self.sigma_data)
        return c_skip * x + c_out * self.network(c_in * x, c_noise)

    def denoise(self, x, sigma):
        """Alias of ``__call__``, so trained and analytic potentials share one interface."""
        return self(x, sigma)

    def score(self, x: Float[Array, " d"], sigma: Float[Array, ""]) -> Float[Array, " d"]:
        """``(D(x, sigma) - x) / sigma^2``: the score of the model's smoothed density."""
        return (self(x, sigma) - x) / jnp.asarray(sigma) ** 2


def edm_loss(
    model: EDMDenoiser,
    x0: Float[Array, "b d"],
    key: PRNGKeyArray,
    p_mean: float | Array = -1.2,
    p_std: float | Array = 1.2,
) -> Float[Array, ""]:
    """EDM training loss on a batch: ``mean lambda(sigma) (D(x0 + sigma n, sigma) - x0)^2``.

    ``ln sigma ~ N(p_mean, p_std^2)`` per example; the mean runs over examples and coordinates,
    as in the official code.
    """
    k_sigma, k_noise = jax.random.split(key)
    b = x0.shape[0]
    sigma = jnp.exp(p_mean + p_std * jax.random.normal(k_sigma, (b,), x0.dtype))
    noisy = x0 + sigma[:, None] * jax.random.normal(k_noise, x0.shape, x0.dtype)
    pred = jax.vmap(model)(noisy, sigma)
    weight = edm_loss_weight(sigma, model.sigma_data)
    return jnp.mean(weight[:, None] * (pred - x0) ** 2)
