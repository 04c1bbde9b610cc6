"""The canon probe experiments on the runner: smoke presets end to end (folder layout, headline
keys, figures), refusals before a folder exists, and a killed run that leaves nothing."""

import dataclasses
import math
import os

import pytest

from geomopt.experiment import execute, plot_run, staging_folder
from geomopt.registry import EXPERIMENTS
from geomopt.runs import RunError

MODULES = ("exp_covering", "exp_curve_regularity", "exp_stability")


def _exp(name):
    import importlib

    return importlib.import_module(f"geomopt.canon.{name}").EXPERIMENT


def test_registered():
    for m in MODULES:
        assert f"geomopt.canon.{m}" in EXPERIMENTS


def _check_key_numbers(exp, out):
    assert 3 <= len(exp.key_numbers) <= 6 and set(exp.paper) <= set(exp.key_numbers)
    assert set(exp.key_numbers) <= set(out.headline)


def _check_layout(out, expected_keys):
    files = sorted(p.name for p in out.path.iterdir())
    assert files == ["config.json", "metrics.jsonl", "summary.json"]
    for p in out.path.iterdir():
        assert os.stat(p).st_mode & 0o777 == 0o644 & ~_umask()
    assert expected_keys <= set(out.headline)
    assert [k for k, v in out.headline.items() if not math.isfinite(v)] == []


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_curve_regularity_smoke(tmp_path):
    exp = _exp("exp_curve_regularity")
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    keys = {f"curve/{c}/d{d}" for c in ("hilbert", "morton") for d in (2, 3)}
    _check_layout(out, keys)
    _check_key_numbers(exp, out)
    assert out.headline["curve/hilbert/d2"] == pytest.approx(0.5, abs=0.06)
    assert out.headline["curve/morton/d3"] < 0.1
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["curve_regularity_smoke.png"] and figs[0].stat().st_size
    # quick preset covers d = 2..8
    assert set(exp.presets["quick"].dims) >= set(range(2, 9))


def test_stability_smoke(tmp_path):
    exp = _exp("exp_stability")
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    keys = {f"{k}/{o}/d{d}" for k in ("change_slope", "ratio_slope", "jump")
            for o in ("lex", "hilbert", "morton") for d in (2, 3)}  # fmt: skip
    _check_layout(out, keys)
    _check_key_numbers(exp, out)
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["stability_smoke.png"]


def test_covering_smoke_and_missing_modelnet(tmp_path):
    exp = _exp("exp_covering")
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    keys = {f"slope/d{d}/{k}" for d in (2, 3) for k in ("l2", "lex", "hilbert", "wass")}
    keys |= {"growth/lex/exp_rate", "growth/hilbert/poly_degree", "slope/k1/wass"}
    _check_layout(out, keys)
    _check_key_numbers(exp, out)
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["covering_smoke.png"]
    # no data: refused before a folder exists, with a message saying what to put where
    cfg = dataclasses.replace(exp.presets["smoke"], modelnet_dir=str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="ply_data_train.*put the HDF5 shards"):
        execute(exp, cfg, preset="smoke", out=tmp_path / "o2")
    assert not (tmp_path / "o2").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = dataclasses.replace(exp.presets["smoke"], modelnet_dir=str(empty))
    with pytest.raises(ValueError, match="put the HDF5 shards"):
        execute(exp, cfg, preset="smoke", out=tmp_path / "o3")


def test_killed_run_keeps_nothing_and_reruns(tmp_path):
    """A run interrupted half-way keeps nothing (these experiments do not resume, so no
    unfinished folder is left, neither the run folder nor its staging folder), plotting refuses
    the missing run with a message, and the same command then runs from scratch."""
    exp = _exp("exp_curve_regularity")
    cfg = exp.presets["smoke"]

    def boom(*a, **k):
        raise KeyboardInterrupt

    import geomopt.canon._holder as holder

    calls = {"n": 0}
    real = holder.curve_modulus

    def half(*a, **k):
        calls["n"] += 1
        if calls["n"] > 2:
            boom()
        return real(*a, **k)

    holder.curve_modulus = half
    try:
        with pytest.raises(KeyboardInterrupt):
            execute(exp, cfg, preset="smoke", out=tmp_path)
    finally:
        holder.curve_modulus = real
    assert calls["n"] == 3
    path = tmp_path / exp.name / "smoke"
    assert not path.exists() and not staging_folder(path).exists()
    with pytest.raises(RunError, match="smoke"):
        plot_run(exp, path, tmp_path / "figures")
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    assert out.status == "ran" and (path / "summary.json").is_file()


@pytest.mark.parametrize("name", MODULES)
def test_bad_config_is_refused_before_a_folder_exists(tmp_path, name):
    exp = _exp(name)
    field = {"exp_covering": ("dims", ()), "exp_curve_regularity": ("curves", ("peano",)),
             "exp_stability": ("eps", (0.0,))}[name]  # fmt: skip
    cfg = dataclasses.replace(exp.presets["smoke"], **{field[0]: field[1]})
    with pytest.raises(ValueError, match=field[0]):
        execute(exp, cfg, preset="smoke", out=tmp_path)
    assert not any(tmp_path.iterdir())


def test_covering_reads_modelnet_hdf5(tmp_path):
    """Small files of the standard layout (data N x 2048 x 3, label N x 1): the ModelNet variant
    runs at its own point count with the official covering normalisation."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(0)
    folder = tmp_path / "modelnet"
    folder.mkdir()
    for name, n in (
        ("ply_data_train0.h5", 10),
        ("ply_data_train1.h5", 6),
        ("ply_data_test0.h5", 4),
    ):
        with h5py.File(folder / name, "w") as f:
            f["data"] = rng.normal(size=(n, 2048, 3)).astype(np.float32) * [1.0, 2.0, 0.5]
            f["label"] = (np.arange(n) % 2).reshape(n, 1).astype(np.uint8)
    exp = _exp("exp_covering")
    cfg = dataclasses.replace(
        exp.presets["smoke"], modelnet_dir=str(folder), modelnet_points=32, modelnet_max_train=0
    )
    out = execute(exp, cfg, preset="smoke", out=tmp_path / "runs")
    h = out.headline
    assert {f"modelnet/{k}" for k in ("l2", "lex", "hilbert", "wass")} <= set(h)
    assert h["modelnet/wass"] <= min(h["modelnet/lex"], h["modelnet/hilbert"], h["modelnet/l2"])
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["covering_smoke.png", "covering_modelnet_smoke.png"]


def test_nan_headline_values_are_explained(tmp_path):
    """Too small to fit (stability: too few eps in the single-swap regime; covering: one
    training-set size): each NaN headline value has its one-line reason in the summary."""
    from geomopt.runs import read_run

    cases = [
        ("exp_stability", dict(n_clouds=4, eps=(1e-4, 1e-3, 1e-2)), "change_slope/lex/d2"),
        ("exp_covering", dict(n_train=(8,)), "slope/d2/lex"),
    ]
    for name, change, key in cases:
        exp = _exp(name)
        cfg = dataclasses.replace(exp.presets["smoke"], **change)
        out = execute(exp, cfg, preset="smoke", out=tmp_path / name)
        nan = {k for k, v in out.headline.items() if not math.isfinite(v)}
        assert key in nan
        reasons = read_run(out.path).details["nan_reasons"]
        assert set(reasons) == nan and all(reasons.values())
