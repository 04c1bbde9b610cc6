"""``signsgd/toy``: the paper's two toy experiments with their exact settings.

1. Deterministic ill-conditioned quadratic ``f = 1/2 sum L_i x_i^2`` (SignSGD vs SGD, each at its
   best step size of the paper's grid).
2. ``f = 1/2 ||x||^2`` with Gaussian gradient noise on one coordinate (mean and 10-90 % band).

    uv run experiments/signsgd/toy.py [smoke|quick|paper] [--field value ...]

Module-level imports are light (no JAX) so ``--help`` is instant; the numerics are imported inside
:func:`run` and :func:`plot`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from geomopt.checks import check_ints, check_nonempty, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.problems._methods import check_methods, label


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """The paper's two toy experiments.

    1. Deterministic ill-conditioned quadratic ``f = 1/2 sum L_i x_i^2``, ``L_0 = stiff_L``,
       ``L_i = 1`` otherwise, exact gradients, ``x0 ~ N(0, I)`` then ``x0[0] /= stiff_L``; each
       optimiser uses the step size from ``det_lrs`` with the smallest final loss that is finite
       and not above the initial loss.
    2. ``f = 1/2 ||x||^2`` in ``noise_d`` dimensions, ``x0 ~ N(0, I)`` per run, stochastic
       gradient ``x + N(0, noise_std^2)`` on coordinate 0 only; fixed step sizes; mean and
       10th-90th percentile band over ``n_seeds`` runs.
    """

    det_d: int = 5000
    """Dimension of the deterministic quadratic."""
    stiff_L: float = 1000.0
    """Curvature L_0 of the stiff coordinate (the others have L_i = 1); x0[0] is divided by it."""
    det_lrs: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
    """Step-size grid of the deterministic experiment (the paper's {1e-2, ..., 1e-8})."""
    noise_d: int = 100
    """Dimension of the one-noisy-coordinate problem."""
    noise_std: float = 100.0
    """Standard deviation of the gradient noise on coordinate 0."""
    n_seeds: int = 42
    """Independent runs of the noisy experiment (the paper's 42; x0 and noise keys split from
    seed)."""
    methods: tuple[str, ...] = ("sgd", "signsgd")
    """Optimisers compared in both experiments: names of geomopt.problems.OPTIMIZERS (the
    paper's sgd = plain SGD, signsgd, signum, muon_svd, muon_ns) or of geomopt.optim.OPTIMIZERS
    at their defaults (one added with geomopt.optim.register_optimizer included)."""
    noisy_lrs: tuple[float, ...] = (1e-3, 1e-2)
    """Step size of each method (same order) in the noisy experiment (the paper's SGD 1e-3,
    SignSGD 1e-2)."""
    steps: int = 3000
    """Recorded iterations, as the official loop: the loss is recorded at t = 0..steps-1, each
    before that iteration's update, so the last value is the loss after steps-1 updates."""
    log_every: int = 5
    """Keep every this many recorded losses in metrics.jsonl (the last one is always kept)."""
    seed: int = 0
    """Seed of x0 and of the noise."""


def validate(cfg: ToyConfig) -> None:
    """Every field, before the run folder exists (one ``ValueError`` naming the field)."""
    check_nonempty(cfg, "det_lrs")
    check_ints(cfg, "det_d", "noise_d", "n_seeds", "log_every")
    check_ints(cfg, "steps", minimum=2)  # the first and the last recorded loss
    check_ints(cfg, "seed", minimum=0)
    check_positive(cfg, "det_lrs", "stiff_L", "noise_std", "noisy_lrs")
    check_methods(cfg, "methods")
    if len(cfg.noisy_lrs) != len(cfg.methods):
        raise ValueError(
            f"noisy_lrs={cfg.noisy_lrs!r}: expected one step size per method of "
            f"methods={cfg.methods!r}"
        )


def select_step_size(losses, initial: float) -> int:
    """The paper's rule: index of the smallest final loss that is finite and ``<= initial``
    (-1 if none qualifies)."""
    import numpy as np

    final = np.asarray(losses, float)
    ok = np.isfinite(final) & (final <= initial)
    if not ok.any():
        return -1
    return int(np.argmin(np.where(ok, final, np.inf)))


def run(cfg: ToyConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np

    from geomopt.problems._run import run_trajectories, stack_problems
    from geomopt.problems._separable import separable_problem

    k_x0, k_noise, k_x0n = jax.random.split(jax.random.key(cfg.seed), 3)
    updates = cfg.steps - 1  # the official loop records before each update: t = 0..steps-1
    keep = np.unique(np.r_[np.arange(0, cfg.steps, cfg.log_every), updates])
    bar = run.progress(total=2 * len(cfg.methods), desc="toy", unit="run")
    headline: dict[str, float] = {}

    # 1. deterministic ill-conditioned quadratic
    L = np.ones(cfg.det_d)
    L[0] = cfg.stiff_L
    x0 = np.asarray(jax.random.normal(k_x0, (cfg.det_d,)), np.float64)
    x0[0] /= cfg.stiff_L
    det = stack_problems([separable_problem(L, np.zeros(cfg.det_d), x0)])
    keys = jax.random.split(k_noise, 1)
    for name in cfg.methods:
        bar.set_description(f"deterministic, {name}")
        loss = np.asarray(
            run_trajectories(det, name, cfg.det_lrs, keys, steps=updates)["loss"][0, :, 0]
        )[:, keep]
        initial = float(loss[0, 0])
        pick = select_step_size(loss[:, -1], initial)
        headline[f"deterministic/{name}/final_loss"] = (
            float(loss[pick, -1]) if pick >= 0 else math.nan
        )
        headline[f"deterministic/{name}/lr"] = cfg.det_lrs[pick] if pick >= 0 else math.nan
        if pick < 0:
            for key in ("final_loss", "lr"):
                run.explain_nan(
                    f"deterministic/{name}/{key}",
                    f"no step size of det_lrs left {name} with a finite final loss <= the initial",
                )
        run.log_rows(
            {"experiment": "deterministic", "opt": name, "lr": lr, "chosen": g == pick,
             "steps": keep, "loss": loss[g]}
            for g, lr in enumerate(cfg.det_lrs)
        )  # fmt: skip
        bar.update(1)

    # 2. one noisy coordinate
    sigma = np.zeros(cfg.noise_d)
    sigma[0] = cfg.noise_std
    noisy = stack_problems([separable_problem(np.ones(cfg.noise_d), sigma, np.zeros(cfg.noise_d))])
    x0s = jax.random.normal(k_x0n, (cfg.n_seeds, cfg.noise_d))
    run_keys = jax.random.split(k_noise, cfg.n_seeds)
    for name, lr in zip(cfg.methods, cfg.noisy_lrs, strict=True):
        bar.set_description(f"one noisy coordinate, {name}, {cfg.n_seeds} runs")
        loss = np.asarray(
            run_trajectories(noisy, name, [lr], run_keys, steps=updates, x0=x0s)["loss"][0, 0]
        )[:, keep]
        mean, lo, hi = loss.mean(0), np.percentile(loss, 10, 0), np.percentile(loss, 90, 0)
        headline[f"noisy/{name}/final_mean_loss"] = float(mean[-1])
        if not math.isfinite(mean[-1]):
            run.explain_nan(f"noisy/{name}/final_mean_loss", f"{name} diverged at lr {lr:g}")
        run.log(experiment="noisy", opt=name, lr=lr, steps=keep, mean=mean, p10=lo, p90=hi)
        bar.update(1)
    bar.close()
    return headline


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``toy_deterministic.png`` and ``toy_sparse_noise.png`` (loss vs step, log y)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    rows = record.metrics
    fig, ax = plotting.figure(1, 1, width=4.2, height=3.0)
    for r in rows:
        if r["experiment"] == "deterministic" and r["chosen"]:
            ax.plot(r["steps"], np.asarray(r["loss"], float), color=plotting.color(r["opt"]),
                    label=f"{label(r['opt'])} (lr {r['lr']:g})")  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("iteration (loss recorded before the update)")
    ax.set_ylabel("loss f(x)")
    ax.set_title(f"Ill-conditioned quadratic, d = {cfg['det_d']} (exact gradients)")
    ax.legend(loc="best")
    figures = [plotting.save(fig, figure_path(run_dir, out, "toy_deterministic"))]

    fig, ax = plotting.figure(1, 1, width=4.2, height=3.0)
    for r in rows:
        if r["experiment"] == "noisy":
            c = plotting.color(r["opt"])
            ax.plot(r["steps"], r["mean"], color=c, label=f"{label(r['opt'])} (lr {r['lr']:g})")
            plotting.band(ax, r["steps"], r["p10"], r["p90"], label_color=c)
    ax.set_yscale("log")
    ax.set_xlabel("iteration (loss recorded before the update)")
    ax.set_ylabel("loss f(x)")
    ax.set_title(f"One noisy coordinate, d = {cfg['noise_d']} (mean, 10-90%)")
    ax.legend(loc="best")
    figures.append(plotting.save(fig, figure_path(run_dir, out, "toy_sparse_noise")))
    return figures


EXPERIMENT = Experiment(
    name="signsgd/toy",
    description="the paper's toy problems: SGD vs SignSGD (ill-conditioned; one noisy coordinate)",
    presets={
        "smoke": ToyConfig(det_d=50, noise_d=10, n_seeds=4, steps=60, log_every=2),
        "quick": ToyConfig(),
        "paper": ToyConfig(log_every=1),
    },
    notes={
        "smoke": "tiny sizes, seconds",
        "quick": "the paper's exact settings (a few seconds on a CPU)",
        "paper": "the paper's exact settings, every step logged",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/signsgd/figures",
    key_numbers=(
        "deterministic/sgd/final_loss",
        "deterministic/signsgd/final_loss",
        "noisy/sgd/final_mean_loss",
        "noisy/signsgd/final_mean_loss",
    ),
    seconds={"smoke": 3.5, "quick": 4.0, "paper": 52.0},
)
