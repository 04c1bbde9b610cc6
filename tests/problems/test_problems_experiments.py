"""The SignSGD experiment functions: step-size rule, slope fit, run folders, figures, registry."""

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from geomopt.problems import experiments as ex
from geomopt.runs import RunExistsError

ROOT = Path(__file__).resolve().parents[2]


def test_paper_step_size_rule():
    initial = 10.0
    assert ex.select_step_size(np.array([np.nan, 12.0, 3.0, 5.0]), initial) == 2
    assert ex.select_step_size(np.array([np.inf, 11.0]), initial) == -1
    assert ex.select_step_size(np.array([10.0, 10.5]), initial) == 0


def test_fit_slope_recovers_power_laws():
    x = np.array([10.0, 100.0, 1000.0])
    assert ex.fit_slope(x, 3 * x**1.0) == pytest.approx(1.0)
    assert ex.fit_slope(x, 5 * x**-0.5) == pytest.approx(-0.5)
    assert np.isnan(ex.fit_slope([10.0], [1.0]))


@pytest.mark.slow
def test_toy_run_is_not_overwritten_and_plots(tmp_path):
    cfg = ex.ToyConfig(det_d=8, noise_d=4, runs=3, steps=8, log_every=2, root=tmp_path, name="tiny")
    path = ex.run_toy(cfg)
    summary = json.loads((path / "summary.json").read_text())
    assert set(summary["deterministic"]) == {"sgd", "signsgd"}
    with pytest.raises(RunExistsError):
        ex.run_toy(cfg)
    ex.run_toy(dataclasses.replace(cfg, overwrite=True))
    figs = ex.plot_toy(path, tmp_path / "figs")
    assert all(f.exists() and f.stat().st_size > 1000 for f in figs)


def test_sparse_noise_tiny_run(tmp_path):
    cfg = ex.SparseNoiseConfig(
        dims=(10, 40), phi_d=40, phi_points=2, seeds=4, levels=2, full_max_d=0,
        max_steps=20_000, root=tmp_path, name="tiny",
    )  # fmt: skip
    path = ex.run_sparse_noise(cfg, log=lambda s: None)
    summary = json.loads((path / "summary.json").read_text())
    assert summary["censored_runs"] == 0
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    c = {(r["sweep"], r["d"], r["s"], r["opt"]): r["complexity"] for r in rows}
    # SGD pays for sparse noise (and more so at larger d); SignSGD does not care
    assert c[("d", 40, 1, "sgd")] > 2 * c[("d", 40, 40, "sgd")]
    assert c[("d", 40, 1, "sgd")] > 2 * c[("d", 10, 1, "sgd")]
    assert c[("d", 40, 1, "signsgd")] < c[("d", 40, 1, "sgd")]
    assert ex.plot_sparse_noise(path, tmp_path / "figs")[0].exists()
    with pytest.raises(RunExistsError):
        ex.run_sparse_noise(cfg)
    (path / "marker").write_text("old run")
    ex.run_sparse_noise(dataclasses.replace(cfg, overwrite=True), log=lambda s: None)
    assert not (path / "marker").exists() and (path / "summary.json").exists()


def test_config_validation():
    with pytest.raises(ValueError, match="sgd_grid"):
        ex.run_sparse_noise(dataclasses.replace(ex.SparseNoiseConfig(), sgd_grid=(-1.0,)))
    with pytest.raises(ValueError, match="ranks"):
        ex.run_matrix_noise(ex.MatrixNoiseConfig(rank_n=4, ranks=(8,)))
    with pytest.raises(ValueError, match="dims"):
        ex.run_sparse_noise(ex.SparseNoiseConfig(dims=(0, 10)))


def test_registry_names():
    reg = ROOT / "experiments" / "signsgd" / "registry.py"
    spec = importlib.util.spec_from_file_location("_signsgd_registry_test", reg)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = [e.name for e in mod.EXPERIMENTS]
    assert names == ["signsgd/toy", "signsgd/sparse_noise", "signsgd/matrix_noise"]
