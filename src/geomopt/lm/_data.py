"""Token shards, an offline byte-level corpus, and a deterministic sharded batch loader.

Shard format (the GPT-2 speedrun community's): a header of 256 little-endian int32 —
``[0]`` magic 20240520, ``[1]`` version 1, ``[2]`` token count, the rest zero — followed by the
tokens as little-endian uint16. The same community's Llama-3 shards (llm.c) use the same header
with magic 20240801, version 7, and uint32 tokens; both are read. The older nanoGPT format
(``train.bin``/``val.bin``) is a headerless uint16 array, read only when named
(``format="nanogpt"``): ``auto`` refuses a file without a known magic. All are memory-mapped,
never read whole, and a file that starts with a known magic number is never read as headerless.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from geomopt.experiment import atomic_write_bytes

__all__ = [
    "SHARD_MAGIC",
    "SHARD_VERSION",
    "LLAMA3_MAGIC",
    "LLAMA3_VERSION",
    "SHARD_KINDS",
    "HEADER_INTS",
    "ShardError",
    "write_shard",
    "read_shard",
    "read_legacy_bin",
    "open_tokens",
    "detect_format",
    "TokenData",
    "ByteTokenizer",
    "offline_corpus_files",
    "build_offline_corpus",
    "BatchLoader",
]

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
LLAMA3_MAGIC = 20240801
LLAMA3_VERSION = 7
SHARD_KINDS = {
    "shard": (SHARD_MAGIC, SHARD_VERSION, "<u2", "GPT-2"),
    "llama3": (LLAMA3_MAGIC, LLAMA3_VERSION, "<u4", "Llama-3"),
}
"""Header kinds: format name -> (magic, version, token dtype, tokenizer family)."""
_KIND_OF_MAGIC = {magic: kind for kind, (magic, *_) in SHARD_KINDS.items()}
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
_SCAN_CHUNK = 1 << 24


class ShardError(ValueError):
    """A token file is malformed; the message names the file and the problem."""


def write_shard(
    path: str | os.PathLike,
    tokens: np.ndarray | Sequence[int],
    *,
    kind: Literal["shard", "llama3"] = "shard",
) -> Path:
    """Write ``tokens`` as one shard, atomically: a GPT-2 shard (``kind="shard"``, uint16
    tokens) or a Llama-3 shard (``kind="llama3"``, uint32 tokens). Returns the path."""
    path = Path(path)
    if kind not in SHARD_KINDS:
        raise ValueError(f"shard kind {kind!r}: expected one of {sorted(SHARD_KINDS)}")
    magic, version, dtype, _ = SHARD_KINDS[kind]
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"shard {path}: tokens must be 1-D, got shape {arr.shape}")
    top = np.iinfo(np.dtype(dtype)).max
    if arr.size and (arr.min() < 0 or arr.max() > top):
        raise ValueError(
            f"shard {path}: token values in [{arr.min()}, {arr.max()}] do not fit "
            f"{np.dtype(dtype).name} (expected 0 <= token <= {top})"
        )
    if arr.size >= 2**31:
        raise ValueError(f"shard {path}: {arr.size} tokens exceed the int32 header count")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (magic, version, arr.size)
    atomic_write_bytes(path, header.tobytes() + arr.astype(dtype).tobytes())
    return path


def _check_vocab(path: Path, tokens: np.ndarray, vocab_size: int | None) -> None:
    if vocab_size is None:
        return
    for start in range(0, tokens.size, _SCAN_CHUNK):
        chunk = tokens[start : start + _SCAN_CHUNK]
        if chunk.size and int(chunk.max()) >= vocab_size:
            where = start + int(np.argmax(chunk >= vocab_size))
            raise ShardError(
                f"shard {path}: token {int(tokens[where])} at position {where} is >= the "
                f"vocabulary size {vocab_size}"
            )


def read_shard(
    path: str | os.PathLike,
    *,
    vocab_size: int | None = None,
    kind: Literal["shard", "llama3"] = "shard",
) -> np.ndarray:
    """Memory-map the tokens of a shard after validating its header and size.

    ``kind`` is the expected header: ``"shard"`` (GPT-2, magic 20240520, version 1, uint16) or
    ``"llama3"`` (magic 20240801, version 7, uint32).

    Raises:
        ShardError: naming the file and the problem — too short for the header, wrong magic
            or version, truncated (fewer tokens than the header says), a count mismatch (more
            bytes than the header says), or, when ``vocab_size`` is given, a token >= it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"shard {path}: no such file")
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise ShardError(
            f"shard {path}: truncated, {size} bytes is shorter than the {HEADER_BYTES}-byte header"
        )
    if kind not in SHARD_KINDS:
        raise ValueError(f"shard kind {kind!r}: expected one of {sorted(SHARD_KINDS)}")
    magic, version, dtype, family = SHARD_KINDS[kind]
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if header[0] != magic:
        other = _KIND_OF_MAGIC.get(int(header[0]))
        hint = (
            f"a {SHARD_KINDS[other][3]} shard: read it with format={other!r} or 'auto'"
            if other
            else "not a token shard; a headerless nanoGPT .bin is read with format='nanogpt'"
        )
        raise ShardError(f"shard {path}: magic {int(header[0])}, expected {magic} ({hint})")
    if header[1] != version:
        raise ShardError(
            f"shard {path}: version {int(header[1])}, expected {version} ({family} shard)"
        )
    count = int(header[2])
    if count < 0:
        raise ShardError(f"shard {path}: negative token count {count} in the header")
    body = size - HEADER_BYTES
    width = np.dtype(dtype).itemsize
    if body % width:
        raise ShardError(
            f"shard {path}: {body} bytes after the header, not a whole {np.dtype(dtype).name} count"
        )
    if body < width * count:
        raise ShardError(
            f"shard {path}: truncated, header says {count} tokens but the file holds "
            f"{body // width}"
        )
    if body > width * count:
        raise ShardError(
            f"shard {path}: token count mismatch, header says {count} tokens but the file "
            f"holds {body // width}"
        )
    tokens = np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(count,))
    _check_vocab(path, tokens, vocab_size)
    return tokens


