"""``signsgd/pretrain_demo``: the CPU demo of the SignSGD paper's GPT-2 comparison.

A small byte-level GPT on the offline corpus (the Python standard library's sources) trained
with SGD, SignSGD, Signum, AdamW and Muon for the same batches and tokens, each at its step
size(s), with the gradient-noise density phi measured along the SGD and SignSGD runs.

    uv run experiments/signsgd/pretrain_demo.py [smoke|quick|variants|paper]

``quick``: 2 layers, width 128, context 64, 60 steps of 16 sequences, one step size per
optimiser (measured 412 s wall, 94 s CPU, on the 2-core machine shared with other jobs).
``variants``: the same model for 300 steps, Muon's variants beside the five (:data:`ARMS`),
each at the best of a three-point step-size grid on seed 0, then that step size on seeds 1-5:
mean final validation loss with 95 % intervals and the paired difference from Muon (and from
its control, :data:`CONTROLS`).
``paper`` (the ``cpu-demo`` model, hours on 2 cores): 4 layers, width 256, context 256, 400
steps, three step sizes per optimiser, phi for every run. Runs that differ only in the step
size reuse one compiled train step. Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.lm._config import DataConfig, GPT2Config, OptimConfig, OptimName, TrainConfig, presets

__all__ = ["DemoConfig", "EXPERIMENT", "run", "plot", "validate", "train_configs"]

OPTIMIZERS: tuple[OptimName, ...] = ("sgd", "sign_sgd", "signum", "adamw", "muon")

_MUON = dict(algorithm="muon", momentum=0.95, nesterov=True, adam_lr=3e-3)
ARMS: dict[str, dict] = {
    "sgd": dict(algorithm="sgd", momentum=0.9),
    "sign_sgd": dict(algorithm="sign_sgd"),
    "signum": dict(algorithm="signum"),
    "adamw": dict(algorithm="adamw"),
    "muon": _MUON,
    "normuon": {**_MUON, "algorithm": "normuon"},
    "muon_aol": {**_MUON, "algorithm": "muon_aol"},
    "muon_qkv": {**_MUON, "algorithm": "muon_qkv"},
    "muon_clip": {**_MUON, "algorithm": "muon_clip", "qk_clip": 100.0},
    "muon_wd": {**_MUON, "weight_decay": 0.1},
    "muon_cautious": {**_MUON, "algorithm": "muon_cautious", "weight_decay": 0.1},
}
"""The demo's optimisers by name: the OptimConfig fields of each besides the step size (the
Muon variants are the names of geomopt.optim.OPTIMIZERS with Muon's settings; muon_wd is the
control of muon_cautious: the same decay 0.1, applied everywhere; muon_clip clips at Kimi K2's
threshold 100)."""

CONTROLS = {"muon_cautious": "muon_wd"}
"""Beside the difference from muon, each of these is also compared with its control (the same
decay, not cautious)."""

ArmName = Literal[
    "sgd", "sign_sgd", "signum", "adamw", "muon", "normuon", "muon_aol", "muon_qkv",
    "muon_clip", "muon_wd", "muon_cautious",
]  # fmt: skip
VARIANTS: tuple[ArmName, ...] = tuple(ARMS)  # type: ignore[assignment]


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """One small GPT trained with several optimisers on the same batches.

    Every optimiser uses the one-cycle schedule and clipping at 1.0; SGD has momentum 0.9,
    Muon Nesterov momentum 0.95 with AdamW 3e-3 on embeddings and gains; no weight decay.
    """

    model: GPT2Config = presets["demo-quick"]
    """Model shape (byte-level: vocabulary 256)."""
    data: DataConfig = DataConfig(offline_bytes=4_000_000)
    """Token source (the offline byte-level corpus by default)."""
    optimizers: tuple[ArmName, ...] = OPTIMIZERS
    """Optimisers, in order."""
    lrs: tuple[float, ...] = (0.1, 1e-3, 1e-3, 1e-3, 0.03)
    """Peak step size of each optimiser (same order): the best of a two-point sweep at 100
    steps ({0.1, 0.3}, {3e-4, 1e-3}, {3e-4, 1e-3}, {1e-3, 3e-3}, {0.01, 0.03})."""
    lr_factors: tuple[float, ...] = (1.0,)
    """Each optimiser runs at lr x each factor (a step-size sweep; the best is drawn bold)."""
    noise_optimizers: tuple[ArmName, ...] = ("sgd", "sign_sgd")
    """Optimisers whose runs measure phi (every noise_every steps)."""
    batch_size: int = 16
    """Sequences per step."""
    steps: int = 60
    """Optimiser steps of every run."""
    eval_every: int = 15
    """Validate every this many steps (and at step 0 and the end)."""
    eval_batches: int = 4
    """Fixed validation batches."""
    log_every: int = 15
    """Console line and throughput every this many steps."""
    noise_every: int = 30
    """Measure phi at step 0 and every this many steps (0: never)."""
    noise_samples: int = 8
    """Mini-batch gradients per phi measurement."""
    noise_batch_size: int = 8
    """Sequences per phi mini-batch."""
    seed: int = 0
    """Seed of the initial parameters and the batches of the step-size sweep (all its runs)."""
    seeds: tuple[int, ...] = ()
    """After the sweep, the best step size of each optimiser is trained again with each of
    these seeds (fresh ones: the tuning seed's luck is not in the comparison); the headline is
    then the mean over them with a 95 % interval, and each optimiser's paired difference from
    muon (same seeds, same batches). Empty: the sweep's best run is the headline."""


def _optim(name: str, lr: float) -> OptimConfig:
    return OptimConfig(lr=lr, **ARMS[name])


def sweep(cfg: DemoConfig) -> list[tuple[str, TrainConfig]]:
    """``(optimiser, TrainConfig)`` per (optimiser, step size) of the sweep, in order."""
    base = TrainConfig(
        model=cfg.model,
        data=cfg.data,
        batch_size=cfg.batch_size,
        steps=cfg.steps,
        seed=cfg.seed,
        eval_every=cfg.eval_every,
        eval_batches=cfg.eval_batches,
        log_every=cfg.log_every,
        noise_samples=cfg.noise_samples,
        noise_batch_size=cfg.noise_batch_size,
        n_devices=1,
    )
    out = []
    for name, lr in zip(cfg.optimizers, cfg.lrs, strict=True):
        for f in cfg.lr_factors:
            noise = cfg.noise_every if name in cfg.noise_optimizers else 0
            tc = dataclasses.replace(base, optim=_optim(name, float(lr * f)), noise_every=noise)
            out.append((name, tc))
    return out


def train_configs(cfg: DemoConfig) -> list[TrainConfig]:
    """One :class:`TrainConfig` per (optimiser, step size), in sweep order."""
    return [tc for _, tc in sweep(cfg)]


def validate(cfg: DemoConfig) -> None:
    """Every field before the run folder exists: the demo's own fields here, then each run's
    :class:`TrainConfig` (model, data) through :func:`geomopt.lm.check_train_config`."""
    from geomopt.lm._config_checks import check_train_config

    if not cfg.optimizers:
        raise ValueError("optimizers=(): expected at least one optimiser")
    bad = [o for o in (*cfg.optimizers, *cfg.noise_optimizers) if o not in ARMS]
    if bad:
        raise ValueError(f"optimizers {bad}: expected names from {VARIANTS}")
    if len(set(cfg.optimizers)) != len(cfg.optimizers):
        raise ValueError(f"optimizers={cfg.optimizers!r}: expected each optimiser once")
    if len(cfg.optimizers) != len(cfg.lrs):
        raise ValueError(
            f"optimizers has {len(cfg.optimizers)} entries and lrs {len(cfg.lrs)}: expected one "
            "step size per optimiser"
        )
    check_positive(cfg, "lrs")
    if not cfg.lr_factors:
        raise ValueError("lr_factors=(): expected at least one factor")
    check_positive(cfg, "lr_factors")
    check_ints(cfg, "batch_size", "steps", "log_every", "noise_samples")
    check_ints(cfg, "eval_batches")  # the headline and the choice of step size are val losses
    check_ints(cfg, "eval_every", "noise_every", "noise_batch_size", "seed",
               minimum=0)  # fmt: skip
    check_ints(cfg, "seeds", minimum=0)
    if len(set(cfg.seeds)) != len(cfg.seeds) or cfg.seed in cfg.seeds:
        raise ValueError(
            f"seeds={cfg.seeds!r}: expected distinct seeds other than the sweep's seed={cfg.seed}"
        )
    if cfg.noise_every and cfg.noise_optimizers and cfg.noise_samples < 2:
        raise ValueError(
            f"noise_samples={cfg.noise_samples}: expected >= 2 gradients per phi measurement"
        )
    for tc in train_configs(cfg):
        check_train_config(tc, n_devices=1)


def _train_all(jobs, run: Run) -> list[dict]:
    from geomopt.lm._train import train

    out = []
    for i, (name, tc, tag) in enumerate(jobs):
        where = f", seed {tag['seed']}" if "seed" in tag else ""
        run.print(f"run {i + 1}/{len(jobs)}: {name}, lr {tc.optim.lr:g}{where}")
        out.append(train(tc, run, tag={"optimizer": name, "lr": tc.optim.lr, **tag},
                         checkpoints=False))  # fmt: skip
    return out


def _replicated(cfg: DemoConfig, best: dict[str, TrainConfig], run: Run) -> dict[str, float]:
    """The best step size of each optimiser on each of ``cfg.seeds``: mean final validation
    loss with its 95 % interval, and the paired difference from muon (same seed) with its
    interval and the smallest difference the design detects (80 % power)."""
    import numpy as np

    from geomopt.stats import min_detectable_effect, put_mean_ci

    jobs = [(name, dataclasses.replace(tc, seed=s, noise_every=0), {"seed": s})
            for name, tc in best.items() for s in cfg.seeds]  # fmt: skip
    summaries = _train_all(jobs, run)
    losses: dict[str, list[float]] = {}
    headline: dict[str, float] = {}
    for (name, _, _), summ in zip(jobs, summaries, strict=True):
        losses.setdefault(name, []).append(summ.get("final_val_loss", math.nan))
        if "max_attn_logit" in summ:  # over the replicates: did QK-clip ever act?
            key = f"{name}/max_attn_logit"
            headline[key] = max(summ["max_attn_logit"], headline.get(key, -math.inf))
    for name, vals in losses.items():
        put_mean_ci(headline, f"{name}/final_val_loss", vals)
        for ref in ("muon", CONTROLS.get(name)):
            if ref not in losses or name == ref:
                continue
            diff = np.asarray(vals) - np.asarray(losses[ref])
            put_mean_ci(headline, f"{name}/vs_{ref}", diff)
            sd = float(diff.std(ddof=1)) if diff.size > 1 else math.nan
            headline[f"{name}/vs_{ref}/detectable"] = min_detectable_effect(sd, diff.size)
    run.details["replicates"] = losses
    return headline


def run(cfg: DemoConfig, run: Run) -> dict[str, float]:
    jobs = [(name, tc, {}) for name, tc in sweep(cfg)]
    summaries = _train_all(jobs, run)
    results: dict[str, list[tuple[TrainConfig, dict]]] = {}
    for (name, tc, _), summ in zip(jobs, summaries, strict=True):
        results.setdefault(name, []).append((tc, summ))
    headline: dict[str, float] = {}
    best: dict[str, TrainConfig] = {}
    for name, runs in results.items():
        tc, s = min(runs, key=lambda r: r[1].get("final_val_loss", math.inf))
        best[name] = tc
        lrs = sorted(r[0].optim.lr for r in runs)
        headline[f"{name}/final_val_loss"] = s.get("final_val_loss", math.nan)
        headline[f"{name}/lr"] = tc.optim.lr
        if len(lrs) > 2:  # the best at an end of the grid: the grid may be too narrow
            headline[f"{name}/lr_at_edge"] = float(tc.optim.lr in (lrs[0], lrs[-1]))
        if "final_phi" in s:
            headline[f"{name}/final_phi"] = s["final_phi"]
        if "max_attn_logit" in s:
            headline[f"{name}/max_attn_logit"] = s["max_attn_logit"]
    run.details["best_lr"] = {name: tc.optim.lr for name, tc in best.items()}
    if cfg.seeds:
        headline.update(_replicated(cfg, best, run))
    return headline


def _colors(names) -> dict[str, str]:
    """The project's colour of each optimiser, or distinct tab20 colours when there are more
    optimisers than the palette tells apart (the Muon variants)."""
    import matplotlib

    from geomopt.plotting import color

    names = list(dict.fromkeys(names))
    if len({color(n) for n in names}) == len(names):
        return {n: color(n) for n in names}
    cmap = matplotlib.colormaps["tab20"]
    return {n: matplotlib.colors.to_hex(cmap(i % 20)) for i, n in enumerate(names)}


def _draw_replicates(ax, headline: dict, names, colors) -> None:
    """Mean final validation loss over the replicate seeds with its 95 % interval, per
    optimiser (best first)."""
    rows = [(n, headline[f"{n}/final_val_loss"]) for n in names
            if f"{n}/final_val_loss/lo" in headline]  # fmt: skip
    rows.sort(key=lambda r: r[1])
    for y, (name, mean) in enumerate(rows):
        lo, hi = headline[f"{name}/final_val_loss/lo"], headline[f"{name}/final_val_loss/hi"]
        ax.errorbar(mean, y, xerr=[[mean - lo], [hi - mean]], fmt="o", color=colors[name],
                    capsize=2, markersize=4)  # fmt: skip
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="final validation loss (nats/byte)")
    ax.set_title("best lr on the replicate seeds (95 % CI)")


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``lm_demo[_<run>].png``: validation loss vs tokens per optimiser on the sweep's seed
    (best step size solid, others dashed and faint), and phi vs step of the runs that measured
    it (log scale), or, for a run with replicate seeds and no phi, each optimiser's mean final
    validation loss over them with its interval."""
    import numpy as np

    from geomopt.experiment import read_run
    from geomopt.plotting import figure, save

    record = read_run(run_dir)
    best = record.details.get("best_lr", {})
    curves: dict[tuple[str, float], dict[str, list]] = {}
    for r in record.metrics:
        if "optimizer" not in r or "seed" in r:  # the sweep's curves (replicates: right panel)
            continue
        c = curves.setdefault((r["optimizer"], r["lr"]), {"val": [], "phi": []})
        if "val_loss" in r:
            c["val"].append((r["tokens"], r["val_loss"]))
        if "phi" in r:
            c["phi"].append((r["step"], r["phi"]))
    colors = _colors(name for name, _ in curves)
    fig, axes = figure(2, 1, width=3.8, height=2.9)
    ax_loss, ax_phi = axes[0, 0], axes[0, 1]
    phi_steps: set[float] = set()
    for (name, lr), c in curves.items():
        is_best = best.get(name) == lr
        style = dict(color=colors[name], alpha=1.0 if is_best else 0.35)
        style.update(linestyle="-" if is_best else "--")
        label = f"{name} (lr {lr:.3g})" if is_best else None
        if c["val"]:
            ax_loss.plot(*np.asarray(c["val"]).T, label=label, **style)
        if c["phi"]:
            pts = np.asarray(c["phi"])
            phi_steps.update(pts[:, 0].tolist())
            ax_phi.plot(*pts.T, marker="o", markersize=3, label=label, **style)
    ax_loss.set(xlabel="training tokens", ylabel="validation loss (nats/byte)")
    ax_loss.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    ax_loss.set_title("small GPT on stdlib bytes")
    ax_loss.legend(fontsize=6 if len(colors) > 6 else 7, loc="best")
    headline = (record.summary or {}).get("headline", {})
    if not phi_steps and any(k.endswith("/final_val_loss/lo") for k in headline):
        _draw_replicates(ax_phi, headline, list(colors), colors)
    else:
        ax_phi.set(xlabel="step", ylabel=r"noise density $\phi$", yscale="log")
        ax_phi.set_title(r"$\phi = \|\sigma\|_1^2 / (M \|\sigma\|_2^2)$")
        if phi_steps:
            ax_phi.set_xticks(sorted(phi_steps))
            ax_phi.legend(fontsize=7, loc="best")
    return [save(fig, figure_path(run_dir, out, "lm_demo"))]


_PAPER = DemoConfig(
    model=presets["cpu-demo"],
    data=DataConfig(offline_bytes=8_000_000),
    lr_factors=(0.3, 1.0, 3.0),
    noise_optimizers=OPTIMIZERS,
    steps=400,
    eval_every=50,
    eval_batches=8,
    log_every=50,
    noise_every=100,
    noise_samples=16,
    noise_batch_size=16,
)

_VARIANTS = DemoConfig(
    optimizers=VARIANTS,
    lrs=(0.1, 1e-3, 1e-3, 1e-3) + (0.03,) * 7,
    lr_factors=(1 / 3, 1.0, 3.0),
    seeds=(1, 2, 3, 4, 5),
    noise_optimizers=(),
    steps=300,
    eval_every=50,
    log_every=50,
)

EXPERIMENT = Experiment(
    name="signsgd/pretrain_demo",
    description="small byte-level GPT: SGD / SignSGD / Signum / AdamW / Muon, loss and phi",
    presets={
        "smoke": DemoConfig(
            model=presets["tiny"],
            data=DataConfig(offline_bytes=1_000_000),
            optimizers=("sign_sgd", "muon", "muon_clip"),
            lrs=(1e-3, 0.03, 0.03),
            seeds=(1, 2),
            batch_size=4,
            steps=4,
            eval_every=2,
            eval_batches=1,
            log_every=2,
            noise_every=4,
            noise_samples=2,
            noise_batch_size=2,
        ),
        "quick": DemoConfig(),
        "variants": _VARIANTS,
        "paper": _PAPER,
    },
    notes={
        "smoke": "tiny GPT, SignSGD, Muon and MuonClip, 4 steps each, then the two "
        "replicate seeds; seconds",
        "quick": "2 layers, width 128, ctx 64, 60 steps x 16 seqs, one lr per optimiser; "
        "measured 412 s wall / 94 s CPU on 2 shared cores",
        "variants": "the quick model, 300 steps: SGD, SignSGD, Signum, AdamW, Muon and six Muon "
        "variants (NorMuon, AOL, split QKV, MuonClip, decay 0.1 plain and cautious), lr grid "
        "x{1/3, 1, 3} on seed 0, the best lr of each on seeds 1-5",
        "paper": "the cpu-demo model (4 layers, width 256, ctx 256), 400 steps, 3 lrs each, "
        "phi for every run; hours on 2 cores",
    },
    run=run,
    plot=plot,
    validate=validate,
    resumable=False,
    figures_dir="experiments/signsgd/figures",
    key_numbers=(
        "sgd/final_val_loss",
        "sign_sgd/final_val_loss",
        "signum/final_val_loss",
        "adamw/final_val_loss",
        "muon/final_val_loss",
        "sign_sgd/final_phi",
    ),
    seconds={"smoke": 24.4, "quick": 412.0, "variants": 1406.0},
)
