"""gfm/sigma_sweep on its smoke preset (folder layout, headline keys, figures) and its science."""

import pytest

from geomopt.gfm import exp_sigma_sweep


# End to end on a loaded 2-core machine this takes minutes (compilation); CI runs the
# smoke preset through reproduce.py as well.
@pytest.mark.slow
def test_sigma_sweep_smoke(gfm_out, run_smoke):
    exp = exp_sigma_sweep.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    cfg = exp.presets["smoke"]
    for m in cfg.methods:
        for s in cfg.sigmas:
            assert f"{m}/sigma={s:g}/error" in outcome.headline
            assert 0.0 <= outcome.headline[f"{m}/sigma={s:g}/failure"] <= 1.0
