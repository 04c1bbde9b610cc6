"""The SignSGD synthetic experiments on the runner: smoke presets end to end, the paper's
step-size rule, slope fits, the official toy-loop convention and the matrix size sweep."""

import dataclasses
import json
import math

import numpy as np
import pytest

from geomopt.experiment import execute, plot_run, read_run
from geomopt.problems import exp_matrix_noise, exp_sparse_noise, exp_toy


def test_paper_step_size_rule():
    initial = 10.0
    assert exp_toy.select_step_size(np.array([np.nan, 12.0, 3.0, 5.0]), initial) == 2
    assert exp_toy.select_step_size(np.array([np.inf, 11.0]), initial) == -1
    assert exp_toy.select_step_size(np.array([10.0, 10.5]), initial) == 0


def test_fit_slope_recovers_power_laws():
    x = np.array([10.0, 100.0, 1000.0])
    assert exp_sparse_noise.fit_slope(x, 3 * x**1.0) == pytest.approx(1.0)
    assert exp_sparse_noise.fit_slope(x, 5 * x**-0.5) == pytest.approx(-0.5)
    assert np.isnan(exp_sparse_noise.fit_slope([10.0], [1.0]))
    assert np.isnan(exp_sparse_noise.fit_slope([10.0, 10.0], [1.0, 2.0]))  # one distinct x


def test_geomspace_and_log_dims_match_numpy():
    assert np.allclose(exp_sparse_noise.geomspace(1e-2, 1.9, 8), np.geomspace(1e-2, 1.9, 8))
    assert exp_sparse_noise.log_dims(10, 1000, 2) == (10, 32, 100, 316, 1000)


def test_toy_records_like_the_official_loop(tmp_path):
    """The official loop records the loss before each of its 3000 iterations: the last value is
    the loss after 2999 updates. With exact gradients SGD on f = 1/2 sum L x^2 gives
    f_k = 1/2 sum L x0^2 (1 - lr L)^(2k): compare the recorded curve with it."""
    exp = exp_toy.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["smoke"], steps=21, log_every=4)
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    rows = read_run(out.path).metrics
    det = [r for r in rows if r["experiment"] == "deterministic" and r["opt"] == "sgd"]
    assert det[0]["steps"] == [0, 4, 8, 12, 16, 20]  # t = 0..20, each before its update
    # rebuild x0 exactly as the run does and check one learning rate against the closed form
    import jax

    k_x0, _, _ = jax.random.split(jax.random.key(cfg.seed), 3)
    x0 = np.asarray(jax.random.normal(k_x0, (cfg.det_d,)), np.float64)
    L = np.ones(cfg.det_d)
    L[0] = cfg.stiff_L
    x0[0] /= cfg.stiff_L
    row = next(r for r in det if r["lr"] == 1e-3)
    k = np.asarray(row["steps"])
    expected = 0.5 * (L[None] * x0[None] ** 2 * (1 - 1e-3 * L[None]) ** (2 * k[:, None])).sum(1)
    np.testing.assert_allclose(row["loss"], expected, rtol=1e-4)
    assert set(out.headline) >= {"deterministic/sgd/final_loss", "noisy/signsgd/final_mean_loss"}


def test_toy_smoke_headline_is_finite(tmp_path):
    exp = exp_toy.EXPERIMENT
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    assert set(exp.key_numbers) <= set(out.headline)
    assert all(math.isfinite(v) for v in out.headline.values()), out.headline


def test_sparse_noise_smoke_science_and_figure(tmp_path):
    exp = exp_sparse_noise.EXPERIMENT
    out = execute(exp, exp.presets["smoke"], preset="smoke", out=tmp_path)
    rows = read_run(out.path).metrics
    c = {(r["sweep"], r["d"], r["noise"], r["opt"]): r["complexity"] for r in rows}
    # the control: the same quadratic without noise, one per d (fixed curvature)
    assert sum(1 for r in rows if r["sweep"] == "d" and r["d"] == 30 and r["noise"] == "none"
               and r["opt"] == "sgd") == 1  # fmt: skip
    # SGD pays for sparse noise beyond its noise-free cost (and more so at larger d); SignSGD
    # pays the same for sparse and dense noise
    assert c[("d", 30, "sparse", "sgd")] > 4 * c[("d", 30, "dense", "sgd")]
    assert c[("d", 30, "sparse", "sgd")] > 4 * c[("d", 30, "none", "sgd")]
    assert c[("d", 30, "sparse", "signsgd")] < c[("d", 30, "sparse", "sgd")]
    assert c[("d", 30, "sparse", "signsgd")] < 2 * c[("d", 30, "dense", "signsgd")]
    assert out.headline["censored_runs"] == 0
    assert all(math.isfinite(v) for v in out.headline.values()), out.headline
    assert set(exp.key_numbers) <= set(out.headline)
    assert out.headline["noise_excess_slope_vs_d/sgd/sparse"] > 0.5
    assert out.headline["noise_excess_slope_vs_phi/sgd"] < -0.5
    assert abs(out.headline["noise_excess_slope_vs_d/signsgd/sparse"]) < 0.3
    for key in ("noise_excess_slope_vs_d/sgd/sparse", "noise_excess_slope_vs_phi/sgd"):
        lo, hi = out.headline[key + "/lo"], out.headline[key + "/hi"]
        assert lo <= hi < lo + 2  # a bootstrap interval over the seeds, finite and informative
    # every row carries the paper's two terms; the dense fit keeps only noise-dominated points
    dense = [r for r in rows if r["noise"] == "dense" and r["opt"] == "sgd"]
    assert all(r["noise_over_det"] == pytest.approx(2.0**2 / (r["d"] * 0.2**2)) for r in dense)
    figs = plot_run(exp, out.path, tmp_path / "figures")
    assert [f.name for f in figs] == ["sparse_noise_scaling_smoke.png"]


