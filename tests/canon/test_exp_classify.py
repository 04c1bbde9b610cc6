"""``canon/classify`` on the runner: the smoke preset end to end, the shape families, the
gap-slope fit and config validation."""

import dataclasses
import math

import numpy as np
import pytest

from geomopt.canon import exp_classify
from geomopt.canon._data import shape_family_clouds
from geomopt.experiment import execute, plot_run, read_run


@pytest.mark.slow  # ~55 s of CPU: six architectures compile (CI runs it via reproduce smoke)
def test_smoke_run_layout_headline_and_figure(tmp_path):
    exp = exp_classify.EXPERIMENT
    cfg = exp.presets["smoke"]
    out = execute(exp, cfg, preset="smoke", out=tmp_path)
    assert out.path == tmp_path / "canon" / "classify" / "smoke"
    for f in ("config.json", "metrics.jsonl", "summary.json"):
        assert (out.path / f).is_file()
    rec = read_run(out.path)
    n_rows = cfg.n_data_seeds * len(cfg.kinds) * len(cfg.dims) * len(cfg.strides)
    assert len(rec.metrics) == n_rows
    assert {r["data_seed"] for r in rec.metrics} == {0, 1}
    for kind in ("lex", "hilbert", "morton", "unsorted", "perm_sample_avg", "deepsets"):
        assert kind in cfg.kinds
        assert {f"acc/{kind}/d2", f"gap/{kind}/d2", f"gap_slope/{kind}"} <= set(out.headline)
        assert 0.0 <= out.headline[f"acc/{kind}/d2"] <= 1.0
        lo, hi = out.headline[f"gap_slope/{kind}/ci_lo"], out.headline[f"gap_slope/{kind}/ci_hi"]
        assert lo <= out.headline[f"gap_slope/{kind}"] <= hi
    assert out.headline["contrast/n_data_seeds"] == 2
    assert (out.path / "table.md").read_text().count("| lex |") == len(cfg.dims)
    assert [k for k, v in out.headline.items() if not math.isfinite(v)] == []
    assert 3 <= len(exp.key_numbers) <= 6 and set(exp.paper) <= set(exp.key_numbers)
    assert set(exp.key_numbers) <= set(out.headline)
    row = rec.metrics[0]
    assert row["gap_mean"] == pytest.approx(np.mean(row["gap"]))
    assert row["test_acc_std"] == pytest.approx(np.std(row["test_acc"], ddof=1))
    figs = plot_run(exp, out.path, tmp_path / "figs")
    assert [f.name for f in figs] == ["classify_smoke.png"] and figs[0].stat().st_size > 0


def test_gap_slope_recovers_a_linear_trend():
    rows = [
        {"stride": 1, "d": d, "gap": [0.1 + 0.02 * d + e for e in (-0.01, 0.01)]} for d in (2, 4, 8)
    ]
    slope, se = exp_classify.gap_slope(rows, (2, 4, 8))
    assert slope == pytest.approx(0.02) and se < 0.005
    assert np.isnan(exp_classify.gap_slope(rows[:1], (2,))[0])


def test_shape_families_have_intrinsic_dimension_k():
    kw = dict(seed=0, noise=0.0, k=3)
    x, y = shape_family_clouds(60, 16, 5, 2, **kw, shuffle=False)
    assert x.shape == (60, 16, 5) and np.bincount(y).tolist() == [30, 30]
    for c in (0, 1):  # theta -> cloud is affine with k modes: rank k after centring
        flat = x[y == c].reshape(30, -1).astype(np.float64)
        sv = np.linalg.svd(flat - flat.mean(0), compute_uv=False)
        assert sv[2] > 1e-2 * sv[0] and sv[3] < 1e-4 * sv[0]
    xs, ys = shape_family_clouds(60, 16, 5, 2, **kw)
    np.testing.assert_array_equal(ys, y)
    assert not np.array_equal(xs, x)  # random point order ...
    np.testing.assert_allclose(np.sort(xs, axis=1), np.sort(x, axis=1))  # ... of the same clouds
    with pytest.raises(ValueError, match="k 0"):
        shape_family_clouds(2, 3, 2, 2, k=0, seed=0)


def test_validate_names_bad_fields():
    base = exp_classify.EXPERIMENT.presets["quick"]
    with pytest.raises(ValueError, match="kinds"):
        exp_classify.validate(dataclasses.replace(base, kinds=("pointnet",)))
    with pytest.raises(ValueError, match="fewer than one batch"):
        exp_classify.validate(dataclasses.replace(base, n_train=64, strides=(1, 8)))
    with pytest.raises(ValueError, match="dims"):
        exp_classify.validate(dataclasses.replace(base, dims=()))