def _magic(path: Path) -> int | None:
    with open(path, "rb") as f:
        first = np.frombuffer(f.read(4), dtype="<i4")
    return int(first[0]) if first.size else None


def detect_format(path: str | os.PathLike) -> str:
    """The header kind (``"shard"``, ``"llama3"``) named by the file's magic number.

    Raises:
        ShardError: the magic is unknown, naming the known ones and the format for headerless
            nanoGPT files (which have no magic, so cannot be told from a corrupt file).
    """
    path = Path(path)
    magic = _magic(path)
    if magic in _KIND_OF_MAGIC:
        return _KIND_OF_MAGIC[magic]
    known = ", ".join(f"{m} ({SHARD_KINDS[k][3]} shard)" for m, k in _KIND_OF_MAGIC.items())
    raise ShardError(
        f"token file {path}: magic {magic} is none of the known {known}; a headerless nanoGPT "
        "uint16 file is read with format='nanogpt' (--data.format nanogpt)"
    )


def read_legacy_bin(path: str | os.PathLike, *, vocab_size: int | None = None) -> np.ndarray:
    """Memory-map a headerless nanoGPT ``.bin`` (uint16 tokens).

    Raises:
        ShardError: the file starts with a known shard magic number (its header would be read
            as tokens), is empty, or has an odd byte count.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file {path}: no such file")
    kind = _KIND_OF_MAGIC.get(_magic(path))
    if kind is not None:
        raise ShardError(
            f"token file {path}: starts with the {SHARD_KINDS[kind][3]} shard magic "
            f"{SHARD_KINDS[kind][0]}, so it is not a headerless nanoGPT file; read it with "
            f"format={kind!r} or 'auto'"
        )
    size = path.stat().st_size
    if size % 2:
        raise ShardError(f"token file {path}: {size} bytes is not a whole number of uint16 tokens")
    if size == 0:
        raise ShardError(f"token file {path}: empty")
    tokens = np.memmap(path, dtype="<u2", mode="r")
    _check_vocab(path, tokens, vocab_size)
    return tokens


Format = Literal["auto", "shard", "llama3", "nanogpt"]


def open_tokens(
    path: str | os.PathLike, *, format: Format = "auto", vocab_size: int | None = None
) -> np.ndarray:
    """Memory-map a token file. ``auto`` reads the header its magic number names (GPT-2 shard
    20240520, Llama-3 shard 20240801) and refuses a file without a known magic (a headerless
    nanoGPT file is read only when asked for: ``format="nanogpt"``); a forced format that
    disagrees with a known magic is refused by name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file {path}: no such file")
    if format == "auto":
        format = detect_format(path)
    if format in SHARD_KINDS:
        return read_shard(path, vocab_size=vocab_size, kind=format)
    if format == "nanogpt":
        return read_legacy_bin(path, vocab_size=vocab_size)
    raise ValueError(
        f"token file format {format!r}: expected 'auto', 'shard', 'llama3' or 'nanogpt'"
    )


