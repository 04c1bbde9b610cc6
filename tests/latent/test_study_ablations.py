"""Ablations of the latent study: GFM re-run with one setting changed on the same trial, rows
``gfm@<spec>`` and paired differences to ``gfm`` over seeds."""

import dataclasses

import numpy as np
import pytest

from geomopt.latent import _interp as itp
from geomopt.latent import _study as st


@dataclasses.dataclass(frozen=True)
class _Cfg:
    methods: tuple = ("gfm", "slerp")
    ablations: tuple = ("lam=0", "sigma=0.5", "residual=euclidean")
    seed: int = 3
    n_seeds: int = 3
    sigma: float = 0.3
    lam: float = 1.0
    residual: str = "hypersphere"


class _Run:
    def __init__(self):
        self.details, self.rows = {}, []

    def progress(self, *a, **k):
        class Bar:
            def update(self, n=1):
                pass

            def set_description(self, d):
                pass

            def close(self):
                pass

        return Bar()

    def log_rows(self, rows):
        self.rows.extend(rows)

    def explain_nan(self, k, why):
        pass

    def print(self, *a):
        pass


def test_ablations_rerun_gfm_on_the_same_trial_with_one_setting_changed(monkeypatch):
    calls = []

    def fake_interpolate_all(x0, x1, *, denoiser, data, methods, key, on_method=None, **s):
        # a "path" whose score encodes the settings: mean = sigma + 10 lam (+ 100 if
        # euclidean), plus the seed's key, so paired differences are known exactly
        calls.append((methods, key, dict(s)))
        out = {}
        for m in methods:
            v = s["sigma"] + 10 * s["lam"] + 100 * (s["residual"] == "euclidean") + key
            v = v if m == "gfm" else -1.0
            out[m] = {"path": np.full((2, 3, 4), v), "seconds": 0.0, "iterations": None,
                      "converged": None}  # fmt: skip
            if on_method:
                on_method(m)
        return out

    monkeypatch.setattr(itp, "interpolate_all", fake_interpolate_all)
    study = st.Study(
        prepare=lambda seed: st.Trial(None, None, np.zeros((2, 4)), np.ones((2, 4)), seed * 7.0),
        score=lambda trial, paths: {"m": float(paths.mean())},
        headline=("m",),
    )
    cfg, run = _Cfg(), _Run()
    head = st.run_study(study, cfg, run)
    # every seed: the methods once, then gfm alone per ablation, with the seed's own key and
    # exactly one setting changed
    assert len(calls) == cfg.n_seeds * (1 + len(cfg.ablations))
    for seed_calls in np.array_split(np.arange(len(calls)), cfg.n_seeds):
        keys = {calls[i][1] for i in seed_calls}
        assert len(keys) == 1
        base = calls[seed_calls[0]][2]
        for i, spec in zip(seed_calls[1:], cfg.ablations, strict=True):
            assert calls[i][0] == ("gfm",)
            field, value = st.parse_ablation(spec)
            changed = {k for k in base if base[k] != calls[i][2][k]}
            assert changed == {field} and calls[i][2][field] == value
    assert head["gfm@lam=0/m/minus_gfm"] == pytest.approx(-10.0)
    assert head["gfm@sigma=0.5/m/minus_gfm"] == pytest.approx(0.2)
    assert head["gfm@residual=euclidean/m/minus_gfm"] == pytest.approx(100.0)
    # the rows vary with the seed (keys 21, 28, 35) but the differences do not: paired
    assert head["gfm@lam=0/m/ci_hi"] - head["gfm@lam=0/m/ci_lo"] > 10
    assert head["gfm@lam=0/m/minus_gfm/ci_lo"] == pytest.approx(-10.0)
    assert run.details["ablations"] == [f"gfm@{a}" for a in cfg.ablations]
    # GFM against every other method, paired per seed: gfm = 0.3 + 10 + key, slerp = -1
    assert head["gfm/m/minus_slerp"] == pytest.approx(0.3 + 10 + 28 + 1)
    assert head["gfm/m/minus_slerp/ci_hi"] > head["gfm/m/minus_slerp/ci_lo"]
    assert "slerp/m/minus_gfm" not in head
    # the design's power: a constant difference has no spread, a varying one a positive mde
    assert head["gfm@lam=0/m/minus_gfm/mde80"] == pytest.approx(0.0, abs=1e-9)
    assert head["gfm/m/minus_slerp/mde80"] > 0
    assert {r["method"] for r in run.rows} >= {"gfm", "slerp", "gfm@lam=0"}


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("sigma=0", "sigma to be a finite number > 0"),
        ("lam=-1", "lam to be a finite number >= 0"),
        ("lam=nan", "lam to be a finite number >= 0"),
        ("residual=flat", "residual one of hypersphere, euclidean"),
        ("n_points=3", "field one of sigma, lam, residual"),
        ("sigma", "'field=value'"),
    ],
)
def test_bad_ablation_named_in_one_line(spec, match):
    with pytest.raises(ValueError, match=match):
        st.parse_ablation(spec)


def test_ablations_need_gfm_and_no_duplicates():
    with pytest.raises(ValueError, match="expected 'gfm' among methods"):
        st.check_ablations(_Cfg(methods=("slerp",)))
    with pytest.raises(ValueError, match="no duplicates"):
        st.check_ablations(_Cfg(ablations=("lam=0", "lam=0")))
    st.check_ablations(_Cfg())
    st.check_ablations(_Cfg(methods=("slerp",), ablations=()))
