"""Stability probe: perturbation size, change probability, jump sizes, fits."""

import numpy as np
import pytest

from geomopt.canon._stability import perturb, stability_probe, summarise_stability


def test_perturb_moves_every_point_by_eps():
    x = np.random.default_rng(0).random((3, 10, 4))
    y = perturb(x, 1e-3, np.random.default_rng(1))
    np.testing.assert_allclose(np.linalg.norm(y - x, axis=-1), 1e-3, rtol=1e-9)


def test_lex_changes_linearly_in_eps_and_jumps():
    """2-D lex: the order changes iff two first coordinates cross; for uniform points that has
    probability ~ eps (slope 1), and the jump (the swapped points' distance) does not shrink."""
    x = np.random.default_rng(5).random((1024, 16, 2))  # many clouds: near-ties well sampled
    eps = [3e-4, 1e-3, 3e-3]
    rows = stability_probe(x, ["lex"], eps, n_perturb=1, seed=1)
    changed = [r["changed"] for r in rows]
    assert changed == sorted(changed) and 0 < changed[0] and changed[-1] < 0.5
    s = summarise_stability(rows)
    assert s["change_slope"] == pytest.approx(1.0, abs=0.25)
    assert s["ratio_slope"] < -0.5  # displacement / W grows as eps shrinks: a jump
    assert s["jump"] > 100 * max(eps)  # slots move by far more than the points did


def test_identity_like_order_never_changes_for_distinct_keys():
    # points far apart in the first coordinate: lex cannot change under tiny eps
    x = np.stack([np.linspace(0, 1, 8), np.zeros(8)], -1)[None]
    rows = stability_probe(x, ["lex"], [1e-6], n_perturb=4)
    assert rows[0]["changed"] == 0 and np.isnan(rows[0]["max_move"])
    assert np.isnan(summarise_stability(rows)["jump"])


def test_stability_rejects_bad_input():
    with pytest.raises(ValueError, match="finite"):
        stability_probe(np.full((1, 4, 2), np.nan), ["lex"], [1e-3])
    with pytest.raises(ValueError, match="eps"):
        stability_probe(np.zeros((1, 4, 2)), ["lex"], [0.0])


def test_w_shortcut_equals_assignment():
    """W = eps exactly when the point separation is >= 2 eps: the probe's shortcut and the
    assignment solve agree."""
    from geomopt.canon._covering import assignment_distance

    x = np.random.default_rng(2).random((1, 12, 2))
    diff = np.linalg.norm(x[0, :, None] - x[0, None], axis=-1) + np.eye(12) * 9
    eps = diff.min() / 2.5
    y = perturb(x[0], eps, np.random.default_rng(3))
    assert assignment_distance(x[0], y) == pytest.approx(eps, rel=1e-9)
    a = stability_probe(x, ["lex", "hilbert"], [eps, 0.3], n_perturb=64, seed=4)
    b = stability_probe(x, ["lex", "hilbert"], [eps, 0.3], n_perturb=64, seed=4,
                        max_ratio_clouds=5)  # fmt: skip
    for ra, rb in zip(a, b, strict=True):
        assert ra["changed"] == rb["changed"] and ra["disp"] == rb["disp"]
