"""``signsgd/pretrain``: GPT-2 pretraining with SGD / SignSGD / Signum / AdamW / Muon.

    uv run experiments/signsgd/pretrain.py smoke                 # seconds on a CPU
    uv run experiments/signsgd/pretrain.py                       # quick: the CPU demo model
    uv run experiments/signsgd/pretrain.py paper                 # the paper's SignSGD run (GPU)
    uv run experiments/signsgd/pretrain.py paper_sgd             # the paper's SGD arm
    uv run experiments/signsgd/pretrain.py paper_noise           # the paper's phi run (SGD)
    uv run experiments/signsgd/pretrain.py speedrun              # GPT-2 124M, Muon, FineWeb

Rerunning the same command resumes an interrupted run from its newest checkpoint
(``<out>/signsgd/pretrain/<preset>/checkpoints``); the runner refuses a finished run or one
started with other settings, and only ``--overwrite`` deletes checkpoints.

Module-level imports are light (no JAX) so ``--help`` is instant.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.experiment import Experiment, Run, figure_path
from geomopt.lm._config import DataConfig, OptimConfig, TrainConfig, presets

__all__ = ["EXPERIMENT", "PRESETS", "run", "plot", "validate"]

GPT2_124M_PAPER = dataclasses.replace(presets["124M"], dtype="bfloat16", activation="gelu_exact")
"""The paper's GPT-2 small: no biases, vocab 50304, bf16 compute, exact (erf) GELU as PyTorch's
default ``nn.GELU`` in the paper's code."""

_C4 = DataConfig(source="shards", train="data/c4/c4_train_*.bin", val="data/c4/c4_val_*.bin")

_PAPER = TrainConfig(
    model=GPT2_124M_PAPER,
    optim=OptimConfig(
        algorithm="sign_sgd", lr=1e-4, weight_decay=0.1, schedule="one_cycle", clip=1.0
    ),
    data=_C4,
    seq_len=512,
    batch_size=512,
    grad_accum=8,
    steps=10_000,
    eval_every=100,
    eval_batches=64,
    log_every=10,
    ckpt_every=500,
)
"""The paper's SignSGD run: lr 1e-4, no momentum, decoupled weight decay 0.1 on hidden
matrices, clipping 1.0, one-cycle schedule, validation every 100 steps on 64 fixed batches.
phi is not measured along it: the paper measures phi on a separate SGD run (``paper_noise``)."""

_SGD = OptimConfig(algorithm="sgd", lr=1e-2, momentum=0.9, weight_decay=0.1, clip=1.0)

PRESETS: dict[str, TrainConfig] = {
    "smoke": TrainConfig(
        model=presets["tiny"],
        optim=OptimConfig(algorithm="adamw", lr=3e-3),
        data=DataConfig(offline_bytes=1_000_000),
        batch_size=8,
        steps=6,
        eval_every=3,
        eval_batches=1,
        log_every=2,
        ckpt_every=3,
    ),
    "quick": TrainConfig(
        model=presets["demo-quick"],
        optim=OptimConfig(algorithm="sign_sgd", lr=1e-3, weight_decay=0.1),
        data=DataConfig(offline_bytes=4_000_000),
        batch_size=16,
        steps=200,
        eval_every=50,
        eval_batches=4,
        log_every=10,
        ckpt_every=100,
        noise_every=100,
        noise_samples=16,
    ),
    "cpu-demo": TrainConfig(
        model=presets["cpu-demo"],
        optim=OptimConfig(algorithm="sign_sgd", lr=1e-3, weight_decay=0.1),
        data=DataConfig(offline_bytes=8_000_000),
        batch_size=16,
        steps=300,
        eval_every=50,
        eval_batches=8,
        log_every=10,
        ckpt_every=100,
        noise_every=100,
        noise_samples=16,
    ),
    "paper": _PAPER,
    "paper_sgd": dataclasses.replace(_PAPER, optim=_SGD),
    "paper_noise": dataclasses.replace(
        _PAPER,
        optim=dataclasses.replace(_SGD, schedule="cosine", warmup_frac=0.1),
        noise_every=100,
        noise_samples=512,
        noise_batch_size=32,
    ),
    "speedrun": TrainConfig(
        model=dataclasses.replace(presets["124M"], dtype="bfloat16"),
        optim=OptimConfig(
            algorithm="muon",
            lr=0.02,
            momentum=0.95,
            nesterov=True,
            adam_lr=0.006,
            b1=0.9,
            b2=0.95,
            schedule="wsd",
            warmup_frac=0.0,
            decay_frac=0.3,
            clip=0.0,
        ),
        data=DataConfig(
            source="shards",
            train="data/fineweb10B/fineweb_train_*.bin",
            val="data/fineweb10B/fineweb_val_*.bin",
        ),
        seq_len=1024,
        batch_size=512,
        grad_accum=8,
        steps=5_100,
        eval_every=250,
        eval_batches=20,
        log_every=10,
        ckpt_every=500,
    ),
}

