"""Token shards, the legacy nanoGPT format, the offline corpus and the deterministic loader."""

import numpy as np
import pytest

from geomopt.lm import (
    LLAMA3_MAGIC,
    SHARD_MAGIC,
    BatchLoader,
    ByteTokenizer,
    ShardError,
    TokenData,
    build_offline_corpus,
    open_tokens,
    read_legacy_bin,
    read_shard,
    write_shard,
)


def _header(magic=SHARD_MAGIC, version=1, count=0):
    h = np.zeros(256, dtype="<i4")
    h[:3] = (magic, version, count)
    return h.tobytes()


def test_shard_round_trip_and_layout(tmp_path):
    tokens = np.array([0, 1, 50256, 65535, 7], dtype=np.int64)
    path = write_shard(tmp_path / "a.bin", tokens)
    raw = path.read_bytes()
    assert len(raw) == 1024 + 2 * tokens.size
    assert np.frombuffer(raw[:12], "<i4").tolist() == [20240520, 1, 5]
    np.testing.assert_array_equal(read_shard(path), tokens)
    np.testing.assert_array_equal(open_tokens(path), tokens)


def test_legacy_nanogpt_bin(tmp_path):
    tokens = np.arange(100, dtype=np.uint16)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    np.testing.assert_array_equal(read_legacy_bin(path), tokens)
    np.testing.assert_array_equal(open_tokens(path, format="nanogpt"), tokens)
    with pytest.raises(ShardError, match="magic 65536 is none of the known"):
        open_tokens(path)  # auto: an unknown magic is refused, not read as headerless


