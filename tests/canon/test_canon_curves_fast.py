"""Table-driven Hilbert encoder (d <= 4) vs the hilbertcurve oracle and the loop encoder."""

import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon import _curves, hilbert_index, words_to_int


@pytest.mark.parametrize(
    "d,bits", [(1, 5), (1, 40), (2, 1), (2, 15), (2, 33), (3, 2), (3, 16), (3, 23), (4, 9), (4, 17)]
)
def test_table_encoder_matches_hilbertcurve(d, bits):
    rng = np.random.default_rng(d * 100 + bits)
    hi = 2 ** min(bits, 32)
    q = rng.integers(0, hi, size=(64, d), dtype=np.uint64).astype(np.uint32)
    ours = words_to_int(np.asarray(hilbert_index(jnp.asarray(q), bits)))
    curve = HilbertCurve(bits, d)
    assert [int(v) for v in ours] == [curve.distance_from_point(p) for p in q.tolist()]


@pytest.mark.parametrize("d,bits", [(2, 7), (3, 11), (4, 6)])
def test_table_encoder_matches_loop_encoder(d, bits):
    q = np.random.default_rng(1).integers(0, 2**bits, size=(500, d)).astype(np.uint32)
    xs = [jnp.asarray(q[:, i]) for i in range(d)]
    w = _curves.n_words(d, bits)
    table = np.stack(_curves._hilbert_words_table(xs, bits, w), -1)
    loop = np.asarray(_curves._hilbert_words_loop(jnp.asarray(q), bits, w))
    np.testing.assert_array_equal(table, loop)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_level_table_is_a_bijection_per_state(d):
    """Each state's digit map is a permutation of the 2**d sub-cubes (bijectivity per level)."""
    table = _curves._level_table(d)
    digits = table & ((1 << d) - 1)
    assert all(len(set(row.tolist())) == 2**d for row in digits)
    assert table.shape[0] == {1: 2, 2: 8, 3: 48, 4: 384}[d]


def test_chunked_loop_encoder_matches_hilbertcurve(monkeypatch):
    """d > 4 runs the level loop in chunks; a ragged last chunk and batch shapes are exact."""
    monkeypatch.setattr(_curves, "_LOOP_CHUNK", 128)
    d, bits = 6, 7
    q = np.random.default_rng(2).integers(0, 2**bits, size=(3, 50, d)).astype(np.uint32)
    _curves._hilbert_kernel.clear_cache()
    ours = np.asarray(hilbert_index(jnp.asarray(q), bits))
    _curves._hilbert_kernel.clear_cache()
    curve = HilbertCurve(bits, d)
    expected = [curve.distance_from_point(p) for p in q.reshape(-1, d).tolist()]
    assert [int(v) for v in words_to_int(ours.reshape(-1, ours.shape[-1]))] == expected
    assert ours.shape == (3, 50, 2)
