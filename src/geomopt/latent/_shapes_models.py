"""The models of one ``gfm/shapes`` seed (:mod:`geomopt.latent.exp_shapes`): the shape
autoencoder, the latent EDM and the latent statistics, trained or loaded from the run's cache."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from geomopt.experiment import Run

if TYPE_CHECKING:
    from geomopt.latent.exp_shapes import ShapesConfig


def _model_key(cfg: ShapesConfig, seed: int) -> dict:
    """What the cached models of ``seed`` depend on: the data and training fields, and the
    decoder's output init (models cached before it changed decoded nothing on some seeds and
    must not be reused)."""
    from geomopt.shapes import OUTPUT_INIT_SCALE

    keys = ("n_shapes", "mesh_res", "n_cloud", "n_query", "latent_dim", "ae_width", "ae_steps",
            "ae_batch", "edm_width", "edm_steps")  # fmt: skip
    return {**{k: getattr(cfg, k) for k in keys}, "seed": seed,
            "decoder_init_scale": OUTPUT_INIT_SCALE}  # fmt: skip


def _models(cfg: ShapesConfig, run: Run, seed: int):
    """Autoencoder, latent EDM and latent statistics of ``seed``: trained, or loaded from the
    cache."""
    import jax
    import numpy as np

    from geomopt.diffusion import DenoiserConfig, EDMDenoiser
    from geomopt.shapes import (
        AEConfig,
        EDMTrainConfig,
        ShapeAutoencoder,
        encode,
        load_model,
        random_shapes,
        save_model,
        shape_training_data,
        train_autoencoder,
        train_latent_edm,
    )

    ae_cfg = AEConfig(latent_dim=cfg.latent_dim, width=cfg.ae_width, steps=cfg.ae_steps,
                      batch_shapes=cfg.ae_batch, batch_queries=128,
                      log_every=max(1, min(250, cfg.ae_steps)))  # fmt: skip
    edm_cfg = EDMTrainConfig(width=cfg.edm_width, steps=cfg.edm_steps,
                             log_every=max(1, min(500, cfg.edm_steps)))  # fmt: skip
    cache = run.cache_dir("shape_models", _model_key(cfg, seed))
    k_ae, k_edm = jax.random.split(jax.random.key(seed))
    ae_skel = ShapeAutoencoder(ae_cfg, key=k_ae)
    edm_skel = EDMDenoiser(cfg.latent_dim, DenoiserConfig(cfg.edm_width, 4, 64), key=k_edm)
    stats_file = cache / "latents.npz"
    if (
        (cache / "ae" / "model.eqx").exists()
        and (cache / "edm" / "model.eqx").exists()
        and (stats_file.exists())
    ):
        run.print(f"models loaded from {cache}")
        with np.load(stats_file) as f:
            lat = dict(f)
        return load_model(cache / "ae", ae_skel), load_model(cache / "edm", edm_skel), lat
    shapes = random_shapes(cfg.n_shapes, seed)
    data = shape_training_data(shapes, n_cloud=cfg.n_cloud, n_query=cfg.n_query,
                               mesh_res=cfg.mesh_res, seed=seed)  # fmt: skip
    bar = run.progress(total=cfg.ae_steps, desc=f"seed {seed}: autoencoder", unit="step")
    ae, ae_losses = train_autoencoder(
        data, ae_cfg, key=k_ae, on_chunk=lambda n, loss: bar.update(n, loss=loss)
    )
    bar.close()
    z = encode(ae, data["clouds"])
    mean, std = z.mean(0), z.std(0) + 1e-6
    u = (z - mean) / std
    bar = run.progress(total=cfg.edm_steps, desc=f"seed {seed}: latent EDM", unit="step")
    edm, edm_losses = train_latent_edm(
        u, edm_cfg, key=k_edm, on_chunk=lambda n, loss: bar.update(n, loss=loss)
    )
    bar.close()
    lat = {"mean": mean, "std": std, "u": u, "clouds": data["clouds"],
           "ae_loss": ae_losses, "edm_loss": edm_losses}  # fmt: skip
    save_model(cache / "ae", ae, {"config": dataclasses.asdict(ae_cfg)})
    save_model(cache / "edm", edm, {"config": dataclasses.asdict(edm_cfg)})
    buf_path = stats_file.with_suffix(".tmp.npz")
    np.savez(buf_path, **lat)
    buf_path.replace(stats_file)
    return ae, edm, lat
