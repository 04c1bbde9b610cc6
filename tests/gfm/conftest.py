"""Shared by the GFM experiment tests: one results folder per session, so the smoke presets'
denoisers (cached under ``<out>/_cache/denoiser``) are trained once."""

import json
import math

import pytest

from geomopt.experiment import execute, plot_run


@pytest.fixture(scope="session")
def gfm_out(tmp_path_factory):
    return tmp_path_factory.mktemp("gfm_out")


def _run_smoke(exp, out):
    outcome = execute(exp, exp.presets["smoke"], preset="smoke", out=out, quiet=False)
    path = outcome.path
    assert path == out / exp.name / "smoke"
    for f in ("config.json", "metrics.jsonl", "summary.json"):
        assert (path / f).exists(), f
    summary = json.loads((path / "summary.json").read_text())
    bad = {k: v for k, v in outcome.headline.items() if not math.isfinite(v)}
    assert not bad, f"smoke must exercise every computation; non-finite headline values: {bad}"
    assert summary["headline"] == outcome.headline
    figures = plot_run(exp, path, out / "figures")
    assert figures and all(f.exists() and f.stat().st_size > 0 for f in figures)
    assert all(f.name.endswith("_smoke.png") for f in figures)
    return outcome


@pytest.fixture
def run_smoke():
    """``run_smoke(exp, out)``: run the smoke preset, check the folder and draw the figures."""
    return _run_smoke
