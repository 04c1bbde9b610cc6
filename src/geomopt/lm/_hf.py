"""GPT-2 weights in the Hugging Face layout: ``config.json`` + ``model.safetensors``.

:func:`load_hf_gpt2` reads a local folder as written by ``GPT2LMHeadModel.save_pretrained`` or
downloaded from the hub (``openai-community/gpt2`` ... ``gpt2-xl``; keys with or without the
``transformer.`` prefix; sharded ``model.safetensors.index.json`` too) into :class:`GPT2`;
:func:`save_hf_gpt2` writes one back that ``transformers`` loads.

Layout facts used: HF GPT-2 stores its projections as ``Conv1D`` whose ``weight`` is
``(in_features, out_features)`` and computes ``x @ W + b`` — the same orientation as the
``kernel`` of ``nnx.Linear`` here, so kernels are copied as they are (the transpose that ports
to ``torch.nn.Linear`` need, e.g. nanoGPT's ``from_pretrained``, is exactly the absence of one
here). ``c_attn`` packs ``[q | k | v]`` along the output axis with heads contiguous inside each,
which is the ``(3, N, H)`` split :class:`CausalSelfAttention` uses. The output head is tied to
``wte``. ``activation_function`` ``gelu_new`` / ``gelu_pytorch_tanh`` map to ``gelu_tanh``,
``gelu`` to ``gelu_exact``.

HF GPT-2 always has biases: a model with ``bias=False`` is exported with zero biases (exact:
the same function), and an imported model always has ``bias=True``. A token table padded to
50304 rows is exported with GPT-2's 50257 (:func:`true_vocab_size`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["load_hf_gpt2", "save_hf_gpt2", "hf_config_to_gpt2"]

_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu_exact"}
_LAYER_KEYS = {
    # ours (path inside a block) -> HF suffix after "h.<i>."
    ("ln1", "scale"): "ln_1.weight",
    ("ln1", "bias"): "ln_1.bias",
    ("attn", "qkv", "kernel"): "attn.c_attn.weight",
    ("attn", "qkv", "bias"): "attn.c_attn.bias",
    ("attn", "proj", "kernel"): "attn.c_proj.weight",
    ("attn", "proj", "bias"): "attn.c_proj.bias",
    ("ln2", "scale"): "ln_2.weight",
    ("ln2", "bias"): "ln_2.bias",
    ("mlp", "fc", "kernel"): "mlp.c_fc.weight",
    ("mlp", "fc", "bias"): "mlp.c_fc.bias",
    ("mlp", "proj", "kernel"): "mlp.c_proj.weight",
    ("mlp", "proj", "bias"): "mlp.c_proj.bias",
}


def hf_config_to_gpt2(hf: dict, **overrides):
    """:class:`GPT2Config` of an HF GPT-2 ``config.json`` dict; refuses variants this model does
    not implement (cross-attention, inverse-layer-index attention scaling, other widths)."""
    from geomopt.lm._config import GPT2Config

    def bad(field, value, expected):
        raise ValueError(f"HF GPT-2 config: {field}={value!r}, expected {expected}")

    if hf.get("model_type", "gpt2") != "gpt2":
        bad("model_type", hf.get("model_type"), "'gpt2'")
    act = hf.get("activation_function", "gelu_new")
    if act not in _ACTIVATIONS:
        bad("activation_function", act, f"one of {sorted(_ACTIVATIONS)}")
    d = hf["n_embd"]
    if hf.get("n_inner") not in (None, 4 * d):
        bad("n_inner", hf.get("n_inner"), f"None or {4 * d}")
    if abs(hf.get("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12:
        bad("layer_norm_epsilon", hf.get("layer_norm_epsilon"), "1e-05")
    for flag, want in (
        ("scale_attn_weights", True),
        ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False),
        ("tie_word_embeddings", True),
    ):
        if hf.get(flag, want) != want:
            bad(flag, hf.get(flag), want)
    fields = dict(
        vocab_size=hf["vocab_size"],
        n_layer=hf["n_layer"],
        n_head=hf["n_head"],
        d_model=d,
        context=hf["n_positions"],
        bias=True,
        activation=_ACTIVATIONS[act],
        dropout=0.0,
    )
    fields.update(overrides)
    return GPT2Config(**fields)


def _read_tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(
            f"{folder}: no model.safetensors (or model.safetensors.index.json); expected a "
            "Hugging Face GPT-2 folder (e.g. save_pretrained output or a hub snapshot)"
        )
    tensors: dict[str, np.ndarray] = {}
    for name in files:
        for key, value in load_file(str(folder / name)).items():
            tensors[key.removeprefix("transformer.")] = value
    return tensors


def load_hf_gpt2(folder: str | os.PathLike, **config_overrides):
    """A :class:`GPT2` with the weights of the HF GPT-2 folder ``folder`` (float32 parameters).

    ``config_overrides`` replace fields of the derived config (e.g. ``dtype="bfloat16"``,
    ``loss_chunk=512``, ``dropout=0.1`` for fine-tuning); shape fields must match the weights.
    Raises ``ValueError`` naming any missing, unexpected or mis-shaped tensor.
    """
    import jax.numpy as jnp
    from flax import nnx

    from geomopt.lm._model import GPT2

    folder = Path(folder)
    hf = json.loads((folder / "config.json").read_text())
    cfg = hf_config_to_gpt2(hf, **config_overrides)
    tensors = _read_tensors(folder)
    # buffers of older checkpoints (causal mask), and an explicitly stored tied head
    for key in list(tensors):
        if key.endswith((".attn.bias", ".attn.masked_bias")) and tensors[key].ndim != 1:
            del tensors[key]
    head = tensors.pop("lm_head.weight", None)
    if head is not None and not np.array_equal(head, tensors.get("wte.weight")):
        raise ValueError(f"{folder}: lm_head.weight differs from wte.weight; expected tied weights")

    abstract = nnx.eval_shape(lambda: GPT2(cfg, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract, nnx.Param)
    pure = nnx.to_pure_dict(state)
    used = set()

    def take(hf_key, like):
        if hf_key not in tensors:
            raise ValueError(f"{folder}: tensor {hf_key!r} missing from the checkpoint")
        value = tensors[hf_key]
        if tuple(value.shape) != tuple(like.shape):
            raise ValueError(
                f"{folder}: tensor {hf_key!r} has shape {tuple(value.shape)}, expected "
                f"{tuple(like.shape)} for config {cfg}"
            )
        used.add(hf_key)
        return jnp.asarray(value, jnp.float32)

    pure["wte"] = take("wte.weight", pure["wte"])
    pure["wpe"] = take("wpe.weight", pure["wpe"])
    pure["ln_f"]["scale"] = take("ln_f.weight", pure["ln_f"]["scale"])
    pure["ln_f"]["bias"] = take("ln_f.bias", pure["ln_f"]["bias"])
    for i in range(cfg.n_layer):
        block = pure["blocks"][i]
        for path, suffix in _LAYER_KEYS.items():
            node = block
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = take(f"h.{i}.{suffix}", node[path[-1]])
    extra = sorted(set(tensors) - used)
    if extra:
        raise ValueError(f"{folder}: unexpected tensors {extra[:5]} (of {len(extra)})")
    nnx.replace_by_pure_dict(state, pure)
    return nnx.merge(graphdef, state)


GPT2_VOCAB = 50257
"""GPT-2's BPE vocabulary; models pad it to a multiple of 64 (50304) for speed."""


