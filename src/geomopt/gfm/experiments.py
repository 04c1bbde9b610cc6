"""Compatibility re-exports for code that still imports the removed GFM experiment grab-bag.

The experiments now live in ``geomopt.gfm.exp_{train_score,paths,sigma_sweep,torus_metrics}``
(one file each, on :mod:`geomopt.experiment`); the potentials in :mod:`._potentials` and the
shared protocol in :mod:`._protocol`. Only the three names other modules import remain here:
import them from ``geomopt.gfm`` instead, then delete this module.
"""

from __future__ import annotations

import numpy as np

from ._potentials import TubePotential
from ._protocol import sample_pairs

__all__ = ["TubePotential", "sample_pairs", "torus_angle_init"]

ROUTES = {"top": 0.0, "inner": 1.0, "outer": -1.0}


def torus_angle_init(n_points: int, route: str = "top", major=1.2, minor=0.4) -> np.ndarray:
    """A path from (th, ph) = (pi/2, 0) to (pi/2, pi), linear in ``ph``, mapped to the surface.

    ``"top"`` keeps ``th = pi/2`` (the official initialisation: linear in the intrinsic
    angles); ``"inner"`` / ``"outer"`` bend ``th`` by ``+-pi/2 sin(pi t)`` through the inner /
    outer equator."""
    t = np.linspace(0.0, 1.0, n_points)
    th = np.pi / 2 + ROUTES[route] * np.pi / 2 * np.sin(np.pi * t)
    ph = np.pi * t
    ring = major + minor * np.cos(th)
    return np.stack([ring * np.cos(ph), ring * np.sin(ph), minor * np.sin(th)], 1)
