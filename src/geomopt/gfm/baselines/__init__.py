"""Baselines of the GFM paper: interpolation and density-aware metrics.

Every metric baseline minimises its discretised path energy over the interior waypoints of a
path with the same number of waypoints as GFM, with the same banded least-squares machinery
(:func:`geomopt.gfm.minimise_path`, window 2: each energy term couples two neighbouring
waypoints) or with Adam. With ``dx_i = x_{i+1} - x_i``, midpoints ``m_i``, ``dt = 1/(K-1)``:

- :class:`RBFEnergy`: ``sum_i g(m_i) |dx_i|^2 / dt`` with the conformal RBF metric
  ``g = 1 / (h(x) + 1e-3)``, ``h`` a weighted sum of RBF bumps on k-means centres fitted so
  ``h ~ 1`` on the data (:func:`fit_rbf_official`).
- :class:`LANDEnergy`: ``sum_i dx_i^T diag(g(m_i)) dx_i / dt`` with the LAND diagonal metric
  ``g_d = 1 / (sum_n w_n (x_{n,d} - x_d)^2 + 1e-3)``, ``w_n = exp(-|x - x_n|^2 / (2 gamma^2))``,
  ``gamma`` = median pairwise distance / 3 (:func:`fit_land`).
- :class:`ScoreEnergy` (the score-Jacobian / pullback metric):
  ``1/2 sum_i |s(x_{i+1}) - s(x_i)|^2 / dt`` with gradients through the score.
- :class:`SteinEnergy`: metric ``G = I + lambda s s^T`` at the midpoints, ``lambda = 1000``.
- :class:`DensityConformalEnergy`: conformal ``1/p`` metric ``sum_i |dx_i|^2 / (p(m_i) dt)``
  (needs ``log p``).

Every energy is a sum of squares ``sum_i |e_i|^2``; ``e_i`` is what :meth:`segment` returns.

The official protocol (what the experiments run; the official code taka2223/GFM-release,
``gfm/path/metrics.py`` and ``geodesic_interpolation.py``):
:func:`fit_rbf_official` / :func:`fit_land_official` fit the metrics as there (k-means centres,
weights by Adam), :func:`official_energy` writes each baseline's path energy in the official form
and :func:`adam_path` minimises it with the official optimiser (:data:`OFFICIAL`: Adam, its
learning rate, iteration budget, cosine decay and initialisation per method). Each pair is
optimised with its own Adam state (the official code sums the batch into one loss; Adam is
invariant to that scale up to its eps).
"""

from ._energies import (
    DensityConformalEnergy,
    LANDEnergy,
    PathEnergy,
    RBFEnergy,
    ScoreEnergy,
    SteinEnergy,
    fit_land,
    linear,
    minimise_energy,
    path_energy,
    spherical,
)
from ._official import (
    OFFICIAL,
    OfficialEnergy,
    adam_path,
    fit_land_official,
    fit_rbf_official,
    official_adam_path,
    official_energy,
)

__all__ = [
    "linear",
    "spherical",
    "PathEnergy",
    "RBFEnergy",
    "LANDEnergy",
    "ScoreEnergy",
    "SteinEnergy",
    "DensityConformalEnergy",
    "fit_land",
    "minimise_energy",
    "path_energy",
    "OFFICIAL",
    "fit_rbf_official",
    "fit_land_official",
    "official_energy",
    "OfficialEnergy",
    "adam_path",
    "official_adam_path",
]