def test_base_dim_keeps_cloud_distances_across_d_and_is_checked():
    kw = dict(k=2, seed=0, base_dim=2, shuffle=False)
    x3, y3 = shape_family_clouds(12, 16, 3, 3, **kw)
    x7, y7 = shape_family_clouds(12, 16, 7, 3, **kw)
    assert (y3 == y7).all()

    def dists(x):
        flat = x.reshape(len(x), -1).astype(np.float64)
        return np.linalg.norm(flat[:, None] - flat[None], axis=-1)

    np.testing.assert_allclose(dists(x3), dists(x7), rtol=1e-4, atol=1e-5)
    # without it the template spread grows with d
    a3, _ = shape_family_clouds(12, 16, 3, 3, k=2, seed=0, shuffle=False)
    a7, _ = shape_family_clouds(12, 16, 7, 3, k=2, seed=0, shuffle=False)
    assert dists(a7).mean() > 1.2 * dists(a3).mean()
    with pytest.raises(ValueError, match="base_dim"):
        shape_family_clouds(2, 3, 2, 2, seed=0, base_dim=3)
    with pytest.raises(ValueError, match="base_dim"):
        exp_classify.validate(
            dataclasses.replace(exp_classify.EXPERIMENT.presets["smoke"], base_dim=99)
        )


def _rows(slopes: dict[str, list[float]], dims, strides=(1, 4), n_model=3):
    """Synthetic metrics rows: per data seed s the gap of ``kind`` is 0.1 + slopes[kind][s] * d
    plus model-seed noise that averages to zero."""
    rows = []
    for kind, per_seed in slopes.items():
        for s, b in enumerate(per_seed):
            for d in dims:
                for stride in strides:
                    mean = 0.1 + b * d + 0.01 * s
                    gap = [mean + e for e in np.linspace(-0.02, 0.02, n_model)]
                    test = [0.9 - g for g in gap]
                    row = dict(kind=kind, d=d, stride=stride, data_seed=s, gap=gap, test_acc=test,
                               train_acc=[0.9] * n_model, loss_change=[0.0] * n_model)  # fmt: skip
                    for key in ("gap", "test_acc", "train_acc"):
                        row[key + "_mean"] = float(np.mean(row[key]))
                    rows.append(row)
    return rows


def test_contrast_takes_the_data_seed_as_the_unit_of_replication():
    from scipy import stats

    lex, hil = [0.02, 0.00, 0.03, 0.01], [0.01, 0.01, 0.00, 0.00]
    dims = (2, 4, 8, 12)
    out = exp_classify.summarise(_rows({"lex": lex, "hilbert": hil}, dims), ("lex", "hilbert"),
                                 dims, 4)  # fmt: skip
    diff = np.subtract(lex, hil)
    half = stats.t.ppf(0.975, 3) * diff.std(ddof=1) / 2.0
    name = "contrast/gap_slope/lex_minus_hilbert"
    assert out[name] == pytest.approx(diff.mean())
    assert out[name + "/ci_lo"] == pytest.approx(diff.mean() - half)
    assert out[name + "/ci_hi"] == pytest.approx(diff.mean() + half)
    assert out[name + "/mde80"] == pytest.approx(
        (stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * diff.std(ddof=1) / 2.0
    )
    assert out["contrast/n_data_seeds"] == 4 and out["contrast/n_model_seeds"] == 3
    assert out["gap_slope/lex"] == pytest.approx(np.mean(lex))
    # test accuracy = 0.9 - gap: its slope contrast at the scarce fraction is the negative
    assert out["contrast/acc_slope_scarce/lex_minus_hilbert"] == pytest.approx(-diff.mean())
    assert out["contrast/gap/lex_minus_hilbert/d12"] == pytest.approx(12 * diff.mean())
    table = exp_classify.contrast_table(_rows({"lex": lex, "hilbert": hil}, dims),
                                        ("lex", "hilbert"), dims, 4, out)  # fmt: skip
    assert f"{diff.mean():+.4f}" in table and "4 x 3" in table


def test_one_d_reports_per_d_contrasts_without_slopes():
    out = exp_classify.summarise(_rows({"lex": [0.0, 0.01], "hilbert": [0.0, 0.0]}, (2,)),
                                 ("lex", "hilbert"), (2,), 4)  # fmt: skip
    assert not any("slope" in k for k in out)
    assert out["contrast/gap/lex_minus_hilbert/d2"] == pytest.approx(0.01)
    assert [k for k, v in out.items() if v != v] == []


def test_digits_config_is_checked():
    base = exp_classify.EXPERIMENT.presets["digits"]
    exp_classify.validate(base)
    with pytest.raises(ValueError, match=r"dims=\(2, 3\): expected \(2,\)"):
        exp_classify.validate(dataclasses.replace(base, dims=(2, 3)))
    with pytest.raises(ValueError, match="at most the 1797"):
        exp_classify.validate(dataclasses.replace(base, n_train=2000))
