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


def _official_covering_normalize(x):
    """The official covering code's normalisation: subtract the scalar minimum, divide by the
    scalar maximum of the shifted cloud."""
    z = x - x.min()
    return z / z.max()


def test_hilbert_defaults_are_the_official_covering_order():
    """Official covering Hilbert: hilbertcurve HilbertCurve(12, 3) on (x, y, z) of
    floor(X * 4095), X normalised by the global scalar min / max; Python's stable sort by key."""
    rng = np.random.default_rng(7)
    x = (rng.random((200, 3)) * [3.0, 1.0, 2.0] - 1.0).astype(np.float32)
    x[5] = x[9]  # a tie keeps the input order
    xn = _official_covering_normalize(x.astype(np.float64)).astype(np.float32)
    q = np.floor(xn * np.float32(4095)).astype(np.int64)
    keys = HilbertCurve(12, 3).distances_from_points(q.tolist())
    expected = sorted(range(len(keys)), key=keys.__getitem__)
    assert np.asarray(hilbert_order(x)).tolist() == expected


def test_lex_is_the_official_stable_z_y_x_sort():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 4, size=(60, 3)).astype(np.float32)  # many ties on every axis
    idx = np.arange(60)
    for k in (2, 1, 0):  # the official lex_perm_xyz: stable sorts by z, then y, then x
        idx = idx[np.argsort(x[idx, k], kind="stable")]
    assert np.asarray(lex_order(x)).tolist() == idx.tolist()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rejected_eagerly(bad):
    x = np.random.default_rng(0).random((2, 8, 3)).astype(np.float32)
    x[1, 3, 2] = bad
    for fn in (lex_order, hilbert_order, morton_order, lambda c: quantize(c, 8)):
        with pytest.raises(ValueError, match=r"non-finite coordinate .* at index \(1, 3, 2\)"):
            fn(x)
    with pytest.raises(ValueError, match="non-finite"):
        canonize(x, "lex")


def test_canonize_rejects_non_permutations():
    x = np.random.default_rng(0).random((2, 4, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=r"\[0, 1, 1, 3\] \(cloud \(1,\)\) is not a permutation"):
        canonize(x, np.array([[3, 2, 1, 0], [0, 1, 1, 3]]))
    with pytest.raises(ValueError, match="not a permutation of 0..3"):
        canonize(x[0], np.array([0, 1, 2, 4]))
    with pytest.raises(ValueError, match="integer"):
        canonize(x[0], np.array([0.0, 1.0, 2.0, 3.0]))


def test_under_jit_bad_clouds_give_nan_canonical_forms():
    """The jit contract: NaN / inf clouds and non-permutation orders propagate as all-NaN
    canonical forms; valid clouds in the same batch are untouched."""
    rng = np.random.default_rng(3)
    x = rng.random((3, 6, 2)).astype(np.float32)
    x[1, 2, 0] = np.inf
    f = jax.jit(lambda c: canonize(c, hilbert_order(c, 8)))
    out = np.asarray(f(x))
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    np.testing.assert_array_equal(out[0], np.asarray(canonize(x[0], hilbert_order(x[0], 8))))
    perm = np.tile(np.arange(6), (3, 1))
    perm[2, 0] = 1  # not a permutation
    out = np.asarray(jax.jit(canonize)(np.nan_to_num(x, posinf=0.5), perm))
    assert np.isnan(out[2]).all() and np.isfinite(out[:2]).all()


def test_checked_order_raises_under_jit():
    from geomopt.canon._orders import checked

    x = np.random.default_rng(4).random((5, 3)).astype(np.float32)
    err, perm = jax.jit(checked(hilbert_order))(x)
    err.throw()  # clean input: no error
    assert sorted(np.asarray(perm).tolist()) == list(range(5))
    x[2, 1] = np.nan
    err, _ = jax.jit(checked(lex_order))(x)
    with pytest.raises(Exception, match="non-finite coordinate"):
        err.throw()
