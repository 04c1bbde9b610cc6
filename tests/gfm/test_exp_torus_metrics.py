"""gfm/torus_metrics on its smoke preset (folder layout, headline keys, figures) and its science."""

import pytest

from geomopt.gfm import exp_torus_metrics


# End to end on a loaded 2-core machine this takes minutes (compilation); CI runs the
# smoke preset through reproduce.py as well.
@pytest.mark.slow
def test_torus_metrics_smoke(gfm_out, run_smoke):
    exp = exp_torus_metrics.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    for key in ("A/lm/error", "A/lm/residual", "A/lm/success"):
        assert key in outcome.headline
    assert 0 <= outcome.headline["lm/distinct_routes"] <= 1
