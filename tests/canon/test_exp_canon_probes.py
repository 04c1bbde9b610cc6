"""The canon probe experiments on the runner: smoke presets end to end (folder layout, headline
keys, figures), refusals before a folder exists, and a killed run that leaves nothing."""

import dataclasses
import math
import os

import pytest

from geomopt.experiment import RunError, execute, plot_run, staging_folder
from geomopt.registry import EXPERIMENTS

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


def _check_intervals(headline):
    """Every mean has its 95 % interval around it; the order fractions are fractions."""
    means = [k for k in headline if f"{k}/ci_lo" in headline]
    assert means and all(f"{k}/ci_hi" in headline for k in means)
    for k in means:
        assert headline[f"{k}/ci_lo"] <= headline[k] <= headline[f"{k}/ci_hi"], k
    assert any(headline[f"{k}/ci_lo"] < headline[f"{k}/ci_hi"] for k in means)
    fractions = [k for k in headline if "order" in k]
    assert fractions and all(0 <= headline[k] <= 1 for k in fractions)
    return means


def test_covering_smoke_and_missing_modelnet(tmp_path):
    exp = _exp("exp_covering")
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    keys = {f"slope/d{d}/{k}" for d in (2, 3) for k in ("l2", "lex", "hilbert", "wass")}
    keys |= {"growth/lex/exp_rate", "growth/hilbert/poly_degree", "slope/k1/wass"}
    keys |= {f"{k}/ci_{e}" for k in keys for e in ("lo", "hi")}
    keys |= {"ratio/d3/hilbert/ci_lo", "order/d2", "order/d3", "order/all_d", "order/k1"}
    _check_layout(out, keys)
    _check_key_numbers(exp, out)
    means = _check_intervals(out.headline)
    assert set(means) >= {"slope/d2/wass", "ratio/d3/lex", "growth/lex/exp_rate",
                          "slope_diff/d3/hilbert_vs_lex"}  # fmt: skip
    h = out.headline
    assert h["slope_diff/d2/lex_vs_wass"] == pytest.approx(h["slope/d2/lex"] - h["slope/d2/wass"])
    rows = out.path.joinpath("metrics.jsonl").read_text()
    assert '"data_seed": 0' in rows and '"data_seed": 1' in rows
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


def test_covering_data_seeds_draw_new_families():
    """Data seed 1 draws new templates, not only new deformations of seed 0's: its test clouds
    are far (Hungarian) from seed 0's training clouds of the same class, and near its own."""
    import numpy as np

    from geomopt.canon.exp_covering import nearest_by_prefix, synthetic_split

    cfg = dataclasses.replace(_exp("exp_covering").presets["smoke"], n_points=16)
    (x0, y0), train0 = synthetic_split(cfg, 3, 1, 0)
    (x1, y1), train1 = synthetic_split(cfg, 3, 1, 1)
    assert not np.allclose(x0, x1)
    (again, _), _ = synthetic_split(cfg, 3, 1, 0)
    np.testing.assert_array_equal(again, x0)
    own = nearest_by_prefix(x1, y1, *train1, [16], bits=cfg.bits)["wass"].mean()
    other = nearest_by_prefix(x1, y1, *train0, [16], bits=cfg.bits)["wass"].mean()
    assert other > 3 * own


def test_covering_digits_smoke(tmp_path):
    """``data="digits"``: the same proxies on the digits clouds, over data seeds; the split
    keeps the test images out of training and every prefix of >= 10 clouds holds each class."""
    import numpy as np

    from geomopt.canon.exp_covering import digits_split

    exp = _exp("exp_covering")
    cfg = dataclasses.replace(
        exp.presets["smoke"], data="digits", n_train=(10, 20, 40), n_test=8, n_points=8
    )
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    keys = {f"digits/slope/{k}" for k in ("l2", "lex", "hilbert", "wass")}
    keys |= {f"digits/ratio/{k}/ci_hi" for k in ("l2", "lex", "hilbert")} | {"digits/order"}
    keys |= {"digits/slope_diff/hilbert_vs_lex", "digits/slope_diff/hilbert_vs_wass/ci_lo"}
    _check_layout(out, keys)
    assert not any(k.startswith("slope/d") for k in out.headline)
    _check_intervals(out.headline)
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["covering_smoke.png"] and figs[0].stat().st_size
    (xt, yt), (xr, yr) = digits_split(cfg, 0)
    assert xt.shape == (8, 8, 2) and xr.shape == (40, 8, 2)
    assert all(set(yr[:n].tolist()) == set(range(10)) for n in (10, 20, 40))
    assert not (xt[:, None] == xr[None]).all(axis=(-2, -1)).any()
    (xt1, _), (xr1, _) = digits_split(cfg, 1)
    assert not np.allclose(xt, xt1) and not np.allclose(xr, xr1)


def test_covering_mean_ci_matches_scipy():
    import numpy as np
    from scipy import stats

    from geomopt.canon.exp_covering import mean_ci

    v = np.array([0.3, -0.1, 0.7, 0.2, 0.4])
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
    assert mean_ci(v) == pytest.approx((v.mean(), lo, hi))
    assert all(math.isnan(x) for x in mean_ci([1.0, float("nan"), 2.0]))


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(data="mnist"), "data"),
        (dict(n_data_seeds=1), "n_data_seeds"),
        (dict(data="digits", n_train=(8, 16)), "n_train"),  # fewer than the 10 digit classes
        (dict(data="digits", n_train=(16, 1794)), "n_train"),  # + n_test 4 > 1797 images
    ],
)
def test_covering_bad_values_refused_before_a_folder_exists(tmp_path, change, field):
    exp = _exp("exp_covering")
    cfg = dataclasses.replace(exp.presets["smoke"], **change)
    with pytest.raises(ValueError, match=rf"^{field}="):
        execute(exp, cfg, preset="smoke", out=tmp_path)
    assert not any(tmp_path.iterdir())


def test_covering_digits_count_is_scikit_learns():
    from sklearn.datasets import load_digits

    from geomopt.canon.exp_covering import DIGITS_IMAGES

    assert len(load_digits().target) == DIGITS_IMAGES


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
    from geomopt.experiment import read_run

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