def test_the_confounded_design_is_an_ablation(tmp_path):
    """curvature="follows_noise": sparse and dense are different quadratics, each with its own
    noise-free control; the control of the sparse instance already grows with d."""
    exp = exp_sparse_noise.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["smoke"], curvature="follows_noise",
                              optimizers=("sgd",))  # fmt: skip
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    rows = read_run(out.path).metrics
    ctrl = {(r["d"], r["control"]): r["complexity"] for r in rows
            if r["sweep"] == "d" and r["noise"] == "none"}  # fmt: skip
    assert set(ctrl) == {(10, "sparse"), (10, "dense"), (30, "sparse"), (30, "dense")}
    assert ctrl[(30, "sparse")] > 1.5 * ctrl[(30, "dense")]


def test_matrix_size_sweep_logs_every_size(tmp_path):
    """The size sweep's point at n = rank_n comes from the rank sweep; it must be in
    metrics.jsonl (it was missing, so the figure lost a size)."""
    exp = exp_matrix_noise.EXPERIMENT
    cfg = exp.presets["smoke"]
    assert cfg.rank_n in cfg.sizes
    assert [p[:2] for p in exp_matrix_noise.sweep_plan(cfg)] == [("rank", 8), ("size", 4)]
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    rows = read_run(out.path).metrics
    sizes = {(r["n"], r["rank"], r["opt"]) for r in rows if r["sweep"] == "size"}
    for n in cfg.sizes:
        for opt in cfg.optimizers:
            assert {(n, 1, opt), (n, n, opt)} <= sizes, (n, opt)
    assert all(math.isfinite(v) for v in out.headline.values()), out.headline
    assert set(exp.key_numbers) <= set(out.headline)
    assert plot_run(exp, out.path, tmp_path / "figures")[0].name == "matrix_noise_smoke.png"


@pytest.mark.parametrize(
    "exp, bad, match",
    [
        (exp_sparse_noise.EXPERIMENT, {"sgd_grid": (-1.0,)}, "sgd_grid"),
        (exp_sparse_noise.EXPERIMENT, {"dims": (0, 10)}, "dims"),
        (exp_matrix_noise.EXPERIMENT, {"rank_n": 4, "ranks": (8,)}, "ranks"),
        (exp_toy.EXPERIMENT, {"steps": 1}, "steps"),
    ],
)
def test_bad_configs_are_refused_before_a_folder_exists(tmp_path, exp, bad, match):
    cfg = dataclasses.replace(exp.presets["smoke"], **bad)
    with pytest.raises(ValueError, match=match):
        execute(exp, cfg, preset="smoke", out=tmp_path)
    assert not any(tmp_path.iterdir())


def test_slopes_without_two_points_are_nan_with_a_reason(tmp_path):
    """One d and one phi: nothing to fit; the summary says why each slope is NaN."""
    exp = exp_sparse_noise.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["smoke"], dims=(10,), phi_d=10, phi_points=1,
                              optimizers=("signsgd",), n_seeds=1)  # fmt: skip
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    slopes = [k for k in out.headline if "slope_" in k and not k.endswith(("/lo", "/hi"))]
    assert slopes and all(math.isnan(out.headline[k]) for k in slopes)
    reasons = json.loads((out.path / "summary.json").read_text())["details"]["nan_reasons"]
    assert set(reasons) == set(slopes)
    assert reasons["slope_vs_d/signsgd/sparse"].startswith("1 d value(s) with a complexity")


def test_a_registered_optimiser_is_one_more_name(tmp_path):
    """sign_sgd of geomopt.optim at its defaults is the paper's signsgd: the same complexities;
    the figure labels it by its name, without a theory line."""
    exp = exp_sparse_noise.EXPERIMENT
    cfg = dataclasses.replace(exp.presets["smoke"], optimizers=("signsgd", "sign_sgd"))
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    rows = read_run(out.path).metrics
    by = {o: [r["complexity"] for r in rows if r["opt"] == o] for o in cfg.optimizers}
    assert by["signsgd"] == by["sign_sgd"] and len(by["sign_sgd"]) > 2
    assert out.headline["slope_vs_phi/sign_sgd"] == out.headline["slope_vs_phi/signsgd"]
    assert plot_run(exp, out.path, tmp_path / "figures")[0].exists()
    assert exp_sparse_noise.predicted("noise_excess_slope_vs_phi/sign_sgd") is None  # not ours
    assert exp_sparse_noise.predicted("noise_excess_slope_vs_phi/signsgd") == 0.0
    assert exp_sparse_noise.predicted("noise_excess_slope_vs_phi/sgd") == -1.0
    assert exp_sparse_noise._legend("sign_sgd", 0.5, None) == "sign_sgd: slope 0.50"
    assert exp_sparse_noise._legend("signsgd", 0.5, 0.0) == "SignSGD: slope 0.50 (theory 0)"
