"""The optimiser demo on the runner: layout, headline, figure, its refusal to resume, and the
sweep's bookkeeping (one tagged curve per optimiser and step size, same batches for all)."""

import dataclasses
import math

import pytest

from geomopt.experiment import RunExistsError, execute, load_metrics, plot_run
from geomopt.lm._config import DataConfig
from geomopt.lm.exp_pretrain_demo import EXPERIMENT, DemoConfig, train_configs


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    cfg = dataclasses.replace(
        EXPERIMENT.presets["smoke"],
        data=DataConfig(offline_dir=str(out / "corpus"), offline_bytes=200_000),
        lr_factors=(1.0, 3.0),
        optimizers=("sgd", "sign_sgd"),
        lrs=(0.1, 1e-3),
        seeds=(),
    )
    return out, cfg, execute(EXPERIMENT, cfg, preset="smoke", out=out)


def test_smoke_layout_headline_and_figure(smoke):
    out, cfg, outcome = smoke
    path = out / "signsgd" / "pretrain_demo" / "smoke"
    assert outcome.path == path and outcome.status == "ran"
    assert {"config.json", "metrics.jsonl", "summary.json"} <= {p.name for p in path.iterdir()}
    assert not (path / "checkpoints").exists()
    assert set(outcome.headline) == {
        "sgd/final_val_loss", "sgd/lr", "sgd/final_phi",
        "sign_sgd/final_val_loss", "sign_sgd/lr", "sign_sgd/final_phi",
    }  # fmt: skip
    assert outcome.headline["sgd/lr"] in (0.1, 0.1 * 3.0)
    assert all(math.isfinite(v) for v in outcome.headline.values()), outcome.headline
    rows = load_metrics(path)
    runs = {(r["optimizer"], r["lr"]) for r in rows}
    assert runs == {("sgd", 0.1), ("sgd", 0.1 * 3.0), ("sign_sgd", 1e-3), ("sign_sgd", 3e-3)}
    first = {(r["optimizer"], r["lr"]): r["loss"] for r in rows if r["step"] == 1 and "loss" in r}
    assert len(set(first.values())) == 1  # same init and first batch for every run
    for run in runs:
        val = [r for r in rows if (r["optimizer"], r["lr"]) == run and "val_loss" in r]
        assert [r["step"] for r in val] == [0, 2, 4]
    figures = plot_run(EXPERIMENT, path, out / "figures")
    assert [f.name for f in figures] == ["lm_demo_smoke.png"] and figures[0].exists()


def test_unfinished_demo_is_refused_and_finished_kept(smoke, tmp_path):
    out, cfg, _ = smoke
    with pytest.raises(RunExistsError, match="finished run"):
        execute(EXPERIMENT, cfg, preset="smoke", out=out)
    half = tmp_path / "signsgd" / "pretrain_demo" / "smoke"
    half.mkdir(parents=True)
    with pytest.raises(RunExistsError, match="cannot resume"):
        execute(EXPERIMENT, cfg, preset="smoke", out=tmp_path)


def test_sweep_configs_and_validation():
    cfgs = train_configs(EXPERIMENT.presets["paper"])
    assert len(cfgs) == 15 and {c.optim.algorithm for c in cfgs} == set(DemoConfig().optimizers)
    assert all(c.noise_every == 100 for c in cfgs)
    quick = train_configs(EXPERIMENT.presets["quick"])
    assert [c.noise_every > 0 for c in quick] == [True, True, False, False, False]
    with pytest.raises(ValueError, match="one step size per optimiser"):
        EXPERIMENT.validate(DemoConfig(lrs=(0.1,)))
    with pytest.raises(ValueError, match="lr_factors"):
        EXPERIMENT.validate(DemoConfig(lr_factors=(0.0,)))


def test_replicates_give_intervals_and_paired_differences_from_muon(tmp_path):
    """The smoke preset (SignSGD, Muon, MuonClip; seeds 1 and 2 after the sweep on seed 0):
    each optimiser's replicates are its best step size on fresh seeds, the headline their
    mean with an interval, and the paired difference from Muon; MuonClip at threshold 100 on
    logits far under it is Muon (to the rounding of another compiled step)."""
    cfg = dataclasses.replace(
        EXPERIMENT.presets["smoke"],
        data=DataConfig(offline_dir=str(tmp_path / "corpus"), offline_bytes=200_000),
    )
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=tmp_path)
    h = outcome.headline
    assert all(math.isfinite(v) for v in h.values()), h
    rows = load_metrics(outcome.path)
    reps = {(r["optimizer"], r["seed"]) for r in rows if "seed" in r}
    assert reps == {(o, s) for o in cfg.optimizers for s in (1, 2)}
    final = {}
    for r in rows:
        if "seed" in r and "val_loss" in r and r["step"] == cfg.steps:
            final[r["optimizer"], r["seed"]] = r["val_loss"]
    for o in cfg.optimizers:
        vals = [final[o, 1], final[o, 2]]
        assert h[f"{o}/final_val_loss"] == pytest.approx(sum(vals) / 2)
        assert h[f"{o}/final_val_loss/lo"] < h[f"{o}/final_val_loss"] < h[f"{o}/final_val_loss/hi"]
        rep = next(r for r in rows if r.get("optimizer") == o and "seed" in r)
        assert h[f"{o}/lr"] == rep["lr"]
    diff = [final["sign_sgd", s] - final["muon", s] for s in (1, 2)]
    assert h["sign_sgd/vs_muon"] == pytest.approx(sum(diff) / 2)
    assert h["sign_sgd/vs_muon/detectable"] > 0
    assert h["muon_clip/max_attn_logit"] < 100
    assert h["muon_clip/vs_muon"] == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(ValueError, match="seeds=\\(0, 1\\): expected distinct seeds other than"):
        EXPERIMENT.validate(dataclasses.replace(cfg, seeds=(0, 1)))
