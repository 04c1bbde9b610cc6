"""Shape autoencoder (point-cloud encoder, implicit SDF decoder) and the latent EDM denoiser.

- :class:`PointEncoder`: PointNet: a shared per-point MLP, max pooling over points, an MLP to a
  ``latent_dim`` vector (permutation invariant).
- :class:`SDFDecoder`: ``f(z, x)`` = MLP of ``[z, x, sin(2^k pi x), cos(2^k pi x)]`` -> signed
  distance, trained with DeepSDF's clamped L1 loss ``|clamp(f, -delta, delta) - clamp(sdf,
  -delta, delta)|`` (so only the band ``|sdf| < delta`` is fitted exactly; marching cubes at
  level 0 needs only the sign and the band).
- :func:`train_autoencoder`: Adam on that loss plus ``latent_reg * |z|^2`` (keeps the latent
  cloud compact, as a VAE's KL would), batches of shapes x query points, ``lax.scan`` chunks.
- :func:`train_latent_edm`: an UNCONDITIONAL :class:`geomopt.diffusion.EDMDenoiser` on the
  standardised latents (the paper's denoiser is class-conditional; ours models all classes at
  once, so paths may cross classes).
- :func:`decode_sdf_grid` / :func:`decode_meshes`: SDF on a ``res^3`` grid over ``[-1, 1]^3`` and
  marching cubes at level 0 (the paper: 129^3).

Models act on one example and are vmapped by the caller.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from geomopt.diffusion import DenoiserConfig, EDMDenoiser, edm_loss

from ._family import Shape, grid_points, mesh_from_grid, sample_surface, shape_mesh

__all__ = [
    "OUTPUT_INIT_SCALE",
    "AEConfig",
    "EDMTrainConfig",
    "PointEncoder",
    "SDFDecoder",
    "ShapeAutoencoder",
    "shape_training_data",
    "train_autoencoder",
    "train_latent_edm",
    "encode",
    "decode_sdf_grid",
    "decode_meshes",
    "save_model",
    "load_model",
    "surface_clouds",
]


@dataclasses.dataclass(frozen=True)
class AEConfig:
    """Shape autoencoder architecture and training recipe."""

    latent_dim: int = 32
    """Size of the shape latent (the paper: 512 x 8)."""
    width: int = 128
    """Hidden width of encoder and decoder MLPs."""
    depth: int = 3
    """Hidden layers of the decoder MLP."""
    n_freq: int = 4
    """Fourier frequencies 2^0..2^(n_freq-1) of the decoder's point encoding."""
    steps: int = 3000
    """Adam steps."""
    batch_shapes: int = 16
    """Shapes per step."""
    batch_queries: int = 256
    """SDF query points per shape per step."""
    lr: float = 1e-3
    """Adam learning rate (cosine decay to 10% over the run)."""
    clamp: float = 0.1
    """DeepSDF clamp delta of the L1 loss."""
    latent_reg: float = 1e-4
    """Weight of |z|^2 in the loss."""
    log_every: int = 250
    """Steps per jitted chunk (one loss logged per chunk)."""


@dataclasses.dataclass(frozen=True)
class EDMTrainConfig:
    """Latent EDM denoiser: architecture and training recipe."""

    width: int = 256
    """Hidden width of the residual MLP."""
    n_blocks: int = 4
    """Residual blocks."""
    steps: int = 4000
    """Adam steps."""
    batch: int = 256
    """Latents per step (drawn with replacement)."""
    lr: float = 1e-3
    """Adam learning rate (cosine decay to 10%)."""
    log_every: int = 500
    """Steps per jitted chunk."""


def _mlp_sizes(sizes, key):
    keys = jax.random.split(key, len(sizes) - 1)
    return tuple(
        eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
    )


