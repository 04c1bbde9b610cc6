"""gfm/sigma_sweep on its smoke preset (folder layout, headline keys, figures) and its science."""

import numpy as np
import pytest

from geomopt.gfm import exp_sigma_sweep
from geomopt.runs import load_metrics


# End to end on a loaded 2-core machine this takes minutes (compilation); CI runs the
# smoke preset through reproduce.py as well.
@pytest.mark.slow
def test_sigma_sweep_smoke(gfm_out, run_smoke):
    exp = exp_sigma_sweep.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    cfg = exp.presets["smoke"]
    rows = [r for r in load_metrics(outcome.path) if "pair" in r]
    for m in cfg.methods:
        for s in cfg.sigmas:
            mine = [r for r in rows if r["method"] == m and r["sigma"] == s]
            assert len(mine) == cfg.n_pairs
            # the headline is the per-pair rows' summary: failure = not on the manifold, or
            # stalled / diverged; error = mean manifold error over the finite paths
            failed = [not r["on_manifold"] or r["status"] in ("stalled", "diverged")
                      for r in mine]  # fmt: skip
            head = outcome.headline
            assert head[f"{m}/sigma={s:g}/failure"] == pytest.approx(np.mean(failed))
            assert head[f"{m}/sigma={s:g}/failure/denoiser=0"] == pytest.approx(np.mean(failed))
            errors = [r["error_mean"] for r in mine if isinstance(r["error_mean"], float)
                      and np.isfinite(r["error_mean"])]  # fmt: skip
            assert head[f"{m}/sigma={s:g}/error"] == pytest.approx(np.mean(errors))
            # the reason given agrees with the failure flag
            assert [r["reason"] != "ok" for r in mine] == failed