def _expand(patterns: str | Sequence[str]) -> list[Path]:
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [str(patterns)]
    files: list[Path] = []
    for pattern in patterns:
        p = Path(pattern)
        matched = sorted(p.parent.glob(p.name)) if any(c in p.name for c in "*?[") else [p]
        if not matched or not all(m.is_file() for m in matched):
            raise FileNotFoundError(f"token files {pattern!r}: nothing matches")
        files.extend(matched)
    return files


class TokenData:
    """A list of memory-mapped token files read as one stream of documents.

    Windows never cross a file boundary; a file shorter than a window is skipped.
    """

    def __init__(
        self,
        patterns: str | Sequence[str],
        *,
        vocab_size: int | None = None,
        format: Format = "auto",
    ):
        self.files = _expand(patterns)
        self.arrays = [open_tokens(f, format=format, vocab_size=vocab_size) for f in self.files]

    @property
    def n_tokens(self) -> int:
        return int(sum(a.size for a in self.arrays))

    def window_starts(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Per usable file: its index and the number of windows of length ``window`` it holds."""
        counts = np.array([max(a.size - window + 1, 0) for a in self.arrays], dtype=np.int64)
        idx = np.flatnonzero(counts)
        if idx.size == 0:
            longest = max(a.size for a in self.arrays)
            raise ValueError(
                f"token files {[str(f) for f in self.files]}: the longest holds {longest} tokens, "
                f"fewer than one window of {window}"
            )
        return idx, counts[idx]


class ByteTokenizer:
    """UTF-8 bytes as tokens (vocabulary 256). Documents are separated by byte 0 (NUL), which
    never occurs in the text files it is used on; it plays the role of GPT-2's end-of-text."""

    vocab_size = 256
    eot = 0

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint16)

    def decode(self, tokens: Iterable[int]) -> str:
        return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


def offline_corpus_files() -> list[Path]:
    """The Python standard library's own ``.py`` sources, sorted: text that ships with every
    Python install, so demos and tests need no network. (Tests excluded.)"""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [
        p
        for p in sorted(stdlib.rglob("*.py"))
        if "site-packages" not in p.parts and "test" not in p.parts and "tests" not in p.parts
    ]
    if not files:
        raise FileNotFoundError(f"no .py sources under the standard library folder {stdlib}")
    return files