class PointEncoder(eqx.Module):
    """PointNet: ``(N, 3) -> (latent_dim,)``, invariant to the order of the points."""

    point_mlp: tuple[eqx.nn.Linear, ...]
    head: tuple[eqx.nn.Linear, ...]

    def __init__(self, latent_dim: int, width: int, *, key):
        k1, k2 = jax.random.split(key)
        self.point_mlp = _mlp_sizes((3, width // 2, width, width), k1)
        self.head = _mlp_sizes((width, width, latent_dim), k2)

    def __call__(self, cloud):
        h = cloud
        for i, lin in enumerate(self.point_mlp):
            h = jax.vmap(lin)(h)
            if i < len(self.point_mlp) - 1:
                h = jax.nn.silu(h)
        h = jnp.max(h, axis=0)
        for i, lin in enumerate(self.head):
            h = lin(h)
            if i < len(self.head) - 1:
                h = jax.nn.silu(h)
        return h


OUTPUT_INIT_SCALE = 0.01
"""Factor on the SDF decoder's initial output weights (bias 0), so training starts inside the
clamp band of its loss."""


class SDFDecoder(eqx.Module):
    """``f(z, x)``: signed distance at one point ``x (3,)`` of the shape with latent ``z``."""

    layers: tuple[eqx.nn.Linear, ...]
    freqs: jax.Array

    def __init__(self, latent_dim: int, width: int, depth: int, n_freq: int, *, key):
        n_in = latent_dim + 3 + 6 * n_freq
        layers = _mlp_sizes((n_in,) + (width,) * depth + (1,), key)
        # The output starts near 0, inside the clamp band of the DeepSDF loss: with the default
        # init some seeds start with |f| > delta at every query, where the clamped loss has no
        # gradient, and never learn (quick preset, seed 2: nothing decoded).
        last = layers[-1]
        new = (OUTPUT_INIT_SCALE * last.weight, jnp.zeros_like(last.bias))
        last = eqx.tree_at(lambda lin: (lin.weight, lin.bias), last, new)
        self.layers = (*layers[:-1], last)
        self.freqs = jnp.pi * 2.0 ** jnp.arange(n_freq)

    def __call__(self, z, x):
        fx = (x[:, None] * self.freqs[None, :]).reshape(-1)
        h = jnp.concatenate([z, x, jnp.sin(fx), jnp.cos(fx)])
        for i, lin in enumerate(self.layers):
            h = lin(h)
            if i < len(self.layers) - 1:
                h = jax.nn.silu(h)
        return h[0]


class ShapeAutoencoder(eqx.Module):
    encoder: PointEncoder
    decoder: SDFDecoder

    def __init__(self, cfg: AEConfig, *, key):
        k1, k2 = jax.random.split(key)
        self.encoder = PointEncoder(cfg.latent_dim, cfg.width, key=k1)
        self.decoder = SDFDecoder(cfg.latent_dim, cfg.width, cfg.depth, cfg.n_freq, key=k2)


def shape_training_data(
    shapes: list[Shape], *, n_cloud: int, n_query: int, mesh_res: int, seed: int
) -> dict[str, np.ndarray]:
    """Per shape: ``clouds (S, n_cloud, 3)`` surface samples (the encoder's input),
    ``queries (S, n_query, 3)`` (half surface points + N(0, 0.05^2) jitter, half uniform in
    ``[-1, 1]^3``) and their SDF values ``sdf (S, n_query)``."""
    rng = np.random.default_rng(seed)
    clouds, queries, values = [], [], []
    for i, s in enumerate(shapes):
        surf = sample_surface(shape_mesh(s, mesh_res), n_cloud + n_query // 2, seed=seed + i)
        clouds.append(surf[:n_cloud])
        near = surf[n_cloud:] + 0.05 * rng.standard_normal((n_query // 2, 3))
        far = rng.uniform(-1, 1, (n_query - n_query // 2, 3))
        q = np.concatenate([near, far])
        queries.append(q)
        values.append(s.sdf(q))
    return {
        "clouds": np.asarray(clouds, np.float32),
        "queries": np.asarray(queries, np.float32),
        "sdf": np.asarray(values, np.float32),
    }


def _cosine(lr, steps):
    return optax.cosine_decay_schedule(lr, steps, alpha=0.1)


def _train_loop(params, static, loss_fn, data, key, *, lr, steps, log_every, on_chunk):
    """Adam (cosine decay) on ``loss_fn(model, data, key)`` in ``lax.scan`` chunks."""
    opt = optax.adam(_cosine(lr, steps))
    state = opt.init(params)

    @eqx.filter_jit
    def chunk(params, state, keys):
        def step(carry, k):
            p, s = carry
            loss, grads = jax.value_and_grad(lambda p: loss_fn(eqx.combine(p, static), data, k))(p)
            updates, s = opt.update(grads, s, p)
            return (optax.apply_updates(p, updates), s), loss

        return jax.lax.scan(step, (params, state), keys)

    losses, done = [], 0
    while done < steps:
        n = min(log_every, steps - done)
        (params, state), ls = chunk(
            params, state, jax.random.split(jax.random.fold_in(key, done), n)
        )
        ls = np.asarray(ls)
        if not np.isfinite(ls).all():
            raise FloatingPointError(f"training diverged near step {done}; lower the lr")
        losses.append(ls)
        done += n
        if on_chunk is not None:
            on_chunk(n, float(ls.mean()))
    return eqx.combine(params, static), np.concatenate(losses)


def _ae_loss(cfg: AEConfig):
    def loss(model, data, key):
        k_s, k_q = jax.random.split(key)
        n_shapes, n_query = data["sdf"].shape
        idx = jax.random.randint(k_s, (cfg.batch_shapes,), 0, n_shapes)
        q_idx = jax.random.randint(k_q, (cfg.batch_shapes, cfg.batch_queries), 0, n_query)
        clouds = data["clouds"][idx]
        q = jnp.take_along_axis(data["queries"][idx], q_idx[:, :, None], axis=1)
        target = jnp.take_along_axis(data["sdf"][idx], q_idx, axis=1)
        z = jax.vmap(model.encoder)(clouds)
        pred = jax.vmap(lambda zz, qq: jax.vmap(lambda x: model.decoder(zz, x))(qq))(z, q)
        c = cfg.clamp
        l1 = jnp.mean(jnp.abs(jnp.clip(pred, -c, c) - jnp.clip(target, -c, c)))
        return l1 + cfg.latent_reg * jnp.mean(jnp.sum(z**2, axis=-1))

    return loss


def train_autoencoder(
    data: dict[str, np.ndarray], cfg: AEConfig, *, key, on_chunk: Callable | None = None
) -> tuple[ShapeAutoencoder, np.ndarray]:
    """Train a :class:`ShapeAutoencoder` on :func:`shape_training_data`; returns
    ``(model, losses per step)``. ``on_chunk(n_steps, mean_loss)`` reports progress."""
    k_init, k_train = jax.random.split(key)
    model = ShapeAutoencoder(cfg, key=k_init)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    arrays = {k: jnp.asarray(v) for k, v in data.items()}
    return _train_loop(
        params, static, _ae_loss(cfg), arrays, k_train,
        lr=cfg.lr, steps=cfg.steps, log_every=cfg.log_every, on_chunk=on_chunk,
    )  # fmt: skip


def train_latent_edm(
    latents, cfg: EDMTrainConfig, *, key, on_chunk: Callable | None = None
) -> tuple[EDMDenoiser, np.ndarray]:
    """An unconditional EDM denoiser (sigma_data 1, official loss and noise distribution) on
    ``latents (n, d)`` (standardise them first); returns ``(model, losses per step)``."""
    latents = jnp.asarray(latents, jnp.float32)
    if latents.ndim != 2 or not bool(jnp.all(jnp.isfinite(latents))):
        raise ValueError(f"latents of shape {latents.shape}: expected finite (n, d)")
    k_init, k_train = jax.random.split(key)
    mcfg = DenoiserConfig(width=cfg.width, n_blocks=cfg.n_blocks, embed_dim=64)
    model = EDMDenoiser(latents.shape[1], mcfg, key=k_init)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(m, data, k):
        k_b, k_l = jax.random.split(k)
        idx = jax.random.randint(k_b, (cfg.batch,), 0, data.shape[0])
        return edm_loss(m, data[idx], k_l)

    return _train_loop(
        params, static, loss, latents, k_train,
        lr=cfg.lr, steps=cfg.steps, log_every=cfg.log_every, on_chunk=on_chunk,
    )  # fmt: skip


@eqx.filter_jit
def _encode(encoder, clouds):
    return jax.vmap(encoder)(clouds)


def encode(model: ShapeAutoencoder, clouds) -> np.ndarray:
    """Latents of surface clouds ``(B, N, 3)``."""
    clouds = np.asarray(clouds, np.float32)
    if clouds.ndim != 3 or clouds.shape[-1] != 3:
        raise ValueError(f"clouds of shape {clouds.shape}: expected (B, N, 3)")
    return np.asarray(_encode(model.encoder, jnp.asarray(clouds)))


@eqx.filter_jit
def _grid_sdf(decoder, z, grid):
    return jax.vmap(lambda zz: jax.vmap(lambda x: decoder(zz, x))(grid))(z)


def decode_sdf_grid(model: ShapeAutoencoder, latents, res: int, *, chunk: int = 8) -> np.ndarray:
    """Decoded SDF of latents ``(B, d)`` on a ``res^3`` grid over ``[-1, 1]^3``: ``(B, res,
    res, res)``, ``chunk`` latents at a time."""
    latents = np.asarray(latents, np.float32)
    if latents.ndim != 2:
        raise ValueError(f"latents of shape {latents.shape}: expected (B, d)")
    if not np.isfinite(latents).all():
        raise ValueError("latents have non-finite values")
    grid = jnp.asarray(grid_points(res), jnp.float32)
    out = []
    for i in range(0, len(latents), chunk):
        part = latents[i : i + chunk]
        pad = chunk - len(part)
        if pad:
            part = np.concatenate([part, np.repeat(part[-1:], pad, 0)])
        out.append(np.asarray(_grid_sdf(model.decoder, jnp.asarray(part), grid))[: chunk - pad])
    return np.concatenate(out).reshape(len(latents), res, res, res)


def decode_meshes(model: ShapeAutoencoder, latents, res: int) -> list:
    """Marching-cubes meshes (level 0) of decoded latents; ``None`` where the decoded SDF has
    no zero crossing (an empty or space-filling decode)."""
    meshes = []
    for grid in decode_sdf_grid(model, latents, res):
        try:
            meshes.append(mesh_from_grid(grid))
        except ValueError:
            meshes.append(None)
    return meshes


def surface_clouds(meshes: list, n: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(clouds (B, n, 3), ok (B,))``: surface samples of each mesh; a missing mesh gives an
    all-zero cloud (as the official loader returns for a mesh it cannot read) and ``ok=False``."""
    clouds = np.zeros((len(meshes), n, 3))
    ok = np.zeros(len(meshes), bool)
    for i, m in enumerate(meshes):
        if m is not None and len(m.faces) and m.area > 0:
            clouds[i] = sample_surface(m, n, seed=seed + i)
            ok[i] = True
    return clouds, ok


def save_model(path: str | Path, model: eqx.Module, meta: dict) -> None:
    """``model.eqx`` (leaves) and ``model.json`` (what rebuilds the skeleton) in folder ``path``."""
    from geomopt.experiment import atomic_write_bytes, atomic_write_json

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, model)
    atomic_write_bytes(path / "model.eqx", buf.getvalue())
    atomic_write_json(path / "model.json", meta)


def load_model(path: str | Path, skeleton: eqx.Module) -> eqx.Module:
    """Leaves saved by :func:`save_model` into ``skeleton`` (a freshly built model)."""
    path = Path(path)
    with open(path / "model.eqx", "rb") as f:
        return eqx.tree_deserialise_leaves(f, skeleton)
