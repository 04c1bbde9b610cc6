"""gfm/shapes end to end at the smoke preset, and the pieces of its pipeline."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.diffusion import DenoiserConfig, EDMDenoiser
from geomopt.experiment import execute, plot_run
from geomopt.latent import _interp as itp
from geomopt.latent.exp_shapes import EXPERIMENT, ShapesConfig, validate


@pytest.mark.slow  # ~1 min on an idle 2-core machine: every method compiles its solver
def test_smoke_run_layout_headline_and_plot(tmp_path):
    cfg = EXPERIMENT.presets["smoke"]
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=tmp_path)
    run_dir = outcome.path
    assert run_dir == tmp_path / "gfm" / "shapes" / "smoke"
    for f in ("config.json", "metrics.jsonl", "summary.json", "paths.npz", "strips.npz"):
        assert (run_dir / f).exists(), f
    headline = json.loads((run_dir / "summary.json").read_text())["headline"]
    bad = {k: v for k, v in outcome.headline.items() if not math.isfinite(v)}
    assert not bad, f"smoke headline values not finite: {bad}"
    assert cfg.n_seeds >= 2
    for m in cfg.methods:
        for k in ("CD", "HD", "F@0.1", "COV", "family_dist"):
            lo, mid, hi = (headline[f"{m}/{k}{s}"] for s in ("/ci_lo", "", "/ci_hi"))
            assert lo <= mid <= hi, (m, k)
        assert 0 <= headline[f"{m}/COV"] <= 1
        assert 0 <= headline[f"{m}/F@0.1"] <= 1
        assert headline[f"{m}/family_dist"] < 0.5  # decoded shapes, not empty grids
    # the pipeline is exercised: the methods' decoded shapes differ
    for k in ("CD", "family_dist"):
        vals = [headline[f"{m}/{k}"] for m in cfg.methods]
        assert len(set(np.round(vals, 6))) == len(vals), (k, vals)
    with np.load(run_dir / "paths.npz") as f:
        assert f["gfm"].shape == (cfg.n_pairs, cfg.n_points, cfg.latent_dim)
    # the quality bar: per seed, the samples' (endpoints') family distance over the data's
    # (reconstructions'); the flag from the mean ratio and the stated factor
    per_seed = outcome.details["per_seed"]
    for rows in per_seed:
        want = rows["endpoints"]["family_dist"] / rows["reconstruction"]["family_dist"]
        assert rows["quality"]["sample_ratio"] == pytest.approx(want)
        assert rows["quality"]["ae_heldout_cd"] > rows["quality"]["ae_heldout_floor"] > 0
        n_scored = cfg.n_pairs * len(cfg.eval_steps)
        assert rows["gfm"]["family_n"] <= min(cfg.family_fit_max, n_scored)
    ratios = [rows["quality"]["sample_ratio"] for rows in per_seed]
    assert headline["quality/sample_ratio"] == pytest.approx(np.mean(ratios))
    assert headline["quality/factor"] == cfg.quality_factor
    assert headline["quality/ok"] == float(np.mean(ratios) <= cfg.quality_factor)
    assert 0 < headline["quality/ae_heldout_cd"] < 1
    figs = plot_run(EXPERIMENT, run_dir, tmp_path / "figs")
    assert sorted(p.name for p in figs) == ["shapes_metrics_smoke.png", "shapes_strips_smoke.png"]
    # the second run reuses the cached models
    assert list((tmp_path / "_cache" / "shape_models").iterdir())


def test_fit_subset_is_seeded_and_shared_by_every_method():
    from geomopt.latent._study import fit_subset

    a = fit_subset(256, 64, seed=3)
    assert len(a) == 64 and len(set(a)) == 64 and (np.diff(a) > 0).all() and a.max() < 256
    np.testing.assert_array_equal(a, fit_subset(256, 64, seed=3))  # deterministic
    assert not np.array_equal(a, fit_subset(256, 64, seed=4))  # another seed, another draw
    np.testing.assert_array_equal(fit_subset(8, 64, seed=3), np.arange(8))  # k >= n: all
    with pytest.raises(ValueError, match="k=0"):
        fit_subset(8, 0, seed=0)


def test_score_fits_the_same_subset_for_every_method(monkeypatch):
    # _score_shapes fits exactly the seed's subset (of the decoded shapes), whatever the method
    from geomopt import shapes
    from geomopt.latent import exp_shapes
    from geomopt.latent._study import fit_subset

    cfg = ShapesConfig(n_eval_points=16, n_surface=32, family_fit_max=5)
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((3, 16, 3))
    fitted = []

    def fake_fit(points):
        fitted.append(round(float(points[0, 0]), 6))
        return None, None, 0.1

    monkeypatch.setattr(shapes, "fit_family", fake_fit)  # the public name exp_shapes uses
    seen = {}
    for method_shift in (0.0, 0.5):  # two "methods": different clouds, same seed
        clouds = rng.standard_normal((12, 32, 3))
        clouds[:, 0, 0] = np.arange(12) + method_shift  # a tag: the shape's index
        ok = np.ones(12, bool)
        ok[fit_subset(12, 5, seed=7)[0]] = False  # a failed decode is skipped, not replaced
        fitted.clear()
        row = exp_shapes._score_shapes(clouds, ok, ref, cfg, seed=7)
        seen[method_shift] = [int(t - method_shift) for t in fitted]
        assert row["family_n"] == 4
    want = [int(i) for i in fit_subset(12, 5, seed=7)[1:]]
    assert seen[0.0] == seen[0.5] == want


def test_quality_ratio_and_flag_come_from_the_numbers_they_claim():
    from geomopt.latent._study import apply_quality_bar, quality_ratio, summarise

    class _Run:
        lines: list = []

        def print(self, msg):
            self.lines.append(msg)

    # per seed: samples' distance / data's distance; the headline is their mean over seeds
    rows = [{"quality": {"sample_ratio": quality_ratio(s, d)}} for s, d in ((3.0, 2.0), (5.0, 2.0))]
    assert [r["quality"]["sample_ratio"] for r in rows] == [1.5, 2.5]
    headline, _ = summarise(rows, {"quality": ("sample_ratio",)})
    assert headline["quality/sample_ratio"] == pytest.approx(2.0)
    run = _Run()
    assert apply_quality_bar(headline, 2.0, "samples", run)  # 2.0 <= 2.0: met
    assert headline["quality/ok"] == 1.0 and headline["quality/factor"] == 2.0
    assert not apply_quality_bar(headline, 1.9, "samples", run)  # not met: flagged, not raised
    assert headline["quality/ok"] == 0.0 and "NOT MET" in run.lines[-1]
    assert math.isnan(quality_ratio(1.0, 0.0)) and math.isnan(quality_ratio(math.nan, 1.0))
    nan = {"quality/sample_ratio": math.nan}
    assert not apply_quality_bar(nan, 2.0, "samples", run) and nan["quality/ok"] == 0.0


def test_chamfer_pairs_is_the_diagonal_of_the_matrix():
    from geomopt.shapes import _metrics as met

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 20, 3)), rng.standard_normal((3, 25, 3))
    np.testing.assert_allclose(met.chamfer_pairs(a, b), np.diag(met.chamfer_matrix(a, b)),
                               rtol=1e-5)  # fmt: skip
    assert met.chamfer_pairs(a, a) == pytest.approx(np.zeros(3), abs=1e-5)


def test_validate_names_the_bad_field():
    with pytest.raises(ValueError, match="eval_steps"):
        validate(ShapesConfig(eval_steps=(0, 3)))
    with pytest.raises(ValueError, match="methods"):
        validate(ShapesConfig(methods=("gfm", "magic")))
    with pytest.raises(ValueError, match="residual"):
        validate(ShapesConfig(residual="torus"))
    with pytest.raises(ValueError, match="family_fit_max"):
        validate(ShapesConfig(family_fit_max=0))
    with pytest.raises(ValueError, match="quality_factor"):
        validate(ShapesConfig(quality_factor=0.0))


class _Gaussian:
    """Exact denoiser of N(0, s0^2 I): D(x, sigma) = s0^2 / (s0^2 + sigma^2) x."""

    s0 = 0.5

    def __call__(self, x, sigma):
        return self.s0**2 / (self.s0**2 + sigma**2) * x

    def score(self, x, sigma):
        return (self(x, sigma) - x) / sigma**2


def test_heun_denoise_follows_the_exact_pf_ode():
    # For a Gaussian the PF-ODE keeps x / sqrt(s0^2 + sigma^2) constant; the final Euler step
    # applies D at sigma_min. Heun with many levels is exact to its order.
    x = jnp.ones((1, 3))
    out = itp.heun_denoise(_Gaussian(), x, 0.3, num_steps=200)
    s0, smin = 0.5, 0.002
    at_min = x * np.sqrt(s0**2 + smin**2) / np.sqrt(s0**2 + 0.3**2)
    np.testing.assert_allclose(out, at_min * s0**2 / (s0**2 + smin**2), rtol=1e-4)


def test_interpolate_all_pins_the_clean_endpoints_and_rejects_bad_input(key):
    den = EDMDenoiser(4, DenoiserConfig(width=8, n_blocks=1, embed_dim=8), key=key)
    rng = np.random.default_rng(0)
    x0, x1 = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    data = rng.standard_normal((32, 4))
    out = itp.interpolate_all(x0, x1, denoiser=den, data=data, key=jax.random.key(1), n_points=5,
                              adam_iters=3, rbf_iters=3, land_iters=3, rbf_centers=4,
                              rbf_fit_iters=5)  # fmt: skip
    assert set(out) == set(itp.METHODS)
    for res in out.values():  # every method joins the same clean endpoints
        np.testing.assert_array_equal(res["path"][:, 0], x0.astype(np.float32))
        np.testing.assert_array_equal(res["path"][:, -1], x1.astype(np.float32))
    for m in itp.NOISED:  # inner waypoints: the solved noisy path, denoised
        noisy = out[m]["noisy_path"]
        assert not np.allclose(noisy[:, 0], x0, atol=1e-3)  # solved between noised endpoints
        want = itp.heun_denoise(den, noisy[:, 1:-1].reshape(-1, 4), 0.3, num_steps=5)
        np.testing.assert_allclose(out[m]["path"][:, 1:-1].reshape(-1, 4), want, rtol=1e-5)
        assert out[m]["endpoint_shift"] > 0
    # an untrained EDMDenoiser is D = c_skip x: every noised method starts from the same draw
    np.testing.assert_allclose(out["gfm"]["noisy_path"][:, 0], out["stein"]["noisy_path"][:, 0])
    with pytest.raises(ValueError, match="non-finite"):
        itp.interpolate_all(x0 * np.nan, x1, denoiser=den, data=data, key=key, methods=("linear",))
    with pytest.raises(ValueError, match="expected equal"):
        itp.interpolate_all(x0[:, :3], x1, denoiser=den, data=data, key=key)
    with pytest.raises(ValueError, match="magic"):
        itp.interpolate_all(x0, x1, denoiser=den, data=data, key=key, methods=("magic",))


def test_settings_of_a_config_take_its_fields():
    cfg = ShapesConfig(sigma=0.7, rbf_kappa=3.0, adam_iters=11)
    s = itp.Settings.of(cfg)
    assert (s.sigma, s.rbf_kappa, s.adam_iters, s.n_points) == (0.7, 3.0, 11, cfg.n_points)


def test_summarise_gives_mean_and_t_interval_over_seeds_and_explains_nan():
    from scipy import stats

    from geomopt.latent._study import summarise

    vals = [1.0, 2.0, 4.0]
    per_seed = [{"gfm": {"CD": v, "HD": v if i else math.nan}} for i, v in enumerate(vals)]
    out, why = summarise(per_seed, {"gfm": ("CD", "HD", "COV")})
    half = stats.t.ppf(0.975, 2) * np.std(vals, ddof=1) / np.sqrt(3)
    assert out["gfm/CD"] == pytest.approx(7 / 3)
    assert out["gfm/CD/ci_lo"] == pytest.approx(7 / 3 - half)
    assert out["gfm/CD/ci_hi"] == pytest.approx(7 / 3 + half)
    assert math.isnan(out["gfm/HD"]) and "seed(s) [0]" in why["gfm/HD"]
    assert "gfm/COV" not in out  # a metric no seed has is left out
    one, why = summarise(per_seed[:1], {"gfm": ("CD",)})
    assert one["gfm/CD"] == 1.0 and math.isnan(one["gfm/CD/ci_lo"]) and "gfm/CD/ci_lo" in why


def test_batched_slerp_matches_the_single_pair_baseline():
    from geomopt.gfm import baselines as bl

    rng = np.random.default_rng(3)
    x0, x1 = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    ours = itp.slerp(x0, x1, 7)
    for i in range(3):
        np.testing.assert_allclose(ours[i], bl.spherical(x0[i], x1[i], 7), rtol=1e-5, atol=1e-6)
    # parallel endpoints: the straight line between them (norms interpolated)
    np.testing.assert_allclose(itp.slerp(x0[:1], 2 * x0[:1], 3)[0, 1], 1.5 * x0[0], rtol=1e-5)