NOTES = {
    "smoke": "tiny GPT (2 layers, width 32), offline bytes, 6 AdamW steps; seconds on a CPU",
    "quick": (
        "a small GPT (2 layers, width 128, context 64) on offline bytes, SignSGD 1e-3, 200 "
        "steps, phi every 100 steps; a few minutes on 2 CPU cores"
    ),
    "cpu-demo": (
        "the CPU demo model (4 layers, width 256, context 256) on offline bytes, SignSGD 1e-3, "
        "300 steps, phi every 100 steps; measured 16-18 s/step on 2 cores shared with other "
        "jobs (load ~20), i.e. about 1.5 h"
    ),
    "paper": (
        "the paper's SignSGD run: GPT-2 124M (erf GELU, bf16), C4 shards, seq 512, 512 seqs/step, "
        "10k steps, lr 1e-4, wd 0.1, one-cycle; needs a GPU and prepared shards"
    ),
    "paper_sgd": "the paper's SGD arm: as paper with momentum SGD 0.9, lr 1e-2, coupled L2 0.1",
    "paper_noise": (
        "the paper's phi run: SGD settings with a cosine schedule (1000 warm-up steps), phi "
        "every 100 steps from 512 mini-batch gradients of 32 sequences"
    ),
    "speedrun": "community GPT-2 124M Muon recipe on FineWeb-10B shards (seq 1024, 512 seqs/step)",
}


def validate(cfg: TrainConfig) -> None:
    """Check every field before the run folder exists (:func:`geomopt.lm.check_train_config`),
    then the device count: ``n_devices`` at most the visible devices, and the batches divisible
    by the devices of the data axis. With ``distributed`` it first starts ``jax.distributed``
    here, before the runner records the devices (it must precede any other JAX call), from the
    launch settings in the environment (:mod:`geomopt.lm._distributed`)."""
    import jax

    from geomopt.lm._config_checks import check_train_config

    check_train_config(cfg)
    if cfg.distributed:
        from geomopt.lm._distributed import start_distributed

        start_distributed()
    visible = jax.device_count()
    if cfg.n_devices > visible:
        raise ValueError(
            f"n_devices={cfg.n_devices}: expected at most the {visible} visible devices"
        )
    check_train_config(cfg, cfg.n_devices or visible)


def _hellaswag_evaluator(cfg: TrainConfig):
    """``(trainer, params) -> {"hellaswag_acc", "hellaswag_acc_norm",
    "hellaswag_acc_token_norm"}`` (:mod:`geomopt.lm._hellaswag`), or None when
    ``cfg.hellaswag`` is empty."""
    if not cfg.hellaswag:
        return None
    from geomopt.lm._hellaswag import hellaswag_evaluator

    return hellaswag_evaluator(cfg)


HEADLINE_KEYS = (
    "final_val_loss",
    "final_val_acc",
    "final_train_loss",
    "final_hellaswag_acc",
    "final_hellaswag_acc_norm",
    "final_hellaswag_acc_token_norm",
    "final_phi",
    "tokens",
    "tokens_per_s",
    "mfu",
    "params",
    "max_attn_logit",
)


def run(cfg: TrainConfig, run: Run) -> dict[str, float]:
    from geomopt.lm._distributed import stop_watch
    from geomopt.lm._train import train

    try:
        summary = train(cfg, run, hellaswag=_hellaswag_evaluator(cfg))
    finally:
        stop_watch()
    return {k: summary[k] for k in HEADLINE_KEYS if k in summary}


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``pretrain_loss[_<run>].png``: train and validation loss vs tokens, and phi vs step
    when the run measured it."""
    import numpy as np

    from geomopt.experiment import read_run
    from geomopt.plotting import color, figure, save

    record = read_run(run_dir)
    rows = record.metrics
    train = np.asarray([(r["tokens"], r["loss"]) for r in rows if "loss" in r], float)
    val = np.asarray([(r["tokens"], r["val_loss"]) for r in rows if "val_loss" in r], float)
    phi = np.asarray([(r["step"], r["phi"]) for r in rows if "phi" in r], float)
    cfg = record.config_values
    optim_name = cfg["optim"]["algorithm"]
    fig, axes = figure(2 if phi.size else 1, 1, width=3.8, height=2.9)
    ax = axes[0, 0] if phi.size else axes  # figure() returns one Axes for a single panel
    if train.size:
        ax.plot(*train.T, color=color(optim_name), alpha=0.45, label="train (per step)")
    if val.size:
        ax.plot(*val.T, color=color(optim_name), marker="o", markersize=3, label="validation")
    ax.set(xlabel="training tokens", ylabel="loss (nats/token)")
    ax.set_title(f"{optim_name}, lr {cfg['optim']['lr']:g}")
    ax.legend(loc="best")
    if phi.size:
        ax2 = axes[0, 1]
        ax2.plot(*phi.T, color=color(optim_name), marker="o", markersize=3)
        ax2.set(xlabel="step", ylabel=r"noise density $\phi$", yscale="log")
        ax2.set_xticks(phi[:, 0])
        ax2.set_title(r"$\phi = \|\sigma\|_1^2 / (M \|\sigma\|_2^2)$")
    return [save(fig, figure_path(run_dir, out, "pretrain_loss"))]


EXPERIMENT = Experiment(
    name="signsgd/pretrain",
    description="GPT-2 pretraining (SignSGD paper's GPT-2 run; Muon speedrun recipe)",
    presets=PRESETS,
    notes=NOTES,
    run=run,
    plot=plot,
    validate=validate,
    resumable=True,
    figures_dir="experiments/signsgd/figures",
    key_numbers=("final_val_loss", "final_train_loss", "final_phi", "tokens_per_s", "mfu"),
    paper={"final_phi": 0.03},
    paper_source="paper: phi of GPT-2 124M on C4 falls from ~0.3 to ~0.03 (its SGD noise run, "
    "preset paper_noise; other presets train smaller models)",
    seconds={"smoke": 11.1, "quick": 420.0, "cpu-demo": 5400.0},
)