@pytest.mark.parametrize(
    "content,message",
    [
        (_header(magic=1234, count=2) + b"\0" * 4, "magic 1234, expected 20240520"),
        (_header(version=2, count=2) + b"\0" * 4, "version 2, expected 1"),
        (_header(count=10) + b"\0" * 8, "truncated, header says 10 tokens but the file holds 4"),
        (_header(count=2) + b"\0" * 8, "token count mismatch, header says 2 tokens"),
        (_header()[:100], "truncated, 100 bytes is shorter than the 1024-byte header"),
    ],
)
def test_bad_shards_name_file_and_problem(tmp_path, content, message):
    path = tmp_path / "bad_000.bin"
    path.write_bytes(content)
    with pytest.raises(ShardError) as err:
        read_shard(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_token_outside_vocab_is_reported(tmp_path):
    path = write_shard(tmp_path / "s.bin", [1, 2, 300, 4])
    read_shard(path, vocab_size=301)
    with pytest.raises(ShardError, match=r"s\.bin: token 300 at position 2 is >= the vocab"):
        read_shard(path, vocab_size=256)
    with pytest.raises(ValueError, match="do not fit uint16"):
        write_shard(tmp_path / "t.bin", [70000])


def test_byte_tokenizer_round_trip():
    tok = ByteTokenizer()
    text = "def f(x):\n    return x + 1  # héllo"
    ids = tok.encode(text)
    assert ids.max() < 256 and tok.decode(ids) == text


def test_offline_corpus_and_deterministic_loader(tmp_path):
    train, val = build_offline_corpus(tmp_path, max_bytes=200_000)
    data = TokenData(str(train), vocab_size=256)
    n_val = read_shard(val, vocab_size=256).size
    assert n_val > 0 and data.n_tokens > 0 and data.n_tokens + n_val >= 200_000
    text = ByteTokenizer().decode(data.arrays[0][:2000])
    assert "import" in text or "def " in text  # it is Python source
    a = BatchLoader(data, batch_size=8, seq_len=16, seed=3)
    b = BatchLoader(TokenData(str(train)), batch_size=8, seq_len=16, seed=3)
    batch = a.batch(5)
    assert batch.shape == (8, 17) and batch.dtype == np.int32
    np.testing.assert_array_equal(batch, b.batch(5))  # same (seed, step) -> same batch
    assert not np.array_equal(batch, a.batch(6))
    assert not np.array_equal(batch, BatchLoader(data, batch_size=8, seq_len=16, seed=4).batch(5))
    # each host's rows are its slice of the global batch
    parts = [a.local_batch(5, p, 4) for p in range(4)]
    np.testing.assert_array_equal(np.concatenate(parts), batch)
    # windows are contiguous text
    files, offs = a.offsets(5)
    np.testing.assert_array_equal(batch[0], data.arrays[files[0]][offs[0] : offs[0] + 17])


def test_loader_windows_stay_inside_files(tmp_path):
    write_shard(tmp_path / "x_0.bin", np.full(20, 1))
    write_shard(tmp_path / "x_1.bin", np.full(5, 2))  # shorter than a window: never used
    write_shard(tmp_path / "x_2.bin", np.full(30, 3))
    data = TokenData(str(tmp_path / "x_*.bin"))
    loader = BatchLoader(data, batch_size=64, seq_len=9, seed=0)
    for step in range(5):
        rows = loader.batch(step)
        assert all(len(set(r.tolist())) == 1 and r[0] in (1, 3) for r in rows)
    with pytest.raises(ValueError, match="fewer than one window of 31"):
        BatchLoader(data, batch_size=1, seq_len=30, seed=0)
    with pytest.raises(FileNotFoundError, match="nothing matches"):
        TokenData(str(tmp_path / "nope_*.bin"))


def test_llama3_shards_are_read_by_their_header(tmp_path):
    tokens = np.array([0, 128_000, 70_000, 5], dtype=np.int64)  # beyond uint16
    path = write_shard(tmp_path / "llama.bin", tokens, kind="llama3")
    raw = path.read_bytes()
    assert len(raw) == 1024 + 4 * tokens.size
    assert np.frombuffer(raw[:12], "<i4").tolist() == [LLAMA3_MAGIC, 7, 4]
    np.testing.assert_array_equal(open_tokens(path), tokens)  # auto: by the magic number
    np.testing.assert_array_equal(open_tokens(path, format="llama3"), tokens)
    loader = BatchLoader(TokenData(str(path), vocab_size=128_256), batch_size=2, seq_len=3, seed=0)
    np.testing.assert_array_equal(loader.batch(0)[0], tokens)
    with pytest.raises(ShardError, match=r"token 128000 at position 1 is >= the vocabulary size"):
        open_tokens(path, vocab_size=50_304)


@pytest.mark.parametrize("kind", ["shard", "llama3"])
def test_a_known_header_is_never_read_as_headerless(tmp_path, kind):
    path = write_shard(tmp_path / "s.bin", [1, 2, 3], kind=kind)
    family = "Llama-3" if kind == "llama3" else "GPT-2"
    with pytest.raises(ShardError, match=f"starts with the {family} shard magic"):
        open_tokens(path, format="nanogpt")
    with pytest.raises(ShardError, match=f"starts with the {family} shard magic"):
        read_legacy_bin(path)
    other = "shard" if kind == "llama3" else "llama3"
    with pytest.raises(ShardError, match=f"a {family} shard: read it with format='{kind}'"):
        open_tokens(path, format=other)


def test_llama3_header_checks_name_the_problem(tmp_path):
    h = np.zeros(256, dtype="<i4")
    h[:3] = (LLAMA3_MAGIC, 6, 1)
    path = tmp_path / "v6.bin"
    path.write_bytes(h.tobytes() + b"\0" * 4)
    with pytest.raises(ShardError, match=r"version 6, expected 7 \(Llama-3 shard\)"):
        open_tokens(path)
    h[1:3] = (7, 2)
    path.write_bytes(h.tobytes() + b"\0" * 6)
    with pytest.raises(ShardError, match="6 bytes after the header, not a whole uint32 count"):
        open_tokens(path)
