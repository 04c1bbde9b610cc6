"""Statuses of the paths protocol: the official GFM Adam at its fixed budget is ``budget`` (the
official code has no convergence test), not ``stalled``; LM at its cap is ``stalled``."""

import jax
import numpy as np

from geomopt.gfm._exp_protocol import evaluate, sample_pairs, solve_method, summarise
from geomopt.gfm._potentials import TubePotential
from geomopt.manifolds import get_manifold


def test_gfm_adam_at_its_budget_is_budget_and_a_success_only_on_the_manifold():
    circle = get_manifold("circle")
    tube = TubePotential(circle)
    x0, x1 = sample_pairs(circle, 2, jax.random.key(0))
    kw = dict(model=tube, sigma=0.1, lam=1.0, n_points=6, init="chord")
    with jax.enable_x64(True):
        adam = solve_method("gfm_adam", x0, x1, adam={"iters": 3}, **kw)
        assert list(adam["status"]) == ["budget", "budget"]
        assert list(adam["code"]) == [1, 1]  # the iteration cap
        kw_ev = dict(manifold=circle, model=tube, sigma=0.1, lam=1.0, check_sigma=0.01)
        errors = evaluate(adam["paths"], tol=np.inf, **kw_ev)["error_max"]
        assert np.all(errors > 0.01)  # three Adam steps from the chord: the paths cut inside
        # a tolerance above both paths' worst error: on the manifold, so budget is a success
        loose = evaluate(adam["paths"], tol=1.01 * errors.max(), **kw_ev)
        # a tolerance below it: the same budget paths are off the manifold, a failure
        tight = evaluate(adam["paths"], tol=0.99 * errors.min(), **kw_ev)
    row = summarise(adam["status"], loose)
    assert row["budget"] == 2 and row["stalled"] == 0 and row["success"] == 1.0
    row = summarise(adam["status"], tight)
    assert row["budget"] == 2 and row["on_manifold"] == 0.0 and row["success"] == 0.0
