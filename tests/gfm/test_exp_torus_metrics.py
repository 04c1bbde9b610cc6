"""gfm/torus_metrics on its smoke preset (folder layout, headline keys, figures) and its science."""

import dataclasses
import json
import math

import numpy as np
import pytest

from geomopt.experiment import execute, plot_run
from geomopt.gfm import exp_torus_metrics


# End to end on a loaded 2-core machine this takes minutes (compilation); CI runs the
# smoke preset through reproduce.py as well.
@pytest.mark.slow
def test_torus_metrics_smoke(gfm_out, run_smoke):
    exp = exp_torus_metrics.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    for key in ("A/default/error", "A/default/residual", "A/default/success"):
        assert key in outcome.headline
    assert 0 <= outcome.headline["default/distinct_routes"] <= 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("continuation_sigmas", (0.2, 0.3)),  # not decreasing
        ("continuation_sigmas", (0.3, 0.05)),  # below sigma = 0.1
        ("solvers", ("lm", "continuation")),
    ],
)
def test_bad_solver_settings_are_named(tmp_path, field, value):
    exp = exp_torus_metrics.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["smoke"], **{field: value})
    with pytest.raises(ValueError, match=field):
        execute(exp, cfg, preset="smoke", out=tmp_path, quiet=False)


def test_route_names_follow_the_middle_poloidal_angle():
    for route, th in exp_torus_metrics.ROUTES.items():
        path = exp_torus_metrics.angle_linear_init(21, th, 0.0, th, math.pi)
        assert exp_torus_metrics.route_of(path) == route
    # the angle wraps: -pi is the inner route as well as pi
    path = exp_torus_metrics.angle_linear_init(21, -math.pi + 1e-3, 0.0, -math.pi + 1e-3, 1.0)
    assert exp_torus_metrics.route_of(path) == "inner"


# Compiles the metric LM solve once (about a minute on a loaded 2-core machine).
@pytest.mark.slow
def test_continuation_converges_on_the_surface_under_the_tube_oracle(tmp_path):
    """Run B with the continuation sigma 0.3 -> 0.2 -> 0.1 under the analytic tube potential
    (exact distance): every level is solved, the last converges, on the top route, on the
    surface; the figure draws a panel per solver."""
    exp = exp_torus_metrics.EXPERIMENT
    cfg = dataclasses.replace(
        exp.presets["smoke"],
        runs=exp_torus_metrics.OFFICIAL_RUNS[1:2],
        solvers=("lm_continuation",),
        potential="analytic",
    )
    outcome = execute(exp, cfg, preset="smoke", out=tmp_path, quiet=False)
    row = json.loads((outcome.path / "summary.json").read_text())["details"]["rows"][0]
    assert [lv["sigma"] for lv in row["levels"]] == [0.3, 0.2, 0.1]
    assert row["status"] == "converged" and row["residual"] < 1e-6
    assert row["route"] == "top" and row["error_max"] < 0.02
    assert outcome.headline["lm_continuation/distinct_routes"] == 1.0
    with np.load(outcome.path / "paths.npz") as f:
        path = f["B/lm_continuation"]
    assert path.shape == (20, 3)
    assert plot_run(exp, outcome.path, tmp_path / "figures")
