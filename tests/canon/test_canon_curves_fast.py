"""The three Hilbert encoders (unrolled, table, loop) vs the hilbertcurve oracle and each other."""

import jax.numpy as jnp
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve

from geomopt.canon import _curves, _curves_skilling, _curves_table, hilbert_index, words_to_int


@pytest.mark.parametrize(
    "d,bits", [(1, 5), (1, 40), (2, 1), (2, 15), (2, 33), (3, 2), (3, 16), (3, 23), (4, 9), (4, 17)]
)
def test_table_encoder_matches_hilbertcurve(d, bits):
    rng = np.random.default_rng(d * 100 + bits)
    hi = 2 ** min(bits, 32)
    q = rng.integers(0, hi, size=(64, d), dtype=np.uint64).astype(np.uint32)
    ours = words_to_int(np.asarray(_curves._hilbert_kernel(jnp.asarray(q), bits, "table")))
    curve = HilbertCurve(bits, d)
    assert [int(v) for v in ours] == [curve.distance_from_point(p) for p in q.tolist()]


# Unrolled encoder (forced; the default up to 64 index bits for d >= 5 and for few bits at
# d <= 4): one and two output words, d from 1 to 64, bits from 1 to 32, and bits > 32 (rolled
# levels).
UNROLLED = [(1, 9), (1, 40), (2, 16), (2, 32), (3, 7), (3, 16), (3, 21), (4, 16), (5, 12)]
UNROLLED += [(6, 10), (7, 9), (8, 8), (11, 5), (16, 4), (21, 3), (32, 2), (64, 1), (2, 33)]


@pytest.mark.parametrize("d,bits", UNROLLED)
def test_unrolled_encoder_matches_hilbertcurve(d, bits):
    """The unrolled encoder, forced (the default only for some of these cases)."""
    rng = np.random.default_rng(d * 1000 + bits)
    q = rng.integers(0, 2 ** min(bits, 32), size=(2, 48, d), dtype=np.uint64).astype(np.uint32)
    q[0, 0] = 0
    q[0, 1] = 2 ** min(bits, 32) - 1  # the corners: all bits clear / set
    h = np.asarray(_curves._hilbert_kernel(jnp.asarray(q), bits, "unrolled"))
    assert h.shape == (2, 48, _curves.n_words(d, bits)) and h.dtype == np.uint32
    curve = HilbertCurve(bits, d)
    expected = [curve.distance_from_point(p) for p in q.reshape(-1, d).tolist()]
    assert [int(v) for v in words_to_int(h.reshape(-1, h.shape[-1]))] == expected


@pytest.mark.parametrize("d,bits", [(2, 16), (3, 16), (4, 12), (6, 10), (16, 4)])
def test_encoders_agree(d, bits):
    """The same points through every encoder give the same words (on more points than the
    oracle tests can afford)."""
    q = np.random.default_rng(3).integers(0, 2**bits, size=(4000, d)).astype(np.uint32)
    modes = ["unrolled", "loop"] + (["table"] if d <= _curves._TABLE_MAX_D else [])
    outs = {m: np.asarray(_curves._hilbert_kernel(jnp.asarray(q), bits, m)) for m in modes}
    for m in modes[1:]:
        np.testing.assert_array_equal(outs[m], outs["unrolled"], err_msg=m)


def test_encoder_mode_choice_and_bad_mode():
    """The measured choice (benchmarks/results/hilbert.md): tables for d <= 3 from 3 bits and
    4-D from 5 bits, unrolled up to 64 index bits otherwise, then tables (d <= 4) or loop."""
    assert _curves._encoder_mode(1, 1) == "table"
    assert [_curves._encoder_mode(2, b) for b in (2, 3, 16, 32)] == ["unrolled"] + ["table"] * 3
    assert [_curves._encoder_mode(3, b) for b in (2, 3, 12, 16, 23)] == ["unrolled"] + ["table"] * 4
    assert [_curves._encoder_mode(4, b) for b in (3, 4, 5, 12, 17)] == ["unrolled"] * 2 + [
        "table"
    ] * 3
    assert _curves._encoder_mode(5, 12) == "unrolled"
    assert _curves._encoder_mode(16, 4) == "unrolled"
    assert _curves._encoder_mode(8, 10) == "loop"
    with pytest.raises(ValueError, match="encoder mode 'fast'"):
        _curves._hilbert_kernel(jnp.zeros((2, 3), jnp.uint32), 4, "fast")


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
    table = _curves_table._level_table(d)
    digits = table & ((1 << d) - 1)
    assert all(len(set(row.tolist())) == 2**d for row in digits)
    assert table.shape[0] == {1: 2, 2: 8, 3: 48, 4: 384}[d]


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_minimal_level_table_emits_the_same_digits(d):
    """Merging equivalent states keeps every digit sequence: both machines run on the same random
    level inputs from the start state, and the merged one has 1, 4, 24, 192 states."""
    full, small = _curves_table._level_table(d), _curves_table._minimal_level_table(d)
    assert small.shape == ({1: 1, 2: 4, 3: 24, 4: 192}[d], 2**d)
    assert all(len(set((row & ((1 << d) - 1)).tolist())) == 2**d for row in small)
    raw = np.random.default_rng(d).integers(0, 2**d, size=(256, 40))
    sa = sb = np.zeros(256, np.int64)
    for level in range(raw.shape[1]):
        ea, eb = full[sa, raw[:, level]], small[sb, raw[:, level]]
        np.testing.assert_array_equal(ea & ((1 << d) - 1), eb & ((1 << d) - 1))
        sa, sb = ea >> d, eb >> d


def test_chunked_loop_encoder_matches_hilbertcurve(monkeypatch):
    """d > 4 runs the level loop in chunks; a ragged last chunk and batch shapes are exact."""
    monkeypatch.setattr(_curves_skilling, "_LOOP_CHUNK", 128)
    d, bits = 6, 7
    q = np.random.default_rng(2).integers(0, 2**bits, size=(3, 50, d)).astype(np.uint32)
    _curves._hilbert_kernel.clear_cache()
    ours = np.asarray(hilbert_index(jnp.asarray(q), bits))
    _curves._hilbert_kernel.clear_cache()
    curve = HilbertCurve(bits, d)
    expected = [curve.distance_from_point(p) for p in q.reshape(-1, d).tolist()]
    assert [int(v) for v in words_to_int(ours.reshape(-1, ours.shape[-1]))] == expected
    assert ours.shape == (3, 50, 2)
