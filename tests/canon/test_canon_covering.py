"""Covering proxies."""

import itertools

import numpy as np
import pytest

from geomopt.canon import covering_proxy, pairwise_distances
from geomopt.canon._covering import assignment_distance, fit_exponent


def test_assignment_distance_matches_brute_force():
    rng = np.random.default_rng(0)
    x, y = rng.random((5, 2)), rng.random((5, 2))
    brute = min(
        np.linalg.norm(x - y[list(p)], axis=1).mean() for p in itertools.permutations(range(5))
    )
    assert assignment_distance(x, y) == pytest.approx(brute)


def test_proxy_hierarchy_and_invariance():
    rng = np.random.default_rng(1)
    train = rng.random((6, 16, 3)).astype(np.float32)
    test = rng.random((4, 16, 3)).astype(np.float32)
    ytr, yte = np.array([0, 1, 0, 1, 0, 1]), np.array([0, 1, 1, 0])
    scores = {k: covering_proxy(test, yte, train, ytr, k) for k in ("l2", "lex", "hilbert", "wass")}
    assert all(scores["wass"] <= scores[k] + 1e-6 for k in ("l2", "lex", "hilbert"))
    # sorted distances ignore the input order of the points; raw l2 does not
    perm = rng.permutation(16)
    d_sorted = pairwise_distances(test[:, perm], train, "hilbert")
    np.testing.assert_allclose(d_sorted, pairwise_distances(test, train, "hilbert"), atol=1e-6)
    assert not np.allclose(
        pairwise_distances(test[:, perm], train, "l2"), pairwise_distances(test, train, "l2")
    )
    # class restriction: max >= mean; nearest neighbour of a copy is zero
    assert covering_proxy(test, yte, train, ytr, "l2", reduce="max") >= scores["l2"]
    assert covering_proxy(train, ytr, train, ytr, "lex") == pytest.approx(0.0, abs=1e-6)


def test_proxy_errors():
    x = np.zeros((2, 4, 2))
    with pytest.raises(ValueError, match="no training cloud"):
        covering_proxy(x, [0, 2], x, [0, 1], "l2")
    with pytest.raises(ValueError, match="distance"):
        pairwise_distances(x, x, "cosine")
    with pytest.raises(ValueError, match="reduce"):
        covering_proxy(x, [0, 1], x, [0, 1], "l2", reduce="median")


def test_fit_exponent():
    assert fit_exponent([1, 2, 4], [3, 6, 12]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="two positive"):
        fit_exponent([1.0], [1.0])
