"""Text generation from a GPT-2: batched, with a key/value cache, one jitted token step.

:func:`sample` feeds the shortest prompt's tokens in one prefill call, then runs the jitted
single-token step :func:`_decode_step` once per position: each call embeds one token per row
at position ``pos`` (a traced scalar), attends to the cached keys/values, writes the next
token — the prompt's own while a row is still inside its prompt, a sampled one afterwards —
into the token buffer, and returns the updated cache. Temperature, top-k and top-p are traced
arrays too, and the token buffer always spans the model context, so the step compiles once
per (model, batch) and never per token, prompt length, ``max_new_tokens`` or setting (tested
with a trace counter).

Sampling: logits / temperature, then top-k (keep the ``k`` largest; 0: all), then top-p
(nucleus: the smallest set of most likely tokens whose probability reaches ``p``; 1: all),
then a categorical draw. Temperature 0 is greedy (argmax).

Loading for the tools: :func:`load_model` reads an HF GPT-2 folder or a pretraining run folder
(its newest orbax checkpoint), :func:`tokenizer_for_model` picks bytes or tiktoken GPT-2.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = ["sample", "load_model", "filter_logits"]

TRACES = {"decode_step": 0, "prefill": 0}
"""How often the jitted functions were traced (tests check one trace for many tokens)."""


def filter_logits(logits_BxV, temperature, top_k, top_p):
    """Logits divided by ``temperature`` with everything outside the top-k / top-p set at -inf.
    ``top_k`` (int, 0: off) and ``top_p`` (float, 1: off) may be traced."""
    V = logits_BxV.shape[-1]
    x = logits_BxV.astype(jnp.float32) / jnp.maximum(temperature, 1e-6)
    sorted_BxV = jnp.sort(x, axis=-1)[:, ::-1]
    k = jnp.where(top_k > 0, jnp.minimum(top_k, V), V)
    kth = jnp.take_along_axis(sorted_BxV, jnp.broadcast_to(k - 1, (x.shape[0], 1)), axis=-1)
    probs = jax.nn.softmax(jnp.where(sorted_BxV >= kth, sorted_BxV, -jnp.inf), axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass of the strictly more likely tokens
    keep_sorted = (before < top_p) & (sorted_BxV >= kth)
    # the smallest kept value is the threshold (ties with it are kept too)
    thresh = jnp.min(jnp.where(keep_sorted, sorted_BxV, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(x >= thresh, x, -jnp.inf)


def _choose(logits_BxV, key, temperature, top_k, top_p):
    filtered = filter_logits(logits_BxV, temperature, top_k, top_p)
    drawn = jax.random.categorical(key, filtered, axis=-1)
    greedy = jnp.argmax(logits_BxV, axis=-1)
    return jnp.where(temperature > 0, drawn, greedy).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=0, donate_argnums=(2,))
def _prefill(graphdef, params, cache, tokens_BxP):
    TRACES["prefill"] += 1
    model = nnx.merge(graphdef, params)
    _, cache = model.decode(tokens_BxP, cache, 0)
    return cache


@functools.partial(jax.jit, static_argnums=0, donate_argnums=(2, 3))
def _decode_step(
    graphdef, params, cache, buf_BxS, in_prompt_BxS, pos, key, temperature, top_k, top_p
):
    """Consume token ``pos`` of every row, write token ``pos + 1`` (prompt or sampled)."""
    TRACES["decode_step"] += 1
    model = nnx.merge(graphdef, params)
    tok_Bx1 = jax.lax.dynamic_slice_in_dim(buf_BxS, pos, 1, axis=1)
    logits_Bx1xV, cache = model.decode(tok_Bx1, cache, pos)
    step_key = jax.random.fold_in(key, pos)
    nxt_B = _choose(logits_Bx1xV[:, 0], step_key, temperature, top_k, top_p)
    forced_B = jax.lax.dynamic_slice_in_dim(buf_BxS, pos + 1, 1, axis=1)[:, 0]
    prompt_B = jax.lax.dynamic_slice_in_dim(in_prompt_BxS, pos + 1, 1, axis=1)[:, 0]
    nxt_B = jnp.where(prompt_B, forced_B, nxt_B)
    buf_BxS = jax.lax.dynamic_update_slice_in_dim(buf_BxS, nxt_B[:, None], pos + 1, axis=1)
    return cache, buf_BxS


def sample(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    key: jax.Array,
) -> list[np.ndarray]:
    """Continue each prompt (a sequence of token ids; lengths may differ) by ``max_new_tokens``
    tokens; returns the new tokens of each row (``int32`` arrays). ``model`` is a
    :class:`GPT2` (dropout off). Needs ``max(len(prompt)) + max_new_tokens <= context``."""
    cfg = model.config
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("sample: every prompt needs at least one token")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}: expected >= 1")
    if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
        raise ValueError(
            f"temperature={temperature}, top_k={top_k}, top_p={top_p}: expected temperature >= 0,"
            " top_k >= 0, 0 < top_p <= 1"
        )
    lens = [len(p) for p in prompts]
    S = max(lens) + max_new_tokens
    if S > cfg.context:
        raise ValueError(
            f"longest prompt {max(lens)} + max_new_tokens {max_new_tokens} = {S} exceeds the "
            f"model context {cfg.context}: shorten the prompt to at most "
            f"{max(cfg.context - max_new_tokens, 0)} tokens or ask for at most "
            f"{max(cfg.context - max(lens), 0)} new tokens"
        )
    for p in prompts:
        bad = [t for t in p if not 0 <= int(t) < cfg.vocab_size]
        if bad:
            raise ValueError(
                f"prompt token {bad[0]} outside the vocabulary 0..{cfg.vocab_size - 1}"
            )
    B = len(prompts)
    # the token buffer always spans the whole context, so one compiled step serves every
    # prompt length and max_new_tokens (the loop stops at S)
    buf = np.zeros((B, cfg.context), np.int32)
    in_prompt = np.zeros((B, cfg.context), bool)
    for i, p in enumerate(prompts):
        buf[i, : len(p)] = np.asarray(p, np.int32)
        in_prompt[i, : len(p)] = True
    graphdef, params = nnx.split(model, nnx.Param)[:2]
    cache = model.init_cache(B)
    start = min(lens) - 1  # positions 0 .. start-1 are shared prompt tokens: one prefill call
    if start > 0:
        cache = _prefill(graphdef, params, cache, jnp.asarray(buf[:, :start]))
    buf_d, in_prompt_d = jnp.asarray(buf), jnp.asarray(in_prompt)
    t = jnp.float32(temperature)
    k = jnp.int32(top_k)
    p = jnp.float32(top_p)
    for pos in range(start, S - 1):
        cache, buf_d = _decode_step(
            graphdef, params, cache, buf_d, in_prompt_d, jnp.int32(pos), key, t, k, p
        )
    out = np.asarray(buf_d)
    return [out[i, n : n + max_new_tokens] for i, n in enumerate(lens)]


def load_model(source: str | os.PathLike, *, step: int | None = None, **config_overrides):
    """A :class:`GPT2` from ``source``: a Hugging Face GPT-2 folder (``config.json`` with
    ``model_type`` gpt2 + ``model.safetensors``) or a pretraining run folder (its
    ``config.json`` model config and the parameters of checkpoint ``step``, default the newest,
    under ``checkpoints/``)."""
    import json

    source = Path(source)
    cfg_file = source / "config.json"
    if not cfg_file.exists():
        raise FileNotFoundError(
            f"{source}: no config.json; expected a pretraining run folder or an HF GPT-2 folder"
        )
    raw = json.loads(cfg_file.read_text())
    if raw.get("model_type") == "gpt2":
        from geomopt.lm._hf import load_hf_gpt2

        return load_hf_gpt2(source, **config_overrides)
    return _load_run_checkpoint(source, raw, step, config_overrides)


def _load_run_checkpoint(run_dir: Path, raw: dict, step, config_overrides):
    import dataclasses

    import orbax.checkpoint as ocp

    from geomopt.lm._config import GPT2Config
    from geomopt.lm._model import GPT2

    values = raw.get("config", raw)
    if "model" not in values:
        raise ValueError(f"{run_dir}/config.json: no model config; not a pretraining run folder")
    fields = {f.name for f in dataclasses.fields(GPT2Config)}
    model_cfg = GPT2Config(**{k: v for k, v in values["model"].items() if k in fields})
    model_cfg = dataclasses.replace(model_cfg, dropout=0.0, **config_overrides)
    ckpt_dir = (run_dir / "checkpoints").resolve()
    steps = sorted(int(p.name) for p in ckpt_dir.glob("*") if p.name.isdigit())
    if not steps:
        raise FileNotFoundError(f"{ckpt_dir}: no checkpoints")
    step = steps[-1] if step is None else step
    if step not in steps:
        raise FileNotFoundError(f"{ckpt_dir}: no checkpoint {step}; have {steps}")
    abstract = nnx.eval_shape(lambda: GPT2(model_cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract, nnx.Param)
    leaves, treedef = jax.tree.flatten(state)
    with ocp.CheckpointManager(ckpt_dir) as mngr:
        restored = mngr.restore(step, args=ocp.args.StandardRestore())
    params = restored["params"]
    if len(params) != len(leaves) or any(
        tuple(np.shape(a)) != tuple(b.shape) for a, b in zip(params, leaves, strict=True)
    ):
        raise ValueError(
            f"{ckpt_dir}/{step}: parameter shapes do not match the run's model config {model_cfg}"
        )
    state = jax.tree.unflatten(treedef, [jnp.asarray(a, jnp.float32) for a in params])
    return nnx.merge(graphdef, state)


def tokenizer_for_model(vocab_size: int):
    """Bytes for a byte-level model (vocab 256), tiktoken's GPT-2 BPE otherwise (its error says
    how to provide the BPE file offline)."""
    from geomopt.lm._hellaswag import tokenizer_for

    return tokenizer_for(vocab_size)


_TIKTOKEN_GPT2_FILES = (
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
    "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
)


def tiktoken_gpt2_missing() -> str | None:
    """``None`` when tiktoken's GPT-2 BPE files are in its local cache (so no download is
    attempted); otherwise a message saying where tiktoken looks and how to put them there."""
    import hashlib
    import tempfile

    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    cache = cache or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    names = [hashlib.sha1(url.encode()).hexdigest() for url in _TIKTOKEN_GPT2_FILES]
    missing = [n for n in names if not os.path.exists(os.path.join(cache, n))]
    if not missing:
        return None
    listing = "\n".join(
        f"  {url}\n    -> {os.path.join(cache, n)}"
        for url, n in zip(_TIKTOKEN_GPT2_FILES, names, strict=True)
    )
    return (
        f"tiktoken's GPT-2 BPE files are not in its cache {cache} (TIKTOKEN_CACHE_DIR), and "
        "tiktoken would download them (no network here). To make them available: on a machine "
        'with network run\n  TIKTOKEN_CACHE_DIR=/some/dir python -c "import tiktoken; '
        "tiktoken.get_encoding('gpt2')\"\nand copy /some/dir here, then set "
        "TIKTOKEN_CACHE_DIR to it; or download each file below to the path shown:\n" + listing
    )
