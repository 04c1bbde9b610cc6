"""Tokenise text into GPT-2 token shards for pretraining: a 256 x int32 header, then uint16
tokens; the first shard is the validation split. The text is a Hugging Face dataset streamed
by name (FineWeb, C4), local text files, or offline the Python standard library's sources. A
tool, not an experiment: prepare_data.py [offline|smoke|fineweb|c4|files] [--field value ...].

Examples:
    # offline: the Python standard library's sources, byte-level (vocab 256), no network
    uv run experiments/signsgd/prepare_data.py offline
    # FineWeb 10B sample, GPT-2 BPE (network + the datasets package; ~100 shards of 100M)
    uv run --with datasets experiments/signsgd/prepare_data.py fineweb
    # C4 English (the paper's data)
    uv run --with datasets experiments/signsgd/prepare_data.py c4
    # local text files, one document each
    uv run experiments/signsgd/prepare_data.py files --files "notes/*.txt" --out-dir data/mine

tiktoken downloads the GPT-2 BPE file on first use; offline, point TIKTOKEN_CACHE_DIR at a
cached copy or use --tokenizer byte. The work happens in geomopt.lm._prepare. Errors are one
line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import glob
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
    """Tokens per shard (the first shard is the validation split)."""
    max_tokens: int = 0
    """Stop after this many tokens (0: the whole source)."""


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
    from geomopt.lm._data import offline_corpus_files
    from geomopt.lm._prepare import file_documents, get_tokenizer, hf_documents, write_shards

    tokenizer = get_tokenizer(cfg.tokenizer)
    if cfg.source == "hf":
        docs = hf_documents(cfg.dataset, cfg.dataset_config, cfg.split, cfg.text_field)
    elif cfg.source == "files":
        paths = sorted(glob.glob(cfg.files))
        if not paths:
            raise SystemExit(f"--files {cfg.files!r} matches no file")
        docs = file_documents(paths)
    else:
        docs = file_documents(offline_corpus_files())
    write_shards(
        docs,
        tokenizer,
        cfg.out_dir,
        prefix=cfg.prefix,
        shard_tokens=cfg.shard_tokens,
        max_tokens=cfg.max_tokens,
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
