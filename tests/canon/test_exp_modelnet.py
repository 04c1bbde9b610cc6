"""``canon/modelnet`` on the runner: the smoke preset on synthetic shards of the ModelNet layout,
and the message when the data is missing."""

import dataclasses
import math

import pytest

from geomopt.canon import exp_modelnet
from geomopt.experiment import execute, plot_run, read_run


def test_smoke_run_reads_shards_through_the_loader(tmp_path):
    exp = exp_modelnet.EXPERIMENT
    cfg = exp.presets["smoke"]
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    shards = out.path / "demo_data" / "modelnet10_ply_hdf5_2048"
    assert sorted(p.name for p in shards.iterdir()) == ["ply_data_test0.h5", "ply_data_train0.h5"]
    rec = read_run(out.path)
    assert rec.details["n_train"] == 32 and rec.details["n_classes"] == 3
    assert [r["n_train"] for r in rec.metrics if r["kind"] == "lex"] == [32, 16]
    for kind in cfg.kinds:
        assert {f"acc/{kind}", f"gap/{kind}", f"acc/{kind}/frac1_2"} <= set(out.headline)
    assert [k for k, v in out.headline.items() if not math.isfinite(v)] == []
    assert 3 <= len(exp.key_numbers) <= 6 and set(exp.paper) <= set(exp.key_numbers)
    assert set(exp.key_numbers) <= set(out.headline)
    figs = plot_run(exp, out.path, tmp_path / "figs")
    assert [f.name for f in figs] == ["modelnet_smoke.png"]


def test_missing_data_says_where_to_put_it(tmp_path):
    exp = exp_modelnet.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["paper"], data_root=str(tmp_path / "nowhere"))
    with pytest.raises(
        ValueError,
        match="prepare_modelnet.py --dataset modelnet10' and pass "
        "the folder it prints as --data-root.*modelnet10_ply_hdf5_2048/",
    ):
        execute(exp, cfg, preset="paper", out=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # refused before creating a run folder
