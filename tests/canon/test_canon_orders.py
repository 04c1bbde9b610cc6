"""Orders, quantisation and canonical forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon import (
    canonize,
    hilbert_order,
    lex_order,
    morton_order,
    normalize_cloud,
    quantize,
    sort_by_words,
)


def test_quantize_official_normalisations():
    x = np.array([[1.0, 2.0], [3.0, 6.0], [2.0, 4.0]], np.float32)
    q = np.asarray(quantize(x, 4))  # global: (x - 1) / 5, floor(* 15)
    np.testing.assert_array_equal(q, np.floor((x - 1) / 5 * 15).astype(np.uint32))
    q2 = np.asarray(quantize(x, 4, normalize="per_axis"))  # per-axis min, one global scale 4
    shifted = x - x.min(axis=0)
    np.testing.assert_array_equal(q2, np.floor(shifted / 4 * 15).astype(np.uint32))
    assert q.max() == 15
    np.testing.assert_allclose(np.asarray(normalize_cloud(x)).max(), 1.0)
    const = np.ones((4, 3), np.float32)
    assert np.all(np.asarray(quantize(const, 8)) == 0)


def test_quantize_errors():
    with pytest.raises(ValueError, match="NaN"):
        quantize(np.array([[np.nan, 0.0]]), 4)
    with pytest.raises(ValueError, match="bits 0"):
        quantize(np.zeros((3, 2)), 0)
    with pytest.raises(ValueError, match="expected \\[0, 1\\]"):
        quantize(np.array([[2.0, 0.0]]), 4, normalize="none")
    with pytest.raises(ValueError, match="normalize"):
        quantize(np.zeros((3, 2)), 4, normalize="bogus")


def test_hilbert_order_matches_oracle_sort():
    rng = np.random.default_rng(0)
    x = rng.random((64, 3)).astype(np.float32)
    q = np.asarray(quantize(x, 12))
    curve = HilbertCurve(12, 3)
    keys = [curve.distance_from_point([int(v) for v in p]) for p in q]
    expected = sorted(range(64), key=lambda i: (keys[i], i))
    assert np.asarray(hilbert_order(x)).tolist() == expected


def test_multiword_sort_is_lexicographic_and_stable():
    words = jnp.asarray([[1, 5], [0, 9], [1, 2], [0, 9], [1, 5]], jnp.uint32)
    assert np.asarray(sort_by_words(words)).tolist() == [1, 3, 2, 0, 4]


def test_lex_order_first_coordinate_primary_and_stable():
    x = np.array([[1.0, 0.0], [0.0, 5.0], [1.0, -1.0], [0.0, 5.0]])
    assert np.asarray(lex_order(x)).tolist() == [1, 3, 2, 0]


@pytest.mark.parametrize("name", ["lex", "hilbert", "morton"])
def test_canonical_form_is_permutation_invariant(name):
    rng = np.random.default_rng(1)
    x = rng.random((3, 50, 4)).astype(np.float32)
    perm = rng.permutation(50)
    a = np.asarray(canonize(x, name))
    b = np.asarray(canonize(x[:, perm], name))
    np.testing.assert_array_equal(a, b)


def test_orders_are_permutations_batched_jitted():
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.random((5, 40, 6)).astype(np.float32))
    for fn in (hilbert_order, morton_order, lex_order):
        batched = np.asarray(jax.jit(fn)(x))
        mapped = np.asarray(jax.vmap(fn)(x))
        np.testing.assert_array_equal(batched, mapped)
        assert all(sorted(row.tolist()) == list(range(40)) for row in batched)
    wide = np.asarray(hilbert_order(x, 30))  # d*bits = 180: a 6-word key
    assert sorted(wide[0].tolist()) == list(range(40))


def test_canonize_errors():
    with pytest.raises(ValueError, match="order"):
        canonize(np.zeros((4, 2)), "spiral")
    with pytest.raises(ValueError, match="expected \\(4,\\)"):
        canonize(np.zeros((4, 2)), jnp.arange(3))
    with pytest.raises(ValueError, match="NaN"):
        lex_order(np.array([[np.nan, 1.0], [0.0, 0.0]]))
