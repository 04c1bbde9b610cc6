"""Score a GPT-2 on HellaSwag, 4-way sentence completion, from a local jsonl file: the newest
or a chosen checkpoint of a pretraining run folder, or a Hugging Face GPT-2 folder. Prints one
JSON line with n, acc (summed log-likelihood), acc_norm (per character, as
lm-evaluation-harness), acc_token_norm (per token, as nanoGPT and llm.c) and truncated_rows
(rows longer than the context, which lost old context tokens; also said on stderr). A tool, not an
experiment.

Examples:
    uv run experiments/signsgd/hellaswag.py --source ~/gpt2 --data hellaswag_val.jsonl
    uv run experiments/signsgd/hellaswag.py --source ~/gpt2 --data hellaswag_val.jsonl --limit 100

The jsonl is hellaswag_val.jsonl of rowanz/hellaswag on GitHub; this tool does not download
it. The work happens in geomopt.lm._hellaswag.
Errors are one line; --debug (or GEOMOPT_DEBUG=1) prints the traceback.
"""

import dataclasses
import json
import sys
from typing import Literal

import tyro

from geomopt.experiment import tool_main


@dataclasses.dataclass(frozen=True)
class Config:
    source: str
    """A pretraining run folder (newest checkpoint) or an HF GPT-2 folder."""
    data: str
    """HellaSwag jsonl file (public format: ctx, endings, label, ...)."""
    limit: int = 0
    """Score only the first this many examples (0: all)."""
    text: Literal["raw", "harness"] = "raw"
    """raw: ctx and endings as stored (nanoGPT / llm.c); harness: lm-evaluation-harness text."""
    batch_examples: int = 8
    """Examples (4 rows each) per jitted call."""
    seq_len: int = 0
    """Padded row length (0: the longest row rounded up to 32, capped at the context)."""
    step: int = -1
    """Checkpoint step of a run folder (-1: the newest)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Compute dtype of the model."""


def main(cfg: Config) -> int:
    from geomopt.lm import (
        evaluate_hellaswag,
        load_model,
        read_hellaswag,
        tiktoken_gpt2_missing,
        tokenizer_for_model,
    )

    model = load_model(cfg.source, step=None if cfg.step < 0 else cfg.step, dtype=cfg.dtype)
    if model.config.vocab_size != 256 and (missing := tiktoken_gpt2_missing()):
        print(missing, file=sys.stderr)
        return 2
    examples = read_hellaswag(cfg.data, limit=cfg.limit, text=cfg.text)
    r = evaluate_hellaswag(
        model,
        examples,
        tokenizer_for_model(model.config.vocab_size),
        seq_len=cfg.seq_len,
        batch_examples=cfg.batch_examples,
    )
    summary = {k: r[k] for k in ("n", "acc", "acc_norm", "acc_token_norm", "truncated_rows")}
    if r["truncated_rows"]:
        print(
            f"hellaswag.py: {r['truncated_rows']} of {4 * r['n']} rows are longer than the "
            f"model context {model.config.context} and lost their oldest context tokens",
            file=sys.stderr,
        )
    print(json.dumps(summary))
    return 0


def parse(argv: list[str]) -> Config:
    return tyro.cli(Config, args=argv, description=__doc__)


if __name__ == "__main__":
    sys.exit(tool_main("hellaswag.py", main, parse))
