"""Statuses of the paths protocol: the official GFM Adam at its fixed budget is ``budget`` (the
official code has no convergence test), not ``stalled``; LM at its cap is ``stalled``."""

import jax
import numpy as np

from geomopt.gfm._potentials import TubePotential
from geomopt.gfm._protocol import evaluate, sample_pairs, solve_method, summarise
from geomopt.manifolds import get_manifold


def test_gfm_adam_at_its_budget_is_budget_and_counts_as_success_on_the_manifold():
    circle = get_manifold("circle")
    tube = TubePotential(circle)
    x0, x1 = sample_pairs(circle, 2, jax.random.key(0))
    kw = dict(model=tube, sigma=0.1, lam=1.0, n_points=6, init="chord")
    with jax.enable_x64(True):
        adam = solve_method("gfm_adam", x0, x1, adam={"iters": 3}, **kw)
        assert list(adam["status"]) == ["budget", "budget"]
        assert list(adam["code"]) == [1, 1]  # the iteration cap
        ev = evaluate(adam["paths"], manifold=circle, model=tube, sigma=0.1, lam=1.0,
                      check_sigma=0.01, tol=np.inf)  # fmt: skip
    row = summarise(adam["status"], ev)
    assert row["budget"] == 2 and row["stalled"] == 0 and row["success"] == 1.0