def build_offline_corpus(
    out_dir: str | os.PathLike,
    *,
    max_bytes: int = 8_000_000,
    val_every: int = 20,
) -> tuple[Path, Path]:
    """Tokenise the standard-library sources byte-wise into ``train.bin`` and ``val.bin`` shards.

    Files are taken in sorted order until ``max_bytes`` of text; every ``val_every``-th file
    (at least one) goes to validation. Deterministic for a given Python install. Skips the work
    when both shards exist and were built with the same settings (recorded in ``corpus.txt``).
    """
    if max_bytes < 1:
        raise ValueError(f"max_bytes={max_bytes}: expected a positive byte budget")
    out = Path(out_dir)
    train_path, val_path, stamp_path = out / "train.bin", out / "val.bin", out / "corpus.txt"
    stamp = f"stdlib-bytes max_bytes={max_bytes} val_every={val_every}\n"
    if train_path.exists() and val_path.exists() and stamp_path.exists():
        if stamp_path.read_text() == stamp:
            return train_path, val_path
    tok = ByteTokenizer()
    docs, total = [], 0
    for f in offline_corpus_files():
        try:
            ids = tok.encode(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
        if ids.size == 0 or (ids == tok.eot).any():
            continue
        docs.append(ids)
        total += ids.size
        if total >= max_bytes:
            break
    if len(docs) < 2:
        raise ValueError(f"offline corpus: {len(docs)} documents, need 2 (max_bytes={max_bytes})")
    val_idx = set(range(val_every - 1, len(docs), val_every)) or {len(docs) - 1}
    val = [d for i, d in enumerate(docs) if i in val_idx]
    train = [d for i, d in enumerate(docs) if i not in val_idx]
    sep = np.array([tok.eot], dtype=np.uint16)
    for path, part in ((train_path, train), (val_path, val)):
        write_shard(path, np.concatenate([x for d in part for x in (d, sep)]))
    atomic_write_bytes(stamp_path, stamp.encode())
    return train_path, val_path


class BatchLoader:
    """Windows of ``seq_len + 1`` tokens, drawn deterministically from ``(seed, step)``.

    ``batch(step)`` returns the full global batch ``(batch_size, seq_len + 1)`` as int32; the
    draw depends only on ``(seed, step)``, so a resumed run sees exactly the batches it would
    have seen. Windows are drawn uniformly over all window positions of all files.
    ``local_batch(step, process_index, process_count)`` returns this host's contiguous rows of
    the same global batch, which :func:`jax.make_array_from_process_local_data` assembles.
    """

    def __init__(self, data: TokenData, *, batch_size: int, seq_len: int, seed: int):
        if batch_size < 1 or seq_len < 1:
            raise ValueError(
                f"BatchLoader: batch_size={batch_size}, seq_len={seq_len}; expected both >= 1"
            )
        self.data = data
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.seed = seed
        self._files, counts = data.window_starts(seq_len + 1)
        self._cum = np.concatenate([[0], np.cumsum(counts)])

    @property
    def n_windows(self) -> int:
        return int(self._cum[-1])

    def offsets(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        if step < 0:
            raise ValueError(f"BatchLoader step {step}: expected >= 0")
        rng = np.random.default_rng([self.seed, step])
        flat = rng.integers(0, self.n_windows, size=self.batch_size, dtype=np.int64)
        which = np.searchsorted(self._cum, flat, side="right") - 1
        return self._files[which], flat - self._cum[which]

    def rows(self, step: int, start: int, stop: int) -> np.ndarray:
        files, offs = self.offsets(step)
        w = self.seq_len + 1
        out = np.empty((stop - start, w), dtype=np.int32)
        for r, (f, o) in enumerate(zip(files[start:stop], offs[start:stop], strict=True)):
            out[r] = self.data.arrays[f][o : o + w]
        return out

    def batch(self, step: int) -> np.ndarray:
        return self.rows(step, 0, self.batch_size)

    def local_batch(self, step: int, process_index: int, process_count: int) -> np.ndarray:
        if self.batch_size % process_count:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by the {process_count} processes"
            )
        per = self.batch_size // process_count
        return self.rows(step, process_index * per, (process_index + 1) * per)
