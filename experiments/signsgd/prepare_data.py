"""Tokenise text into GPT-2 token shards for pretraining: a 256 x int32 header, then uint16
tokens; the first shard is the validation split (for local files and the offline corpus,
--val-fraction of the tokens, 0.1 by default). The text is a Hugging Face dataset streamed
by name (FineWeb, C4), local text files, or offline the Python standard library's sources. A
tool, not an experiment: prepare_data.py [offline|smoke|fineweb|c4|files] [--field value ...].

Examples:
    # offline: the Python standard library's sources, byte-level (vocab 256), no network
    uv run experiments/signsgd/prepare_data.py offline
    # FineWeb 10B sample, GPT-2 BPE (network + the datasets package; ~100 shards of 100M)
    uv run --with datasets experiments/signsgd/prepare_data.py fineweb
    # C4 English (the paper's data)
    uv run --with datasets experiments/signsgd/prepare_data.py c4
    # local text files, one document each (byte-level: no tokenizer download)
    uv run experiments/signsgd/prepare_data.py files --files "notes/*.txt" --tokenizer byte \
        --out-dir data/mine --prefix mine

tiktoken downloads the GPT-2 BPE file on first use; offline, point TIKTOKEN_CACHE_DIR at a
cached copy or use --tokenizer byte. The work happens in geomopt.lm._prepare. Errors are one
line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import glob
import os
import sys
from typing import Literal

import tyro

from geomopt.experiment import tool_main


@dataclasses.dataclass(frozen=True)
class Config:
    source: Literal["hf", "files", "offline"] = "offline"
    """hf: a Hugging Face dataset streamed by name; files: local text files; offline: the
    Python standard library's .py sources."""
    dataset: str = "HuggingFaceFW/fineweb"
    """Hugging Face dataset name (source=hf)."""
    dataset_config: str = "sample-10BT"
    """Hugging Face dataset config (e.g. sample-10BT for FineWeb, en for C4)."""
    split: str = "train"
    """Dataset split to stream."""
    text_field: str = "text"
    """Field holding the document text."""
    files: str = ""
    """Glob of local text files (source=files)."""
    tokenizer: Literal["gpt2", "byte"] = "byte"
    """gpt2: tiktoken GPT-2 BPE (vocab 50257); byte: UTF-8 bytes (vocab 256)."""
    out_dir: str = "data/stdlib_bytes"
    """Output folder for the shards."""
    prefix: str = "stdlib"
    """Shard name prefix: <prefix>_val_000000.bin, <prefix>_train_000001.bin, ..."""
    shard_tokens: int = 100_000_000
    """Tokens per training shard."""
    max_tokens: int = 0
    """Stop after this many tokens (0: the whole source)."""
    val_fraction: float = 0.1
    """files and offline: this fraction of the tokens (the first ones, at most one shard) is the
    validation shard, so a small corpus gets both splits; hf (streamed, size unknown): the first
    shard_tokens tokens are."""


PRESETS = {
    "smoke": (
        "seconds: 200k bytes of stdlib source, byte-level, 50k-token shards",
        Config(out_dir="data/smoke_shards", shard_tokens=50_000, max_tokens=200_000),
    ),
    "offline": ("the stdlib sources, byte-level, no network", Config(shard_tokens=1_000_000)),
    "fineweb": (
        "FineWeb sample-10BT, GPT-2 BPE, 100M-token shards (network)",
        Config(source="hf", tokenizer="gpt2", out_dir="data/fineweb10B", prefix="fineweb"),
    ),
    "c4": (
        "C4 English, GPT-2 BPE, 100M-token shards (network; the paper's data)",
        Config(
            source="hf",
            dataset="allenai/c4",
            dataset_config="en",
            tokenizer="gpt2",
            out_dir="data/c4",
            prefix="c4",
            max_tokens=6_000_000_000,
        ),
    ),
    "files": ("local text files (--files GLOB)", Config(source="files", tokenizer="gpt2")),
}


def main(cfg: Config) -> int:
    from geomopt.lm import (
        count_tokens,
        file_documents,
        get_tokenizer,
        hf_documents,
        offline_corpus_files,
        validation_tokens,
        write_shards,
    )

    if not 0 < cfg.val_fraction < 1:
        raise ValueError(f"--val-fraction {cfg.val_fraction}: expected a fraction in (0, 1)")
    if cfg.source == "files":
        if not cfg.files:
            raise ValueError("--files is empty: expected a glob of text files, e.g. 'corpus/*.txt'")
        paths = sorted(p for p in glob.glob(cfg.files) if os.path.isfile(p))
        if not paths:
            raise ValueError(f"--files {cfg.files!r} matches no file")
    tokenizer = get_tokenizer(cfg.tokenizer)
    val_tokens = 0
    if cfg.source == "hf":
        docs = hf_documents(cfg.dataset, cfg.dataset_config, cfg.split, cfg.text_field)
    else:
        if cfg.source == "offline":
            paths = offline_corpus_files()
        total = count_tokens(file_documents(paths), tokenizer, max_tokens=cfg.max_tokens)
        val_tokens = validation_tokens(total, cfg.val_fraction, cfg.shard_tokens)
        docs = file_documents(paths)
    write_shards(
        docs,
        tokenizer,
        cfg.out_dir,
        prefix=cfg.prefix,
        shard_tokens=cfg.shard_tokens,
        max_tokens=cfg.max_tokens,
        val_tokens=val_tokens,
    )
    return 0


def parse(argv: list[str]) -> Config:
    """``[PRESET] [--field value ...]``; the preset defaults to ``offline``."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = ["offline", *argv]
    elif not argv[0].startswith("-") and argv[0] not in PRESETS:
        raise SystemExit(f"unknown preset {argv[0]!r}; expected one of {sorted(PRESETS)}")
    return tyro.extras.overridable_config_cli(PRESETS, args=argv, description=__doc__)


if __name__ == "__main__":
    sys.exit(tool_main("prepare_data.py", main, parse))
