"""gfm/digits end to end at the smoke preset, and the image metrics on known cases."""

import json
import math

import jax
import numpy as np
import pytest

from geomopt.experiment import execute, plot_run
from geomopt.latent.exp_digits import EXPERIMENT, DigitsConfig, _pairs, validate
from geomopt.shapes import _digits as dg


@pytest.mark.slow  # ~1 min on an idle 2-core machine: every method compiles its solver
def test_smoke_run_layout_headline_and_plot(tmp_path):
    cfg = EXPERIMENT.presets["smoke"]
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=tmp_path)
    run_dir = outcome.path
    for f in ("config.json", "metrics.jsonl", "summary.json", "paths.npz"):
        assert (run_dir / f).exists(), f
    headline = json.loads((run_dir / "summary.json").read_text())["headline"]
    bad = {k: v for k, v in outcome.headline.items() if not math.isfinite(v)}
    assert not bad, f"smoke headline values not finite: {bad}"
    assert cfg.n_seeds >= 2
    for m in cfg.methods:
        for k in ("PPL", "PDV", "FID", "quality"):
            lo, mid, hi = (headline[f"{m}/{k}{s}"] for s in ("/ci_lo", "", "/ci_hi"))
            assert lo <= mid <= hi, (m, k)
        assert headline[f"{m}/PPL"] >= 0 and 0.1 <= headline[f"{m}/quality"] <= 1
    # the pipeline is exercised: the methods' frames differ
    for k in ("PPL", "FID"):
        vals = [headline[f"{m}/{k}"] for m in cfg.methods]
        assert len(set(np.round(vals, 6))) == len(vals), (k, vals)
    # the quality bar: per seed, the denoiser samples' FID over the held-out digits' FID
    per_seed = outcome.details["per_seed"]
    for rows in per_seed:
        want = rows["samples"]["FID"] / rows["heldout"]["FID"]
        assert rows["quality"]["sample_ratio"] == pytest.approx(want)
    ratios = [rows["quality"]["sample_ratio"] for rows in per_seed]
    assert headline["quality/sample_ratio"] == pytest.approx(np.mean(ratios))
    assert headline["quality/ok"] == float(np.mean(ratios) <= cfg.quality_factor)
    # every method's frames start and end at the same two real digits
    with np.load(run_dir / "paths.npz") as f:
        ends = [f[m][:, [0, -1]] for m in cfg.methods]
    for e in ends[1:]:
        np.testing.assert_array_equal(e, ends[0])
    figs = plot_run(EXPERIMENT, run_dir, tmp_path / "figs")
    assert sorted(p.name for p in figs) == ["digits_metrics_smoke.png", "digits_strips_smoke.png"]


def test_pairs_have_different_labels_and_distinct_images():
    labels = np.array([0, 0, 1, 1, 2, 2, 3])
    a, b = _pairs(labels, 3, seed=0)
    assert (labels[a] != labels[b]).all()
    assert len(set(a) | set(b)) == 6
    with pytest.raises(ValueError, match="only"):
        _pairs(np.zeros(10, int), 1, seed=0)


def test_validate_names_the_bad_field():
    with pytest.raises(ValueError, match="n_test"):
        validate(DigitsConfig(n_pairs=200, n_test=100))
    with pytest.raises(ValueError, match="sigma"):
        validate(DigitsConfig(sigma=0.0))


def test_perceptual_distance_ppl_and_frechet_known_values():
    f = np.array([[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(dg.perceptual_distance(f, f), 0)
    np.testing.assert_allclose(dg.perceptual_distance(f[:1], f[1:]), [2.0])  # orthogonal units
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4000, 3))
    assert dg.frechet_distance(a, a) == pytest.approx(0, abs=1e-8)
    # shifted by m: FID -> |m|^2 (same covariance)
    assert dg.frechet_distance(a, a + np.array([1.0, 2.0, 0.0])) == pytest.approx(5.0, rel=1e-6)
    # scaled by 2: tr(C + 4C - 2 * 2C) = tr(C) ~ 3
    assert dg.frechet_distance(a, 2 * a) == pytest.approx(3.0, rel=0.1)


def test_constant_path_has_zero_ppl_and_classifier_learns_digits():
    x, y = dg.load_digits()
    assert x.shape == (1797, 64) and x.min() == -1 and x.max() == 1
    cls = dg.train_classifier(x[:1500], y[:1500], key=jax.random.key(0), steps=300)
    _, p = dg.features(cls, x[1500:])
    assert (p.argmax(1) == y[1500:]).mean() > 0.85
    still = np.repeat(x[:2, None], 5, axis=1)
    s = dg.path_scores(cls, still, inner=[1, 2, 3])
    assert s["PPL"] == pytest.approx(0, abs=1e-9) and s["PDV"] == pytest.approx(0, abs=1e-9)
