"""HellaSwag evaluation of a GPT-2: the standard four-way completion scoring.

Data: the public jsonl format (one object per line with ``ctx`` (or ``ctx_a``/``ctx_b``),
``endings`` (4 strings), ``label`` (0-3), optionally ``activity_label``), read from a local path
(``hellaswag_val.jsonl`` of rowanz/hellaswag; nothing is downloaded).

Scoring, for each example and each of the 4 endings: the row ``context + " " + ending`` is
tokenised as ``encode(context)`` followed by ``encode(" " + ending)``, and the model's
cross-entropy of every ending token given everything before it is summed (``sum``) and
averaged over the ending's tokens (``mean``). Reported accuracies (fraction of examples whose
best ending is the labelled one):

- ``acc``: lowest summed loss (highest log-likelihood; the harness's ``acc``);
- ``acc_norm``: highest log-likelihood per character of the ending (lm-evaluation-harness's
  ``acc_norm``, length in characters of the ending string);
- ``acc_token_norm``: lowest mean loss per ending token (what nanoGPT / llm.c call
  ``acc_norm``).

``text="raw"`` uses ``ctx`` and the endings as stored (nanoGPT / llm.c); ``text="harness"``
applies lm-evaluation-harness's preprocessing (``activity_label: ctx_a + " " + ctx_b`` with
``ctx_b`` capitalised, `` [title]`` -> ``. ``, bracketed tags removed, double spaces
collapsed). Rows are padded to one fixed length (rows longer than it lose the oldest context
tokens; they are counted, ``truncated_rows``, and the tool and the training hook report them)
and examples to a multiple of ``batch_examples``, so the jitted scorer compiles once
per evaluation set; the logits are formed one row at a time (``lax.map``), never for the
whole batch.

Training hook (used by ``lm._train`` through ``exp_pretrain``):
``hellaswag_evaluator(train_cfg) -> (trainer, params) -> {"hellaswag_acc",
"hellaswag_acc_norm", "hellaswag_acc_token_norm"}``; standalone:
:func:`evaluate_hellaswag` or ``experiments/signsgd/hellaswag.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = [
    "HellaSwagExample",
    "read_hellaswag",
    "encode_hellaswag",
    "evaluate_hellaswag",
    "hellaswag_evaluator",
    "harness_preprocess",
]


@dataclasses.dataclass(frozen=True)
class HellaSwagExample:
    """One HellaSwag item: a context, four candidate endings and the index of the right one."""

    context: str
    endings: tuple[str, ...]
    label: int


def harness_preprocess(text: str) -> str:
    """lm-evaluation-harness's HellaSwag text cleaning."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def read_hellaswag(
    path: str | os.PathLike, *, limit: int = 0, text: str = "raw"
) -> list[HellaSwagExample]:
    """The examples of a HellaSwag jsonl file (the first ``limit`` ones; 0: all)."""
    if text not in ("raw", "harness"):
        raise ValueError(f"text={text!r}: expected 'raw' or 'harness'")
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                endings = tuple(obj["endings"])
                label = int(obj["label"])
                if text == "harness":
                    ctx = obj["ctx_a"] + " " + obj["ctx_b"].capitalize()
                    context = harness_preprocess(obj["activity_label"] + ": " + ctx)
                    endings = tuple(harness_preprocess(e) for e in endings)
                else:
                    context = obj["ctx"] if "ctx" in obj else obj["ctx_a"] + " " + obj["ctx_b"]
            except (KeyError, TypeError, ValueError) as err:
                raise ValueError(
                    f"{path}:{lineno}: not a HellaSwag record ({type(err).__name__}: {err}); "
                    "expected fields ctx (or ctx_a, ctx_b), endings, label"
                ) from err
            if len(endings) != 4 or not 0 <= label < 4:
                raise ValueError(
                    f"{path}:{lineno}: {len(endings)} endings and label {label}; expected 4 "
                    "endings and a label in 0..3"
                )
            out.append(HellaSwagExample(context, endings, label))
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no HellaSwag examples")
    return out


