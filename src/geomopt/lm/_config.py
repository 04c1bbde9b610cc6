"""Configs of GPT-2 pretraining: model shape, optimiser, data and the training run.

This module imports neither JAX nor Flax, so experiment declarations and ``--help`` that need
these dataclasses stay instant; the code that uses them lives in ``_model`` and ``_train``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["GPT2Config", "presets", "OptimConfig", "DataConfig", "TrainConfig", "OptimName"]


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    """Shape and numerics of a GPT-2 model."""

    vocab_size: int = 50304
    """Vocabulary size (GPT-2 BPE has 50257 tokens; 50304 pads it to a multiple of 64)."""
    n_layer: int = 12
    """Number of transformer blocks."""
    n_head: int = 12
    """Attention heads per block; must divide d_model."""
    d_model: int = 768
    """Residual-stream width."""
    context: int = 1024
    """Maximum sequence length (number of learned position embeddings)."""
    bias: bool = False
    """Biases in the linear layers and LayerNorms (GPT-2 original: True; the paper: False)."""
    dropout: float = 0.0
    """Dropout rate on attention output, MLP output and embeddings (active when a key is passed)."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Compute dtype of the matmuls (auto: bfloat16 on accelerators, float32 on CPU);
    parameters and optimiser state stay float32 either way."""
    activation: Literal["gelu_tanh", "gelu_exact"] = "gelu_tanh"
    """MLP nonlinearity: gelu_tanh (the tanh approximation, released GPT-2 / HF "gelu_new") or
    gelu_exact (the erf form, PyTorch's default nn.GELU, used by the paper's code)."""
    loss_chunk: int = 1024
    """Tokens per chunk of the output-head cross-entropy (lm._loss): the B x T x V logits are
    never held at once; 0 computes the full logits (the reference path)."""
    attn_block: int = 128
    """Query block of the causal attention without a cache: each block of attn_block queries
    attends only to its causal prefix of keys (exact; skips the fully masked key blocks, about
    half the attention work at T = 1024). Sequences of at most attn_block tokens, and 0, use
    jax.nn.dot_product_attention on the whole sequence."""
    attention: Literal["blocked", "xla", "cudnn"] = "blocked"
    """Attention without a cache: blocked (the query blocks of attn_block above); xla or cudnn:
    jax.nn.dot_product_attention on the whole sequence with that implementation (cudnn: the
    fused cuDNN kernel, NVIDIA GPUs with bfloat16/float16 compute only)."""

    def __post_init__(self):
        if self.activation not in ("gelu_tanh", "gelu_exact"):
            raise ValueError(
                f"GPT2Config.activation={self.activation!r}: expected gelu_tanh or gelu_exact"
            )
        if not isinstance(self.loss_chunk, int) or self.loss_chunk < 0:
            raise ValueError(f"GPT2Config.loss_chunk={self.loss_chunk!r}: expected an integer >= 0")
        if isinstance(self.attn_block, bool) or not isinstance(self.attn_block, int):
            raise ValueError(f"GPT2Config.attn_block={self.attn_block!r}: expected an integer >= 0")
        if self.attn_block < 0:
            raise ValueError(f"GPT2Config.attn_block={self.attn_block!r}: expected an integer >= 0")
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "context"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPT2Config.{name}={value!r}: expected a positive integer")
        if self.d_model % self.n_head:
            raise ValueError(
                f"GPT2Config: d_model={self.d_model} is not divisible by n_head={self.n_head}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPT2Config.dropout={self.dropout}: expected 0 <= dropout < 1")
        if self.attention not in ("blocked", "xla", "cudnn"):
            raise ValueError(
                f"GPT2Config.attention={self.attention!r}: expected blocked, xla or cudnn"
            )
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"GPT2Config.dtype={self.dtype!r}: expected auto, float32 or bfloat16")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def compute_dtype(self):
        """The matmul dtype as a JAX dtype (imports JAX; ``auto`` asks for the backend)."""
        import jax
        import jax.numpy as jnp

        if self.dtype == "auto":
            return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
        return jnp.bfloat16 if self.dtype == "bfloat16" else jnp.float32


presets: dict[str, GPT2Config] = {
    "124M": GPT2Config(),
    "gpt2-original": GPT2Config(vocab_size=50257, bias=True),
    "cpu-demo": GPT2Config(vocab_size=256, n_layer=4, n_head=4, d_model=256, context=256),
    "demo-quick": GPT2Config(vocab_size=256, n_layer=2, n_head=4, d_model=128, context=64),
    "tiny": GPT2Config(vocab_size=256, n_layer=2, n_head=2, d_model=32, context=32),
}
"""Named configs. ``124M``: GPT-2 small as in the paper (no biases, vocab padded to 50304);
``gpt2-original``: the released GPT-2 small (biases, vocab 50257; 124,439,808 parameters);
``cpu-demo``/``demo-quick``: byte-level models for the offline corpus; ``tiny``: tests."""


OptimName = Literal["adamw", "sgd", "sign_sgd", "signum", "muon"]


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """Optimiser, learning-rate schedule and clipping."""

    algorithm: str = "adamw"
    """adamw; sgd (momentum, coupled L2 decay); sign_sgd; signum; muon (hidden matrices) with
    AdamW for embeddings, gains and biases; or any other name registered in
    geomopt.optim.OPTIMIZERS (it gets the fields below that its factory takes: momentum,
    nesterov, b1, b2, weight_decay with mask = the hidden matrices). (Not "name": that is the
    runner's option.)"""
    lr: float = 1e-3
    """Peak learning rate (for muon: of the Muon part)."""
    weight_decay: float = 0.0
    """Weight decay on hidden weight matrices only (decoupled; coupled L2 for sgd)."""
    momentum: float = 0.9
    """Momentum of sgd / signum / muon."""
    nesterov: bool = False
    """Nesterov momentum for sgd and muon."""
    b1: float = 0.9
    """AdamW beta1 (also muon's AdamW part)."""
    b2: float = 0.95
    """AdamW beta2 (also muon's AdamW part)."""
    adam_lr: float = 3e-3
    """muon only: peak learning rate of the AdamW part (embeddings, gains, biases)."""
    schedule: Literal["one_cycle", "wsd", "cosine", "constant"] = "one_cycle"
    """one_cycle: the paper's (cosine from lr/100 up over warmup_frac, cosine back to lr/100);
    wsd: warmup-stable-decay; cosine: linear warm-up then cosine to zero."""
    warmup_frac: float = 0.1
    """Fraction of the steps spent warming up."""
    decay_frac: float = 0.2
    """wsd only: fraction of the steps spent in the final linear decay."""
    clip: float = 1.0
    """Global gradient-norm clipping threshold; 0 disables clipping."""
    qk_clip: float = 0.0
    """QK-clip threshold tau (MuonClip, Kimi K2; geomopt.optim.qk_clip): after each step the
    query and key weights of every head whose largest attention logit in the batch passed tau
    are scaled by sqrt(tau / logit), with any algorithm; for muon_clip it sets that optimiser's
    own threshold (else 100). 0 disables. Costs one more forward score product per layer."""


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the tokens come from."""

    source: Literal["auto", "offline", "shards"] = "auto"
    """auto: the token files of train/val when either is given, else the offline corpus;
    offline: the Python standard library's sources, byte-level (vocab 256), built on first
    use; shards: token files given by train/val (prepare them with prepare_data.py). train/val
    with an explicit source=offline are refused, not ignored."""
    train: str = ""
    """Glob of training token files (shards or nanoGPT .bin); given, the run trains on them."""
    val: str = ""
    """Glob of validation token files (needed with train)."""
    format: Literal["auto", "shard", "llama3", "nanogpt"] = "auto"
    """Token file format. auto reads the header's magic number: 20240520 GPT-2 shards (uint16),
    20240801 Llama-3 shards (uint32), and refuses any other; nanogpt: a headerless uint16
    array (nanoGPT's train.bin / val.bin)."""
    offline_dir: str = ""
    """Folder for the offline corpus shards (train.bin, val.bin); empty uses
    $XDG_CACHE_HOME/geomopt/offline_stdlib_<bytes> (XDG_CACHE_HOME defaults to ~/.cache)."""
    offline_bytes: int = 8_000_000
    """Bytes of standard-library text in the offline corpus."""

    @property
    def resolved_source(self) -> str:
        """``"shards"`` or ``"offline"``: what ``source`` means for this config (auto: shards
        when train or val is given)."""
        if self.source == "auto":
            return "shards" if (self.train or self.val) else "offline"
        return self.source


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """A GPT-2 pretraining run (``uv run experiments/signsgd/pretrain.py PRESET --help``).

    The run folder, resuming and overwriting belong to the experiment runner
    (:mod:`geomopt.experiment`); checkpoints live in ``<run folder>/checkpoints``.
    """

    model: GPT2Config = presets["tiny"]
    """Model shape and compute dtype."""
    optim: OptimConfig = OptimConfig()
    """Optimiser, schedule, clipping."""
    data: DataConfig = DataConfig()
    """Token source."""
    seq_len: int = 0
    """Training sequence length; 0 uses the model context."""
    batch_size: int = 16
    """Global batch in sequences per optimiser step (summed over accumulation and devices)."""
    grad_accum: int = 1
    """Micro-batches accumulated per step (batch_size must be divisible by it)."""
    steps: int = 100
    """Optimiser steps."""
    seed: int = 0
    """Seed of the initial parameters, the batch order and dropout."""
    eval_every: int = 50
    """Validate every this many steps (and at step 0 and the end); 0: only at the end."""
    eval_batches: int = 8
    """Number of fixed validation batches (the paper: 64); 0 skips validation."""
    eval_batch_size: int = 0
    """Sequences per validation batch; 0 uses the micro-batch size."""
    hellaswag: str = ""
    """HellaSwag jsonl file (the public format) to score during training; empty: off."""
    hellaswag_every: int = 0
    """Evaluate HellaSwag every this many steps (and at the end); 0: with every validation."""
    hellaswag_examples: int = 0
    """HellaSwag examples scored per evaluation (the first ones of the file); 0: all."""
    log_every: int = 10
    """One console line (loss, tokens/s, MFU, lr, ETA) and throughput metrics every this many
    steps; losses are logged every step."""
    ckpt_every: int = 0
    """Checkpoint every this many steps (and always at the end); 0: only at the end."""
    ckpt_keep: int = 2
    """Checkpoints kept on disk (the newest)."""
    noise_every: int = 0
    """Measure the gradient-noise density phi at step 0 and every this many steps; 0: never."""
    noise_samples: int = 16
    """Mini-batch gradients drawn per noise-density measurement (the paper: up to 512)."""
    noise_batch_size: int = 0
    """Sequences per noise-density mini-batch; 0 uses the micro-batch size."""
    n_devices: int = 0
    """Devices on the data axis; 0 uses all."""
    fsdp: bool = False
    """Shard parameters and optimiser state over the data axis (else replicate them)."""
    distributed: bool = False
    """Call jax.distributed.initialize() first (multi-host launches: SLURM, TPU pods, ...)."""
    peak_flops: float = 0.0
    """Peak FLOP/s of one device for MFU; 0: the data-sheet dense bf16 peak of a known GPU/TPU
    (H100/H200/B200/A100/L40S/L4/A10, TPU v4/v5e/v5p/v6e) from its device kind, else MFU is
    shown as n/a (a CPU has no one documented peak)."""
    tensorboard: bool = True
    """Write the metrics as TensorBoard event files into <run folder>/tensorboard."""
    wandb: bool = False
    """Also log to Weights & Biases (needs the wandb package, which geomopt does not install)."""
    wandb_project: str = "geomopt"
    """Weights & Biases project."""
    wandb_mode: Literal["offline", "online"] = "offline"
    """Weights & Biases mode; offline writes into <run folder>/wandb and needs no network."""

    @property
    def sequence_length(self) -> int:
        return self.seq_len or self.model.context

    @property
    def micro_batch(self) -> int:
        return self.batch_size // self.grad_accum
