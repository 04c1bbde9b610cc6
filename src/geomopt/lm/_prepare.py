"""Turn text into token shards: GPT-2 BPE (tiktoken) or bytes, from Hugging Face datasets
streamed by name, local text files, or the offline standard-library corpus.

Layout (as the GPT-2 speedrun community's FineWeb shards): ``<prefix>_val_000000.bin`` first,
then ``<prefix>_train_000001.bin``, ... of ``shard_tokens`` tokens each (the last one shorter).
Every document is preceded by the end-of-text token, so documents are separated by it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from geomopt.lm._data import ByteTokenizer, write_shard

__all__ = ["GPT2Tokenizer", "get_tokenizer", "write_shards", "hf_documents", "file_documents"]


class GPT2Tokenizer:
    """GPT-2 BPE through tiktoken (vocabulary 50257, end-of-text 50256).

    tiktoken downloads its BPE file on first use (or reads it from ``TIKTOKEN_CACHE_DIR``);
    without network and without a cached copy construction fails with a message saying so.
    """

    vocab_size = 50257

    def __init__(self):
        import tiktoken

        try:
            self._enc = tiktoken.get_encoding("gpt2")
        except Exception as err:  # noqa: BLE001 - any failure to fetch/parse the BPE file
            raise RuntimeError(
                "could not load tiktoken's GPT-2 BPE encoding: it is downloaded on first use "
                "(network needed) or read from a cached copy in TIKTOKEN_CACHE_DIR "
                f"({os.environ.get('TIKTOKEN_CACHE_DIR', 'unset')}); original error: "
                f"{type(err).__name__}: {err}. Offline, use --tokenizer byte."
            ) from err
        self.eot = self._enc.eot_token

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._enc.encode_ordinary(text), dtype=np.uint16)

    def decode(self, tokens) -> str:
        return self._enc.decode([int(t) for t in tokens])


def get_tokenizer(name: str):
    """``"gpt2"`` (tiktoken BPE) or ``"byte"`` (UTF-8 bytes, vocabulary 256)."""
    if name == "gpt2":
        return GPT2Tokenizer()
    if name == "byte":
        return ByteTokenizer()
    raise ValueError(f"tokenizer {name!r}: expected 'gpt2' or 'byte'")


def write_shards(
    documents: Iterable[str],
    tokenizer,
    out_dir: str | os.PathLike,
    *,
    prefix: str,
    shard_tokens: int = 100_000_000,
    max_tokens: int = 0,
    log=print,
) -> list[Path]:
    """Tokenise ``documents`` into shards of ``shard_tokens`` tokens (the first is validation).

    Documents are split across shard boundaries. ``max_tokens`` (0: no limit) stops after that
    many tokens. Returns the written paths in order.
    """
    if shard_tokens < 1:
        raise ValueError(f"shard_tokens={shard_tokens}: expected >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    buf = np.empty(shard_tokens, dtype=np.uint16)
    fill, total, paths = 0, 0, []

    def emit(n: int) -> None:
        split = "val" if not paths else "train"
        path = out / f"{prefix}_{split}_{len(paths):06d}.bin"
        write_shard(path, buf[:n])
        paths.append(path)
        log(f"[prepare] wrote {path} ({n:,} tokens)")

    eot = np.array([tokenizer.eot], dtype=np.uint16)
    for text in documents:
        ids = np.concatenate([eot, tokenizer.encode(text)])
        if max_tokens:
            ids = ids[: max_tokens - total]
        pos = 0
        while pos < ids.size:
            take = min(shard_tokens - fill, ids.size - pos)
            buf[fill : fill + take] = ids[pos : pos + take]
            fill, pos = fill + take, pos + take
            if fill == shard_tokens:
                emit(fill)
                fill = 0
        total += ids.size
        if max_tokens and total >= max_tokens:
            break
    if fill:
        emit(fill)
    if not paths:
        raise ValueError("write_shards: no documents were given")
    return paths


def hf_documents(
    name: str, config: str | None, split: str = "train", text_field: str = "text"
) -> Iterator[str]:
    """Stream the ``text_field`` of a Hugging Face dataset by name (needs network and the
    ``datasets`` package, which geomopt does not depend on: ``uv run --with datasets ...``)."""
    try:
        import datasets
    except ImportError as err:
        raise RuntimeError(
            "streaming a Hugging Face dataset needs the 'datasets' package: run with "
            "`uv run --with datasets experiments/signsgd/prepare_data.py ...`"
        ) from err
    ds = datasets.load_dataset(name, name=config, split=split, streaming=True)
    for row in ds:
        yield row[text_field]


def file_documents(paths: Iterable[str | os.PathLike]) -> Iterator[str]:
    """Each local text file is one document (UTF-8)."""
    for p in paths:
        yield Path(p).read_text(encoding="utf-8")
