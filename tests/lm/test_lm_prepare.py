"""prepare_data's library side: shard writing from documents, tokenizer selection."""

import numpy as np
import pytest

from geomopt.lm import ByteTokenizer, TokenData, get_tokenizer, read_shard, write_shards


def test_write_shards_splits_documents_and_separates_them(tmp_path):
    docs = ["hello world", "abc", "x" * 25]
    paths = write_shards(
        docs, ByteTokenizer(), tmp_path, prefix="t", shard_tokens=16, log=lambda _: None
    )
    assert [p.name for p in paths] == [
        "t_val_000000.bin",
        "t_train_000001.bin",
        "t_train_000002.bin",
    ]
    tokens = np.concatenate([read_shard(p, vocab_size=256) for p in paths])
    expected = b"\0hello world\0abc\0" + b"x" * 25
    assert tokens.tobytes()[::2] == expected and tokens.size == len(expected)
    assert [read_shard(p).size for p in paths] == [16, 16, len(expected) - 32]
    assert TokenData(str(tmp_path / "t_train_*.bin")).n_tokens == len(expected) - 16


def test_write_shards_max_tokens(tmp_path):
    paths = write_shards(
        ["a" * 100] * 5,
        ByteTokenizer(),
        tmp_path,
        prefix="m",
        shard_tokens=1000,
        max_tokens=150,
        log=lambda _: None,
    )
    assert read_shard(paths[0]).size == 150


def test_gpt2_tokenizer_fails_clearly_offline(monkeypatch):
    import tiktoken

    def no_network(name):
        raise ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'")

    monkeypatch.setattr(tiktoken, "get_encoding", no_network)
    with pytest.raises(RuntimeError, match="could not load tiktoken's GPT-2 BPE.*--tokenizer byte"):
        get_tokenizer("gpt2")
    with pytest.raises(ValueError, match="tokenizer 'bpe'"):
        get_tokenizer("bpe")
