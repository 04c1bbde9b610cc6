"""Bad or edge-case clouds: each works or raises a one-line ValueError naming the value."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon import (
    canonize,
    checked,
    hilbert_index,
    hilbert_order,
    identity_order,
    lex_order,
    morton_index,
    morton_order,
    normalize_cloud,
    quantize,
)

ORDER_FNS = (identity_order, lex_order, hilbert_order, morton_order)


def test_bits_32_quantises_without_overflow_and_matches_hilbertcurve():
    """bits=32 (documented as valid) works: grid values in uint32 (float32 resolution: the factor
    2**32 - 1 rounds to 2**32 and the top cell is capped at 2**32 - 256), and the order is
    hilbertcurve's HilbertCurve(32, 3) order of those cells."""
    x = np.random.default_rng(0).random((64, 3)).astype(np.float32)
    q = np.asarray(quantize(x, 32))
    unit = np.asarray(normalize_cloud(x))
    expected_q = np.minimum(np.floor(unit * np.float32(2**32 - 1)), np.float32(2**32 - 256))
    np.testing.assert_array_equal(q, expected_q.astype(np.uint32))
    assert q.dtype == np.uint32 and q.max() == 2**32 - 256
    keys = HilbertCurve(32, 3).distances_from_points(q.astype(np.int64).tolist())
    expected = sorted(range(64), key=keys.__getitem__)
    assert np.asarray(hilbert_order(x, 32)).tolist() == expected
    assert np.asarray(jax.jit(lambda c: hilbert_order(c, 32))(x)).tolist() == expected
    morton = np.asarray(morton_order(x, 32))
    assert sorted(morton.tolist()) == list(range(64))
    with pytest.raises(ValueError, match=r"bits 33: expected an integer in \[1, 32\]"):
        quantize(x, 33)


def test_empty_cloud_has_the_empty_permutation():
    for shape in ((0, 3), (2, 0, 3), (0, 5, 2)):
        x = np.zeros(shape, np.float32)
        for fn in ORDER_FNS:
            for perm in (fn(x), jax.jit(fn)(x)):
                assert perm.shape == shape[:-1] and jnp.issubdtype(perm.dtype, jnp.integer)
        for name in ("identity", "lex", "hilbert", "morton"):
            assert canonize(x, name).shape == shape
        assert quantize(x, 8).shape == shape
    assert hilbert_index(np.zeros((0, 8), np.uint32), 10).shape == (0, 3)  # the loop encoder
    assert hilbert_order(np.zeros((0, 3), np.int32), 4).shape == (0,)


def test_zero_dimensional_points_refused():
    x = np.zeros((5, 0), np.float32)
    message = r"cloud of shape \(5, 0\); expected \(\.\.\., P, d\) with d >= 1"
    for fn in (*ORDER_FNS, normalize_cloud, lambda c: quantize(c, 4), lambda c: canonize(c, "lex")):
        with pytest.raises(ValueError, match=message):
            fn(x)
        with pytest.raises(ValueError, match=message):
            jax.jit(fn)(x)


@pytest.mark.parametrize("normalize", ["global", "per_axis"])
def test_huge_finite_coordinates_give_the_order_of_the_scaled_down_cloud(normalize):
    """Coordinates near +-3e38 (float32): the shift x - min and the reciprocal of the scale would
    overflow / flush to zero; the order equals the one of the same cloud scaled down by an
    exact power of two."""
    rng = np.random.default_rng(1)
    small = rng.uniform(-1, 1, size=(3, 80, 3)).astype(np.float32)
    big = np.ldexp(small, 128).astype(np.float32)  # up to 3.4e38
    assert np.isfinite(big).all() and np.abs(big).max() > 3e38
    for fn in (hilbert_order, morton_order):
        ref = np.asarray(fn(small, normalize=normalize))
        assert (ref != np.arange(80)).any(axis=-1).all()  # not the identity
        np.testing.assert_array_equal(np.asarray(fn(big, normalize=normalize)), ref)
        f = jax.jit(lambda c, fn=fn: fn(c, normalize=normalize))
        np.testing.assert_array_equal(np.asarray(f(big)), ref)
        tiny = np.ldexp(small, -100)
        np.testing.assert_array_equal(np.asarray(fn(tiny, normalize=normalize)), ref)
    np.testing.assert_array_equal(
        np.asarray(normalize_cloud(big, normalize)), np.asarray(normalize_cloud(small, normalize))
    )
    assert not jax.config.jax_enable_x64
    with pytest.raises(ValueError, match=r"coordinate 1e\+39 at index \(0, 1\) overflows float32"):
        hilbert_order(np.array([[0.0, 1e39], [1.0, 2.0]]))


def test_array_likes_are_accepted():
    cloud = [[0.1, 0.2], [0.3, 0.4], [0.0, 0.9]]
    arr = np.asarray(cloud, np.float32)
    for fn in ORDER_FNS:
        np.testing.assert_array_equal(np.asarray(fn(cloud)), np.asarray(fn(arr)))
    np.testing.assert_array_equal(np.asarray(canonize(cloud, "hilbert")), canonize(arr, "hilbert"))
    np.testing.assert_array_equal(np.asarray(quantize(cloud, 4)), np.asarray(quantize(arr, 4)))
    with pytest.raises(ValueError, match="cloud list is not a rectangular array"):
        hilbert_order([[0.1, 0.2], [0.3]])
    with pytest.raises(ValueError, match="cloud of dtype <U1; expected real numbers"):
        lex_order([["a", "b"]])


def test_out_of_range_integer_clouds():
    """Eagerly a ValueError naming the coordinate and the range; under jit no opaque callback
    error (coordinates reduced modulo 2**bits, some permutation), and ``checked`` raises."""
    q = np.array([[20, 1], [3, 4], [0, 15]], np.int32)
    for fn in (hilbert_order, morton_order):
        with pytest.raises(
            ValueError,
            match=rf"{fn.__name__}: coordinate 20 out of range; "
            r"expected \[0, 2\*\*4\)",
        ):
            fn(q, 4)
        perm = np.asarray(jax.jit(lambda c, fn=fn: fn(c, 4))(q))
        np.testing.assert_array_equal(perm, np.asarray(fn(q % 16, 4)))
        err, _ = jax.jit(checked(fn), static_argnums=1)(q, 4)
        with pytest.raises(
            Exception,
            match=r"coordinates in \[0, 20\]; expected integers in "
            r"\[0, 2\*\*4\)",
        ):
            err.throw()
    for encode in (hilbert_index, morton_index):
        with pytest.raises(ValueError, match=r"coordinate -1 out of range"):
            encode(np.array([[-1, 0]], np.int32), 4)
    x = np.array([[0.5, 1.5], [0.0, 0.2]], np.float32)
    err, _ = jax.jit(checked(hilbert_order), static_argnames="normalize")(x, normalize="none")
    with pytest.raises(Exception, match=r"values in \[0.0, 1.5\] with normalize='none'"):
        err.throw()
