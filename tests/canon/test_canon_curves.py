"""Hilbert / Morton indices against the PyPI ``hilbertcurve`` oracle, and their properties."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon import (
    hilbert_index,
    hilbert_point,
    int_to_words,
    morton_index,
    morton_point,
    n_words,
    words_to_int,
)

CASES = [(1, 1), (1, 7), (2, 1), (2, 5), (3, 3), (3, 16), (4, 8), (5, 13), (8, 10), (6, 11)]
WIDE = [(4, 32), (3, 40), (2, 70), (7, 33), (16, 8), (9, 31), (16, 9)]
VERY_WIDE = [
    pytest.param(40, 3, marks=pytest.mark.slow),
    pytest.param(33, 2, marks=pytest.mark.slow),
]


def _random_points(rng, n, d, bits):
    return rng.integers(0, min(2**bits, 2**32), size=(n, d), dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("d,bits", CASES + WIDE + VERY_WIDE)
def test_hilbert_matches_hilbertcurve(d, bits):
    rng = np.random.default_rng(d * 100 + bits)
    q = _random_points(rng, 40, d, bits)
    h = np.asarray(hilbert_index(jnp.asarray(q), bits))
    assert h.shape == (40, n_words(d, bits)) and h.dtype == np.uint32
    curve = HilbertCurve(bits, d)
    expected = [curve.distance_from_point([int(v) for v in p]) for p in q]
    assert [int(v) for v in words_to_int(h)] == expected
    back = np.asarray(hilbert_point(jnp.asarray(h), d, bits))
    np.testing.assert_array_equal(back, q)


@pytest.mark.parametrize("d,bits", [(9, 31), (16, 9)])
def test_indices_beyond_128_bits_are_exact(d, bits):
    """Indices that need more than 128 bits (more than four 32-bit words) are computed exactly:
    the corner points of the grid and a random point, against ``hilbertcurve``."""
    top = 2**bits - 1
    q = np.array([[top] * d, [top] + [0] * (d - 1), [0] * (d - 1) + [top]], dtype=np.uint32)
    q = np.concatenate([q, _random_points(np.random.default_rng(bits), 1, d, bits)])
    got = [int(v) for v in words_to_int(np.asarray(hilbert_index(jnp.asarray(q), bits)))]
    expected = [HilbertCurve(bits, d).distance_from_point([int(v) for v in p]) for p in q]
    assert got == expected
    assert n_words(d, bits) > 4 and max(got) >= 2**128


@pytest.mark.parametrize("d,bits", [(2, 3), (3, 2), (4, 2)])
def test_inverse_matches_point_from_distance(d, bits):
    curve = HilbertCurve(bits, d)
    hs = np.arange(2 ** (d * bits))
    pts = np.asarray(hilbert_point(jnp.asarray(int_to_words(hs, d, bits)), d, bits))
    assert pts.tolist() == [curve.point_from_distance(int(v)) for v in hs]


@pytest.mark.parametrize("d,bits", [(1, 4), (2, 3), (3, 2), (2, 4), (5, 1), (4, 2)])
def test_full_grid_bijection_and_unit_steps(d, bits):
    grid = np.array(list(itertools.product(range(2**bits), repeat=d)), dtype=np.uint32)
    idx = np.array([int(v) for v in words_to_int(np.asarray(hilbert_index(grid, bits)))])
    assert sorted(idx.tolist()) == list(range(2 ** (d * bits)))
    path = grid[np.argsort(idx)].astype(np.int64)
    steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
    assert np.all(steps == 1)
    morton = np.array([int(v) for v in words_to_int(np.asarray(morton_index(grid, bits)))])
    assert sorted(morton.tolist()) == list(range(2 ** (d * bits)))


def test_extra_levels_rotate_coordinates():
    """H_bits(q) = H_b(roll(q, bits - b)) for q < 2**b: the identity used for bits > 32."""
    rng = np.random.default_rng(0)
    q = _random_points(rng, 20, 5, 6)
    for extra in (1, 2, 5):
        wide = words_to_int(np.asarray(hilbert_index(q, 6 + extra)))
        narrow = words_to_int(np.asarray(hilbert_index(np.roll(q, extra, axis=-1), 6)))
        assert list(wide) == list(narrow)


def test_morton_is_bit_interleave_and_round_trips():
    rng = np.random.default_rng(1)
    q = _random_points(rng, 30, 3, 12)
    got = words_to_int(np.asarray(morton_index(q, 12)))
    for p, value in zip(q, got, strict=True):
        expect = 0
        for level in range(11, -1, -1):
            for i in range(3):
                expect = (expect << 1) | ((int(p[i]) >> level) & 1)
        assert value == expect
    back = morton_point(morton_index(q, 12), 3, 12)
    np.testing.assert_array_equal(np.asarray(back), q)


def test_signed_and_small_dtypes():
    q = np.array([[3, 1, 2], [0, 7, 5]])
    ref = np.asarray(hilbert_index(q.astype(np.uint32), 3))
    for dt in (np.int8, np.uint8, np.int16, np.int32):
        np.testing.assert_array_equal(np.asarray(hilbert_index(q.astype(dt), 3)), ref)


def test_jit_vmap_and_no_recompilation():
    f = jax.jit(lambda q: hilbert_index(q, 5))
    rng = np.random.default_rng(2)
    batch = _random_points(rng, 4 * 16, 3, 5).reshape(4, 16, 3)
    eager = np.asarray(hilbert_index(batch, 5))
    np.testing.assert_array_equal(np.asarray(jax.vmap(f)(batch)), eager)
    np.testing.assert_array_equal(np.asarray(f(batch)), eager)
    traces = []
    g = jax.jit(lambda q: (traces.append(1), hilbert_index(q, 5))[1])
    g(batch)
    g(batch // 2)
    assert len(traces) == 1


def test_errors():
    with pytest.raises(ValueError, match="bits 0"):
        hilbert_index(np.zeros((2, 3), np.uint32), 0)
    with pytest.raises(ValueError, match="out of range"):
        hilbert_index(np.array([[8, 0]], np.uint32), 3)
    with pytest.raises(ValueError, match="out of range"):
        hilbert_index(np.array([[-1, 0]], np.int32), 3)
    with pytest.raises(TypeError, match="integer"):
        hilbert_index(np.array([[0.5, 1.0]]), 3)
    with pytest.raises(ValueError, match="NaN"):
        hilbert_index(np.array([[np.nan, 1.0]]), 3)
    with pytest.raises(ValueError, match="out of range"):
        morton_index(np.array([[4, 0]], np.uint8), 2)
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        hilbert_point(jnp.zeros((3, 1), jnp.uint32), 3, 16)
    with pytest.raises(ValueError, match="out of range"):
        hilbert_point(jnp.asarray([[2**10]], jnp.uint32), 2, 5)


@pytest.mark.parametrize(
    "dtype,bits,bad",
    [(np.uint8, 3, 8), (np.int8, 3, -1), (np.int8, 8, -128), (np.int32, 5, 32), (np.int32, 31, -5)],
)
def test_out_of_range_under_jit_is_reduced_modulo_and_checked_raises(dtype, bits, bad):
    """Under jit no opaque callback error: an out-of-range coordinate is reduced modulo
    2**bits (the documented contract), and ``checked`` raises naming the range; the check
    passes the extreme valid values."""
    from geomopt.canon import checked

    top = min(2**bits - 1, np.iinfo(dtype).max)
    good = np.array([[0, top], [top, 1]]).astype(dtype)
    q = np.array([[0, 1], [bad, 0]]).astype(dtype)
    wrapped = np.array([[0, 1], [bad % 2**bits, 0]]).astype(np.uint32)
    for encode in (hilbert_index, morton_index):
        f = jax.jit(lambda q, encode=encode: encode(q, bits))
        np.testing.assert_array_equal(np.asarray(f(q)), np.asarray(encode(wrapped, bits)))
        g = jax.jit(checked(encode), static_argnums=1)
        err, h = g(good, bits)
        err.throw()
        np.testing.assert_array_equal(np.asarray(h), np.asarray(encode(good, bits)))
        err, _ = g(q, bits)
        with pytest.raises(
            Exception,
            match=rf"coordinates in \[{min(bad, 0)}, {max(bad, 1)}\]; "
            rf"expected integers in \[0, 2\*\*{bits}\)",
        ):
            err.throw()


@pytest.mark.parametrize(
    "dtype,bits", [(np.uint8, 8), (np.int8, 7), (np.int16, 12), (np.int64, 20)]
)
def test_loop_encoder_input_dtypes_and_vmap(dtype, bits):
    """d > 4 (the loop encoder, in the narrowest type holding ``bits``): every integer input type
    gives the oracle's index, eagerly, under jit and vmapped over clouds."""
    rng = np.random.default_rng(bits)
    q = _random_points(rng, 3 * 20, 6, bits).reshape(3, 20, 6)
    curve = HilbertCurve(bits, 6)
    expected = [curve.distance_from_point([int(v) for v in p]) for p in q.reshape(-1, 6)]
    qd = jnp.asarray(q.astype(dtype))
    for h in (
        hilbert_index(qd, bits),
        jax.jit(lambda x: hilbert_index(x, bits))(qd),
        jax.vmap(lambda x: hilbert_index(x, bits))(qd),
    ):
        h = np.asarray(h)
        assert h.shape == (3, 20, n_words(6, bits))
        assert [int(v) for v in words_to_int(h.reshape(-1, h.shape[-1]))] == expected
