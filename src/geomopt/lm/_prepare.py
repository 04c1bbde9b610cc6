"""Turn text into token shards: GPT-2 BPE (tiktoken) or bytes, from Hugging Face datasets
streamed by name, local text files, or the offline standard-library corpus.

Layout (as the GPT-2 speedrun community's FineWeb shards): ``<prefix>_val_000000.bin`` first,
then ``<prefix>_train_000001.bin``, ... of ``shard_tokens`` tokens each (the last one shorter).
The validation shard holds the first ``val_tokens`` tokens: for sources of known size (local
files, the offline corpus) a fraction of the whole, counted in a first pass
(:func:`validation_tokens`), so a small corpus gets both splits.
Every document is preceded by the end-of-text token, so documents are separated by it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from geomopt.lm._data import ByteTokenizer, write_shard

__all__ = [
    "GPT2Tokenizer",
    "get_tokenizer",
    "write_shards",
    "count_tokens",
    "validation_tokens",
    "hf_documents",
    "file_documents",
]


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
    val_tokens: int = 0,
    log=print,
) -> list[Path]:
    """Tokenise ``documents`` into shards: the first ``val_tokens`` tokens (0: ``shard_tokens``)
    are the validation shard, the rest training shards of ``shard_tokens`` tokens each.

    Documents are split across shard boundaries. ``max_tokens`` (0: no limit) stops after that
    many tokens. Returns the written paths in order.
    """
    if shard_tokens < 1:
        raise ValueError(f"shard_tokens={shard_tokens}: expected >= 1")
    if val_tokens < 0:
        raise ValueError(f"val_tokens={val_tokens}: expected >= 0 (0: one shard of shard_tokens)")
    val_tokens = val_tokens or shard_tokens
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    buf = np.empty(max(shard_tokens, val_tokens), dtype=np.uint16)
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
            size = shard_tokens if paths else val_tokens
            take = min(size - fill, ids.size - pos)
            buf[fill : fill + take] = ids[pos : pos + take]
            fill, pos = fill + take, pos + take
            if fill == size:
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


def count_tokens(documents: Iterable[str], tokenizer, *, max_tokens: int = 0) -> int:
    """Tokens :func:`write_shards` writes for ``documents`` (one end-of-text per document)."""
    total = 0
    for text in documents:
        total += 1 + len(tokenizer.encode(text))
        if max_tokens and total >= max_tokens:
            return max_tokens
    return total


def validation_tokens(total: int, fraction: float, shard_tokens: int) -> int:
    """Tokens of the validation split: ``fraction`` of ``total`` rounded, at least 1, at most
    one shard, and leaving at least one training token.

    Raises:
        ValueError: fewer than 2 tokens, or a fraction outside (0, 1).
    """
    if not 0 < fraction < 1:
        raise ValueError(f"val_fraction={fraction!r}: expected a fraction in (0, 1)")
    if total < 2:
        raise ValueError(f"{total} tokens: need at least 2 for a train and a validation split")
    return int(min(max(1, round(fraction * total)), shard_tokens, total - 1))


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
