"""The CPU demo of the SignSGD paper's GPT-2 comparison: a small byte-level GPT on the offline
corpus trained with SGD, SignSGD, Signum, AdamW and Muon for the same number of tokens, each at a
few step sizes, with the gradient-noise density measured along the way; and its figure.

``quick`` (the reproduce run, ~2 min on 2 CPU cores): 2 layers, width 128, context 64, 60 steps
of 16 sequences, one step size per optimiser. ``full`` (the ``cpu-demo`` model, hours on 2
cores): 4 layers, width 256, context 256, 400 steps, three step sizes per optimiser.
Runs that differ only in the step size reuse one compiled train step.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from geomopt.lm._model import presets
from geomopt.lm._train import DataConfig, OptimConfig, TrainConfig, train
from geomopt.runs import RunExistsError, load_run

__all__ = ["DEMO_LRS", "QUICK_LRS", "demo_configs", "run_demo", "plot_demo", "DEMO_EXPERIMENTS"]

DEMO_LRS: dict[str, tuple[float, ...]] = {
    "sgd": (0.03, 0.1, 0.3),
    "sign_sgd": (3e-4, 1e-3, 3e-3),
    "signum": (3e-4, 1e-3, 3e-3),
    "adamw": (3e-4, 1e-3, 3e-3),
    "muon": (0.01, 0.03, 0.1),
}
"""Peak step sizes swept per optimiser in the full demo (one-cycle schedule, clipping 1.0)."""

QUICK_LRS: dict[str, float] = {
    "sgd": 0.1,
    "sign_sgd": 1e-3,
    "signum": 1e-3,
    "adamw": 1e-3,
    "muon": 0.03,
}
"""One step size per optimiser for the quick demo: the best of a two-point sweep
({0.1, 0.3}, {3e-4, 1e-3}, {3e-4, 1e-3}, {1e-3, 3e-3}, {0.01, 0.03}) at 100 steps."""

DEMO_EXPERIMENTS = {"quick": "signsgd_lm_demo_quick", "full": "signsgd_lm_cpu_demo"}
_NOISE_OPTIMS = ("sgd", "sign_sgd")


def _optim(name: str, lr: float) -> OptimConfig:
    if name == "muon":
        return OptimConfig(name="muon", lr=lr, momentum=0.95, nesterov=True, adam_lr=3e-3)
    if name == "sgd":
        return OptimConfig(name="sgd", lr=lr, momentum=0.9)
    return OptimConfig(name=name, lr=lr)


def demo_configs(preset: str, root: str | Path, *, overwrite: bool = False) -> list[TrainConfig]:
    """One config per (optimiser, step size); all see the same batches and token count."""
    if preset not in DEMO_EXPERIMENTS:
        raise ValueError(f"demo preset {preset!r}: expected one of {sorted(DEMO_EXPERIMENTS)}")
    quick = preset == "quick"
    base = TrainConfig(
        model=presets["demo-quick" if quick else "cpu-demo"],
        data=DataConfig(offline_bytes=4_000_000 if quick else 8_000_000),
        batch_size=16,
        steps=60 if quick else 400,
        eval_every=15 if quick else 50,
        eval_batches=4 if quick else 8,
        log_every=15 if quick else 50,
        ckpt_every=0,
        noise_samples=8 if quick else 16,
        noise_batch_size=8 if quick else 16,
        root=str(root),
        experiment=DEMO_EXPERIMENTS[preset],
        overwrite=overwrite,
        progress=False,
    )
    noise_steps = (0, 30, 60) if quick else (0, 100, 200, 300, 400)
    sweep = {k: (v,) for k, v in QUICK_LRS.items()} if quick else DEMO_LRS
    out = []
    for name, lrs in sweep.items():
        for lr in lrs:
            cfg = dataclasses.replace(base, optim=_optim(name, lr))
            if name in _NOISE_OPTIMS or not quick:
                cfg = dataclasses.replace(cfg, noise_steps=noise_steps)
            out.append(cfg)
    return out


def run_demo(preset: str, root: str | Path, overwrite: bool = False, *, log=print) -> None:
    """Train every demo config (skipping finished runs unless ``overwrite``)."""
    for cfg in demo_configs(preset, root, overwrite=overwrite):
        try:
            summary = train(cfg, log=log)
        except RunExistsError:
            log(f"[demo] {cfg.run_name}: finished run kept (pass overwrite to redo)")
            continue
        log(f"[demo] {cfg.run_name}: final val loss {summary.get('final_val_loss', math.nan):.4f}")


def _load(folder: Path):
    runs = []
    for d in sorted(p for p in folder.iterdir() if (p / "config.json").exists()):
        cfg, rows, summary = load_run(d)
        if summary is not None:
            runs.append((cfg, rows, summary))
    return runs


def plot_demo(run_folder: str | Path, out_path: str | Path) -> Path:
    """Validation loss vs tokens (best step size of each optimiser bold, others faint) and
    noise density phi vs step, from saved run folders only."""
    from geomopt.plotting import color, figure, save

    runs = _load(Path(run_folder))
    if not runs:
        raise FileNotFoundError(f"no finished runs under {run_folder}")
    best: dict[str, float] = {}
    for cfg, _, summary in runs:
        name, loss = cfg["optim"]["name"], summary.get("final_val_loss", math.inf)
        if isinstance(loss, float) and loss < best.get(name, math.inf):
            best[name] = loss
    fig, axes = figure(2, 1, width=3.8, height=2.9)
    ax_loss, ax_phi = axes[0, 0], axes[0, 1]
    for cfg, rows, summary in runs:
        name, lr = cfg["optim"]["name"], cfg["optim"]["lr"]
        is_best = summary.get("final_val_loss") == best.get(name)
        style = dict(color=color(name), alpha=1.0 if is_best else 0.35)
        style.update(linestyle="-" if is_best else "--", label=f"{name} (lr {lr:g})")
        if not is_best:
            style["label"] = None
        val = [(r["tokens"], r["val_loss"]) for r in rows if "val_loss" in r]
        if val:
            ax_loss.plot(*np.asarray(val).T, **style)
        phi = [(r["step"], r["phi"]) for r in rows if isinstance(r.get("phi"), float)]
        if phi:
            ax_phi.plot(*np.asarray(phi).T, marker="o", markersize=3, **style)
    ax_loss.set(xlabel="training tokens", ylabel="validation loss (nats/byte)")
    ax_loss.set_title("small GPT on stdlib bytes")
    ax_loss.legend(fontsize=7, loc="upper right")
    ax_phi.set(xlabel="step", ylabel=r"noise density $\phi$", yscale="log")
    ax_phi.set_title(r"$\phi = \|\sigma\|_1^2 / (M \|\sigma\|_2^2)$")
    if ax_phi.get_legend_handles_labels()[0]:
        ax_phi.legend()
    return save(fig, out_path)
