"""Diffusion potentials for geodesic force matching: EDM denoisers, analytic scores, sampling.

- :class:`EDMDenoiser` (``D(x, sigma)``, ``score = (D - x) / sigma^2``), its preconditioning and
  loss; :func:`train_denoiser`, :func:`save_denoiser` / :func:`load_denoiser`, and
  :func:`train_for_manifold` (train or load a denoiser for a :mod:`geomopt.manifolds` shape,
  kept in a folder the caller names, e.g. an experiment's ``run.cache_dir``).
- :func:`sample_pf_ode`: the probability-flow ODE with diffrax (EDM Heun or adaptive Tsit5);
  :func:`pf_ode_denoise`: the same from given points at a given noise level.
- Analytic potentials with exact scores for tests: :class:`SmoothedCircle`,
  :class:`SmoothedSphere` (closed forms), :class:`SmoothedManifold` (quadrature, any shape),
  :class:`GaussianMixture`.

Every potential and denoiser acts on ONE point ``x`` and a scalar ``sigma``: ``score(x, sigma)``,
``denoise(x, sigma)``; the analytic ones also ``log_density`` and ``energy = -log p``.
"""

import lazy_loader as _lazy

# Submodules are imported on first use, so that `--help` of every entry point and the
# experiment declarations load without JAX (see geomopt.experiment).
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "_analytic": [
            "GaussianMixture",
            "Potential",
            "SmoothedCircle",
            "SmoothedManifold",
            "SmoothedSphere",
            "quadrature_nodes",
        ],
        "_edm": [
            "DenoiserConfig",
            "EDMDenoiser",
            "edm_loss",
            "edm_loss_weight",
            "edm_preconditioning",
        ],
        "_sample": [
            "edm_sigma_steps",
            "pf_ode_denoise",
            "sample_pf_ode",
        ],
        "_train": [
            "SCORE_PRESETS",
            "ScoreConfig",
            "TrainConfig",
            "learning_rates",
            "load_denoiser",
            "save_denoiser",
            "train_denoiser",
            "train_for_manifold",
        ],
    },
)
