"""Potentials behind the GFM experiments: trained EDM denoisers (the default everywhere) and the
analytic tube potential (a test oracle and the clearly labelled ``potential="analytic"``
ablation, never a default).

- :func:`trained_denoiser`: an :class:`geomopt.diffusion.EDMDenoiser` for a manifold, trained
  by :func:`geomopt.diffusion.train_for_manifold` into ``run.cache_dir("denoiser", key)`` keyed
  by the manifold and the training spec, so every run with the same spec reuses one model.
- :class:`TubePotential`: ``U(x) = d(x)^2 / (2 sigma^2)`` with ``d`` the exact distance to the
  manifold, score ``-(x - proj(x)) / sigma^2``. It is the leading term of a Gaussian-smoothed
  manifold's ``-log p`` as ``sigma -> 0``: it drops the density's variation along the manifold
  and the curvature correction, and it is discontinuous on the medial axis (the torus's core
  circle and z-axis). Its score has no tangential variation, so the score-Jacobian energy of any
  on-manifold path is zero: results under it say nothing about trained scores. The exact
  smoothed-manifold scores (:class:`geomopt.diffusion.SmoothedManifold`) are the other oracle.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp

__all__ = ["TubePotential", "score_config", "trained_denoiser", "potential_for"]


class TubePotential(eqx.Module):
    """``U(x) = d(x)^2 / (2 sigma^2)`` around a :mod:`geomopt.manifolds` shape (see module doc);
    ``score(x, sigma)``, ``denoise(x, sigma) = proj(x)`` and ``log_density(x, sigma)``
    (normalised in the normal direction)."""

    manifold: eqx.Module

    def score(self, x, sigma):
        return -(x - self.manifold.project(x)) / sigma**2

    def denoise(self, x, sigma):
        return x + sigma**2 * self.score(x, sigma)

    def log_density(self, x, sigma):
        d = self.manifold.distance(x)
        return -(d**2) / (2 * sigma**2) - 0.5 * jnp.log(2 * jnp.pi * sigma**2)


def score_config(spec, manifold: str):
    """The :class:`geomopt.diffusion.ScoreConfig` of a light
    :class:`geomopt.gfm.exp_train_score.DenoiserSpec`."""
    from geomopt.diffusion import DenoiserConfig, ScoreConfig, TrainConfig

    return ScoreConfig(
        manifold=manifold,
        n_data=spec.n_data,
        model=DenoiserConfig(width=spec.width, n_blocks=spec.n_blocks, embed_dim=spec.embed_dim),
        train=TrainConfig(
            steps=spec.steps,
            batch_size=spec.batch_size,
            lr=spec.lr,
            schedule=spec.schedule,
            log_every=min(spec.log_every, spec.steps),
        ),
        n_samples=spec.n_samples,
        seed=spec.seed,
    )


def trained_denoiser(run, manifold: str, spec):
    """``(model, summary)``: the denoiser of ``spec`` for ``manifold``, trained into (or loaded
    from) ``run.cache_dir("denoiser", {"manifold": ..., **spec})``. Shows a progress bar while
    training; the summary's ``cache`` names the folder."""
    from geomopt.diffusion import train_for_manifold

    key = {"manifold": manifold, **dataclasses.asdict(spec)}
    folder = run.cache_dir("denoiser", key)
    cfg = score_config(spec, manifold)
    done = (folder / "train_summary.json").exists()
    bar = None if done else run.progress(total=spec.steps, desc=f"train denoiser: {manifold}")
    try:
        model, summary = train_for_manifold(manifold, cfg, folder, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return model, {**summary, "cache": str(folder)}


def potential_for(run, manifold: str, potential: str, spec):
    """The potential object (``score(x, sigma)``, ``denoise(x, sigma)``) an experiment solves
    against: a trained denoiser (``"trained"``) or the :class:`TubePotential` ablation
    (``"analytic"``). Returns ``(model, info)``."""
    from geomopt.manifolds import get_manifold

    if potential == "trained":
        return trained_denoiser(run, manifold, spec)
    if potential == "analytic":
        return TubePotential(get_manifold(manifold)), {"analytic": True}
    raise ValueError(f"potential {potential!r}: expected 'trained' or 'analytic'")
