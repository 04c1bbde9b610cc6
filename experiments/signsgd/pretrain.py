"""GPT-2 pretraining with SGD / SignSGD / Signum / Muon / AdamW (the SignSGD paper's GPT-2 run).

    uv run experiments/signsgd/pretrain.py smoke                # seconds on a CPU
    uv run experiments/signsgd/pretrain.py cpu-demo --optim.name sgd --optim.lr 0.3
    uv run experiments/signsgd/pretrain.py paper --optim.name sign_sgd --optim.lr 1e-4
    uv run experiments/signsgd/pretrain.py paper --optim.name sgd --optim.lr 1e-2 --name sgd
    uv run experiments/signsgd/pretrain.py speedrun             # GPT-2 124M, Muon, FineWeb
    uv run experiments/signsgd/pretrain.py paper --resume       # continue from the last checkpoint

The paper and speedrun presets read token shards made by prepare_data.py (see
README_pretrain.md); smoke and cpu-demo use the offline byte-level corpus (no network).
This file is intentionally kept short: the work happens in :mod:`geomopt.lm`.
"""

import dataclasses
import sys

from geomopt.cli import preset_cli
from geomopt.lm import DataConfig, NonFiniteLossError, OptimConfig, TrainConfig, presets, train

GPT2_124M_BF16 = dataclasses.replace(presets["124M"], dtype="bfloat16")

PRESETS = {
    "smoke": (
        "seconds on a CPU: tiny GPT, offline corpus, 20 AdamW steps",
        TrainConfig(
            model=presets["tiny"],
            optim=OptimConfig(name="adamw", lr=3e-3),
            data=DataConfig(offline_bytes=1_000_000),
            batch_size=8,
            steps=20,
            eval_every=10,
            eval_batches=2,
            log_every=5,
            experiment="signsgd_lm_smoke",
        ),
    ),
    "cpu-demo": (
        "minutes on a CPU: 4 layers, width 256, context 256 on the offline corpus (SignSGD)",
        TrainConfig(
            model=presets["cpu-demo"],
            optim=OptimConfig(name="sign_sgd", lr=1e-3, weight_decay=0.1),
            batch_size=16,
            steps=300,
            eval_every=50,
            eval_batches=8,
            log_every=10,
            ckpt_every=100,
            noise_steps=(0, 100, 200, 300),
            noise_samples=16,
            experiment="signsgd_lm_cpu_demo",
        ),
    ),
    "paper": (
        "the paper's GPT-2 run: 124M, C4 shards, seq 512, batch 512, 10k steps, SignSGD 1e-4",
        TrainConfig(
            model=GPT2_124M_BF16,
            optim=OptimConfig(
                name="sign_sgd", lr=1e-4, weight_decay=0.1, schedule="one_cycle", clip=1.0
            ),
            data=DataConfig(
                source="shards", train="data/c4/c4_train_*.bin", val="data/c4/c4_val_*.bin"
            ),
            seq_len=512,
            batch_size=512,
            grad_accum=8,
            steps=10_000,
            eval_every=100,
            eval_batches=64,
            log_every=10,
            ckpt_every=500,
            noise_steps=(0, 250, 500, 1000, 2000, 3000, 5000, 7500, 10_000),
            noise_samples=64,
            experiment="signsgd_lm_paper",
        ),
    ),
    "speedrun": (
        "community GPT-2 124M Muon recipe on FineWeb-10B shards (seq 1024, 512 seqs/step)",
        TrainConfig(
            model=GPT2_124M_BF16,
            optim=OptimConfig(
                name="muon",
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
            experiment="signsgd_lm_speedrun",
        ),
    ),
}


def main(cfg: TrainConfig) -> int:
    if cfg.distributed:
        import jax

        jax.distributed.initialize()
    try:
        summary = train(cfg)
    except NonFiniteLossError as err:
        print(f"[pretrain] {err}", file=sys.stderr)
        return 1
    print({k: summary[k] for k in ("steps", "tokens", "final_val_loss") if k in summary})
    return 0


if __name__ == "__main__":
    sys.exit(main(preset_cli(PRESETS, default="smoke", description=__doc__)))
