"""gfm/paths on its smoke preset (folder layout, headline keys, figures) and its science."""

import dataclasses
import json

import pytest

from geomopt.experiment import execute
from geomopt.gfm import exp_paths, exp_sigma_sweep, exp_torus_metrics, exp_train_score


# End to end on a loaded 2-core machine this takes minutes (compilation); CI runs the
# smoke preset through reproduce.py as well.
@pytest.mark.slow
def test_paths_smoke_headline_and_honest_counts(gfm_out, run_smoke):
    exp = exp_paths.EXPERIMENT
    outcome = run_smoke(exp, gfm_out)
    cfg = exp.presets["smoke"]
    for key, _, _ in exp_paths.method_keys(cfg):
        for suffix in ("", "/on_manifold", "/success"):
            assert f"torus/{key}{suffix}" in outcome.headline
    summary = json.loads((outcome.path / "summary.json").read_text())
    for row in summary["details"]["table"]:
        counted = row["converged"] + row["stalled"] + row["diverged"] + row["budget"]
        assert counted == row["n"] or row["method"] == "linear"
        # a path off the manifold is never a success
        assert row["success"] <= row["on_manifold"] + 1e-12
    assert (outcome.path / "paths.npz").exists() and (outcome.path / "table.md").exists()


@pytest.mark.parametrize(
    ("exp", "field", "value"),
    [
        (exp_paths.EXPERIMENT, "methods", ("gfm", "magic")),
        (exp_paths.EXPERIMENT, "gfm_inits", ("sideways",)),
        (exp_paths.EXPERIMENT, "metric_data", 10),
        (exp_paths.EXPERIMENT, "gfm_solver", "newton"),
        (exp_sigma_sweep.EXPERIMENT, "sigmas", (0.1, -1.0)),
        (exp_sigma_sweep.EXPERIMENT, "gfm_solver", "adam"),
        (exp_torus_metrics.EXPERIMENT, "solvers", ("newton",)),
        (exp_train_score.EXPERIMENT, "manifolds", ("klein",)),
    ],
)
def test_bad_configs_are_refused_before_a_folder_exists(tmp_path, exp, field, value):
    cfg = dataclasses.replace(exp.presets["smoke"], **{field: value})
    with pytest.raises(ValueError, match=field):
        execute(exp, cfg, preset="smoke", out=tmp_path, quiet=False)
    assert not (tmp_path / exp.name).exists()
