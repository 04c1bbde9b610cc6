"""Diffusion potentials for geodesic force matching: EDM denoisers, analytic scores, sampling.

- :class:`EDMDenoiser` (``D(x, sigma)``, ``score = (D - x) / sigma^2``), its preconditioning and
  loss; :func:`train_denoiser`, :func:`save_denoiser` / :func:`load_denoiser`, and
  :func:`train_for_manifold` (train or load a denoiser for a :mod:`geomopt.manifolds` shape,
  kept in ``results/gfm/scores/<manifold>/``).
- :func:`sample_pf_ode`: the probability-flow ODE with diffrax (EDM Heun or adaptive Tsit5).
- Analytic potentials with exact scores for tests: :class:`SmoothedCircle`,
  :class:`SmoothedSphere` (closed forms), :class:`SmoothedManifold` (quadrature, any shape),
  :class:`GaussianMixture`.

Every potential and denoiser acts on ONE point ``x`` and a scalar ``sigma``: ``score(x, sigma)``,
``denoise(x, sigma)``; the analytic ones also ``log_density`` and ``energy = -log p``.
"""

from geomopt.diffusion._analytic import GaussianMixture as GaussianMixture
from geomopt.diffusion._analytic import Potential as Potential
from geomopt.diffusion._analytic import SmoothedCircle as SmoothedCircle
from geomopt.diffusion._analytic import SmoothedManifold as SmoothedManifold
from geomopt.diffusion._analytic import SmoothedSphere as SmoothedSphere
from geomopt.diffusion._analytic import quadrature_nodes as quadrature_nodes
from geomopt.diffusion._edm import DenoiserConfig as DenoiserConfig
from geomopt.diffusion._edm import EDMDenoiser as EDMDenoiser
from geomopt.diffusion._edm import edm_loss as edm_loss
from geomopt.diffusion._edm import edm_loss_weight as edm_loss_weight
from geomopt.diffusion._edm import edm_preconditioning as edm_preconditioning
from geomopt.diffusion._sample import edm_sigma_steps as edm_sigma_steps
from geomopt.diffusion._sample import sample_pf_ode as sample_pf_ode
from geomopt.diffusion._train import SCORE_PRESETS as SCORE_PRESETS
from geomopt.diffusion._train import ScoreConfig as ScoreConfig
from geomopt.diffusion._train import TrainConfig as TrainConfig
from geomopt.diffusion._train import load_denoiser as load_denoiser
from geomopt.diffusion._train import save_denoiser as save_denoiser
from geomopt.diffusion._train import score_dir as score_dir
from geomopt.diffusion._train import train_denoiser as train_denoiser
from geomopt.diffusion._train import train_for_manifold as train_for_manifold
from geomopt.diffusion._train import train_scores as train_scores