@dataclasses.dataclass(frozen=True)
class EncodedHellaSwag:
    """Fixed-shape arrays of ``E`` examples (padded to a multiple of the batch)."""

    tokens_Ex4xL1: np.ndarray
    """Rows of ``L + 1`` tokens: context then ending, zero padded on the right."""
    mask_Ex4xL: np.ndarray
    """1 where target position ``t`` (token ``t + 1``) is an ending token."""
    labels_E: np.ndarray
    chars_Ex4: np.ndarray
    """Characters of each ending (for the harness's acc_norm)."""
    n_examples: int
    """Number of real examples (the rest is padding)."""
    n_truncated: int = 0
    """Rows (example, ending) longer than ``seq_len + 1`` tokens, which lost their oldest
    context tokens (reported, not silent: a model with a short context scores them on less)."""


def encode_hellaswag(
    examples: Sequence[HellaSwagExample],
    tokenizer,
    *,
    seq_len: int,
    batch_examples: int = 1,
) -> EncodedHellaSwag:
    """Tokenise ``examples`` with ``tokenizer.encode`` into rows of at most ``seq_len + 1``
    tokens (``seq_len`` model inputs); longer rows drop their oldest context tokens."""
    if seq_len < 2:
        raise ValueError(f"seq_len={seq_len}: expected >= 2")
    n = len(examples)
    e_pad = -(-n // batch_examples) * batch_examples
    tokens = np.zeros((e_pad, 4, seq_len + 1), np.int32)
    mask = np.zeros((e_pad, 4, seq_len), np.float32)
    labels = np.zeros((e_pad,), np.int32)
    chars = np.ones((e_pad, 4), np.float32)
    truncated = 0
    for i, ex in enumerate(examples):
        ctx = [int(t) for t in tokenizer.encode(ex.context)]
        labels[i] = ex.label
        for j, ending in enumerate(ex.endings):
            end = [int(t) for t in tokenizer.encode(" " + ending)]
            truncated += len(ctx) + len(end) > seq_len + 1
            end = end[:seq_len]
            keep = max(1, seq_len + 1 - len(end))
            row = (ctx[-keep:] + end)[: seq_len + 1]
            n_ctx = len(row) - len(end)
            tokens[i, j, : len(row)] = row
            mask[i, j, n_ctx - 1 : len(row) - 1] = 1.0
            chars[i, j] = max(1, len(ending))
    return EncodedHellaSwag(tokens, mask, labels, chars, n, truncated)


@functools.partial(jax.jit, static_argnums=0)
def _ending_losses(graphdef, params, tokens_Bx4xL1, mask_Bx4xL):
    """Summed and per-token-mean ending cross-entropies ``Bx4`` (logits one row at a time)."""
    model = nnx.merge(graphdef, params)
    B, C, L1 = tokens_Bx4xL1.shape
    rows_RxL1 = tokens_Bx4xL1.reshape(B * C, L1)
    x_RxLxD, _ = model.hidden(rows_RxL1[:, :-1])

    def row_loss(args):
        x_LxD, targets_L = args
        logits = model.logits(x_LxD[None])[0]
        lse = jax.nn.logsumexp(logits, axis=-1)
        return lse - jnp.take_along_axis(logits, targets_L[:, None], axis=-1)[:, 0]

    ce_RxL = jax.lax.map(row_loss, (x_RxLxD, rows_RxL1[:, 1:]))
    ce_Bx4xL = ce_RxL.reshape(B, C, L1 - 1) * mask_Bx4xL
    total = ce_Bx4xL.sum(-1)
    count = jnp.maximum(mask_Bx4xL.sum(-1), 1.0)
    return total, total / count


def _split(model_or_split):
    if isinstance(model_or_split, tuple):
        return model_or_split
    return nnx.split(model_or_split, nnx.Param)[:2]


def score_encoded(model_or_split, data: EncodedHellaSwag, *, batch_examples: int) -> dict:
    """Accuracies (and the per-ending losses) of encoded examples; ``model_or_split`` is a
    :class:`GPT2` or its ``(graphdef, params)`` from ``nnx.split(model, nnx.Param)``."""
    graphdef, params = _split(model_or_split)
    e = data.tokens_Ex4xL1.shape[0]
    if e % batch_examples:
        raise ValueError(f"{e} encoded examples: not a multiple of batch_examples={batch_examples}")
    sums, means = [], []
    for start in range(0, e, batch_examples):
        sl = slice(start, start + batch_examples)
        s, m = _ending_losses(graphdef, params, data.tokens_Ex4xL1[sl], data.mask_Ex4xL[sl])
        sums.append(np.asarray(s))
        means.append(np.asarray(m))
    n = data.n_examples
    loss_sum = np.concatenate(sums)[:n]
    loss_mean = np.concatenate(means)[:n]
    labels = data.labels_E[:n]
    per_char = loss_sum / data.chars_Ex4[:n]

    def acc(scores):
        return float(np.mean(np.argmin(scores, axis=1) == labels))

    return {
        "acc": acc(loss_sum),
        "acc_norm": acc(per_char),
        "acc_token_norm": acc(loss_mean),
        "n": n,
        "truncated_rows": data.n_truncated,
        "loss_sum": loss_sum,
        "loss_mean": loss_mean,
    }


def evaluate_hellaswag(
    model_or_split,
    examples: Sequence[HellaSwagExample],
    tokenizer,
    *,
    seq_len: int = 0,
    batch_examples: int = 8,
) -> dict:
    """``{"acc", "acc_norm", "acc_token_norm", "n", "truncated_rows", "loss_sum",
    "loss_mean"}`` of ``examples`` under the model (see the module docstring; ``truncated_rows``
    counts the (example, ending) rows longer than the context, which lost old context tokens).
    ``seq_len`` 0: the longest row, rounded up to a multiple of 32 and capped at the model
    context."""
    graphdef, params = _split(model_or_split)
    context = nnx.merge(graphdef, params).config.context
    if not seq_len:
        longest = max(
            len(tokenizer.encode(ex.context)) + len(tokenizer.encode(" " + e))
            for ex in examples
            for e in ex.endings
        )
        seq_len = min(context, -(-(longest - 1) // 32) * 32)
    if seq_len > context:
        raise ValueError(f"seq_len={seq_len} exceeds the model context {context}")
    data = encode_hellaswag(examples, tokenizer, seq_len=seq_len, batch_examples=batch_examples)
    return score_encoded((graphdef, params), data, batch_examples=batch_examples)


def tokenizer_for(vocab_size: int):
    """Byte tokenizer for a byte-level model (vocab 256), tiktoken GPT-2 BPE otherwise."""
    from geomopt.lm._data import ByteTokenizer
    from geomopt.lm._prepare import GPT2Tokenizer

    return ByteTokenizer() if vocab_size == 256 else GPT2Tokenizer()


def hellaswag_evaluator(cfg, *, batch_examples: int = 8):
    """The training hook: reads ``cfg.hellaswag`` (first ``cfg.hellaswag_examples``; 0: all)
    once, tokenises it once (byte-level for vocab 256, GPT-2 BPE otherwise) and returns
    ``evaluate(trainer, params) -> {"hellaswag_acc", "hellaswag_acc_norm",
    "hellaswag_acc_token_norm"}`` (``trainer`` is unused; ``params`` is the model's
    ``nnx.Param`` state)."""

    from geomopt.lm._model import GPT2

    model_cfg = cfg.model
    examples = read_hellaswag(Path(cfg.hellaswag), limit=cfg.hellaswag_examples)
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: GPT2(model_cfg, rngs=nnx.Rngs(0))))
    tokenizer = tokenizer_for(model_cfg.vocab_size)
    longest = max(
        len(tokenizer.encode(ex.context)) + len(tokenizer.encode(" " + e))
        for ex in examples
        for e in ex.endings
    )
    seq_len = min(model_cfg.context, -(-(longest - 1) // 32) * 32)
    data = encode_hellaswag(examples, tokenizer, seq_len=seq_len, batch_examples=batch_examples)
    if data.n_truncated:
        print(
            f"hellaswag: {data.n_truncated} of {4 * len(examples)} rows are longer than the "
            f"model context {model_cfg.context} and lose their oldest context tokens",
            file=sys.stderr,
        )

    def evaluate(trainer, params) -> dict[str, float]:
        del trainer
        r = score_encoded((graphdef, params), data, batch_examples=batch_examples)
        return {
            "hellaswag_acc": r["acc"],
            "hellaswag_acc_norm": r["acc_norm"],
            "hellaswag_acc_token_norm": r["acc_token_norm"],
        }

    return evaluate