def true_vocab_size(vocab_size: int) -> int:
    """The vocabulary a model's embedding table stands for: GPT-2's 50257 for a table padded up
    to the next multiple of 64 (50304), the table's own size otherwise."""
    padded = -(-GPT2_VOCAB // 64) * 64
    return GPT2_VOCAB if vocab_size == padded else vocab_size


def save_hf_gpt2(model, folder: str | os.PathLike, *, vocab_size: int | None = None) -> Path:
    """Write ``model`` (a :class:`GPT2`) as ``folder/config.json`` + ``model.safetensors`` in the
    HF GPT-2 layout (float32; zero biases when the model has none). Returns the folder.

    ``vocab_size``: the rows of the token table written (the rest is padding no token id
    reaches); default :func:`true_vocab_size`, so a 50304-row GPT-2 table is written as the
    tokenizer's 50257, which ``transformers`` and its GPT-2 tokenizer expect."""
    from flax import nnx
    from safetensors.numpy import save_file

    cfg = model.config
    vocab = true_vocab_size(cfg.vocab_size) if vocab_size is None else int(vocab_size)
    if not 1 <= vocab <= cfg.vocab_size:
        raise ValueError(f"vocab_size={vocab}: expected 1 .. the model's {cfg.vocab_size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))

    def arr(x):
        return np.ascontiguousarray(np.asarray(x, np.float32))

    def get(node, path, shape):
        for p in path:
            if node is None or p not in node:
                return np.zeros(shape, np.float32)
            node = node[p]
        return arr(node)

    d = cfg.d_model
    widths = {"ln1": d, "ln2": d, "qkv": 3 * d, "proj": d, "fc": 4 * d}
    out = {
        "transformer.wte.weight": arr(pure["wte"])[:vocab],
        "transformer.wpe.weight": arr(pure["wpe"]),
        "transformer.ln_f.weight": arr(pure["ln_f"]["scale"]),
        "transformer.ln_f.bias": get(pure["ln_f"], ("bias",), (d,)),
    }
    for i in range(cfg.n_layer):
        block = pure["blocks"][i]
        for path, suffix in _LAYER_KEYS.items():
            shape = (widths[path[-2]],)
            out[f"transformer.h.{i}.{suffix}"] = get(block, path, shape)
    save_file(out, str(folder / "model.safetensors"), metadata={"format": "pt"})
    act = {"gelu_tanh": "gelu_new", "gelu_exact": "gelu"}[cfg.activation]
    hf = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": vocab,
        "n_positions": cfg.context,
        "n_embd": d,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_inner": None,
        "activation_function": act,
        "layer_norm_epsilon": 1e-5,
        "resid_pdrop": cfg.dropout,
        "embd_pdrop": cfg.dropout,
        "attn_pdrop": 0.0,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": min(50256, vocab - 1),
        "eos_token_id": min(50256, vocab - 1),
        "dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
    return folder
