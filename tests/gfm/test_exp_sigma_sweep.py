"""gfm/sigma_sweep: config validation (fast) and, on its smoke preset, the headline as the
summary of the per-pair rows (success = converged and on the surface at waypoints and
midpoints; the support flag's error rates against that truth)."""

import dataclasses

import numpy as np
import pytest

from geomopt import gfm
from geomopt.experiment import load_metrics
from geomopt.gfm import exp_sigma_sweep
from geomopt.gfm._sigma_sweep_solve import _levels


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(manifolds=("klein_bottle",)), "manifolds"),
        (dict(potentials=("exact", "learned")), "potentials"),
        (dict(methods=("gfm", "gfm+magic")), "methods"),
        (dict(sigmas=()), "sigmas"),
        (dict(sigmas=(0.05, -0.1)), "sigmas"),
        (dict(continuation_sigmas=(0.0,)), "continuation_sigmas"),
        (dict(n_denoisers=0), "n_denoisers"),
    ],
)
def test_validate_names_the_bad_field(change, field):
    cfg = dataclasses.replace(exp_sigma_sweep.EXPERIMENT.presets["smoke"], **change)
    with pytest.raises(ValueError, match=field):
        exp_sigma_sweep.validate(cfg)


def test_every_preset_is_valid_and_quick_covers_every_manifold():
    from geomopt.manifolds import MANIFOLDS

    for cfg in exp_sigma_sweep.EXPERIMENT.presets.values():
        exp_sigma_sweep.validate(cfg)
    quick = exp_sigma_sweep.EXPERIMENT.presets["quick"]
    assert set(quick.manifolds) == set(MANIFOLDS)
    assert {"exact", "trained"} <= set(quick.potentials) and quick.n_denoisers >= 3
    assert quick.gfm_solver == "default"


def test_continuation_levels_lie_above_sigma():
    cfg = exp_sigma_sweep.SigmaSweepConfig(continuation_sigmas=(0.1, 0.2, 0.05))
    assert _levels(cfg, 0.05) == [0.2, 0.1, 0.05]
    assert _levels(cfg, 0.2) == [0.2]


# End to end: exact and tiny trained scores on two moons (about 30 s with compilation).
@pytest.mark.slow
def test_sigma_sweep_smoke(gfm_out, run_smoke):
    exp = exp_sigma_sweep.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    cfg = exp.presets["smoke"]
    rows = [r for r in load_metrics(outcome.path) if "pair" in r]
    head = outcome.headline
    for pot in cfg.potentials:
        for s in cfg.sigmas:
            for m in cfg.methods + ("reference",):
                mine = [r for r in rows if r["potential"] == pot and r["sigma"] == s
                        and r["method"] == m]  # fmt: skip
                assert len(mine) == cfg.n_pairs
                ok = [r["converged"] and r["max_distance"] <= cfg.on_manifold_tol for r in mine]
                assert head[f"two_moons/{pot}/{m}/sigma={s:g}/converged_on"] == pytest.approx(
                    np.mean(ok)
                )
                assert [r["on_surface"] for r in mine] == [
                    r["max_distance"] <= cfg.on_manifold_tol for r in mine
                ]
            n_on = head[f"two_moons/{pot}/support/sigma={s:g}/n_on"]
            n_off = head[f"two_moons/{pot}/support/sigma={s:g}/n_off"]
            assert n_on + n_off == cfg.n_pairs * (len(cfg.methods) + 1)
    assert head["support/threshold_default"] == gfm.DEFAULT_SUPPORT_THRESHOLD
    assert 0.5 <= head["support/threshold_fit"] <= 8.0
    assert np.isfinite(list(head.values())).all()
