"""The SignSGD / Muon experiments of ``experiments/signsgd/``: configs, presets, run and plot.

The entry points (``toy.py``, ``sparse_noise.py``, ``matrix_noise.py``, ``plot.py``) and the
registry only parse a config and call the functions here. Every run writes a run folder
``<root>/signsgd/<name>/`` through :mod:`geomopt.runs` (a complete folder is never replaced
without ``overwrite``); every figure is made from saved run folders only.

- :func:`run_toy`: the paper's two toy experiments with their exact settings.
- :func:`run_sparse_noise`: gradient evaluations to reach ``E||grad f||_1 <= eps`` versus ``d``
  (sparse vs dense noise of equal ``||sigma||_1``) and versus ``phi`` at fixed ``d``.
- :func:`run_matrix_noise`: the matrix analogue (Muon with SVD / Newton-Schulz msign vs SGD) on
  the diagonal-embedded problem, versus matrix size and noise rank, nuclear-norm stationarity.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Literal

import jax
import numpy as np

from geomopt import plotting
from geomopt.problems._matrix import sgd_hard_matrix_instance
from geomopt.problems._run import run_trajectories, stack_problems, steps_to_reach
from geomopt.problems._separable import separable_problem, sgd_hard_instance
from geomopt.runs import Run, load_run

__all__ = [
    "ToyConfig",
    "SparseNoiseConfig",
    "MatrixNoiseConfig",
    "TOY_PRESETS",
    "SPARSE_PRESETS",
    "MATRIX_PRESETS",
    "run_toy",
    "run_sparse_noise",
    "run_matrix_noise",
    "plot_toy",
    "plot_sparse_noise",
    "plot_matrix_noise",
    "fit_slope",
    "FAMILY",
]

FAMILY = "signsgd"
LABELS = {
    "sgd": "SGD",
    "signsgd": "SignSGD",
    "signum": "Signum",
    "muon_svd": "Muon (SVD)",
    "muon_ns": "Muon (Newton-Schulz)",
}
COLORS = {"muon_svd": "muon-svd", "muon_ns": "muon-ns"}


def _color(name: str) -> str:
    return plotting.color(COLORS.get(name, name))


def _check_positive_floats(name: str, values) -> None:
    for v in values if isinstance(values, (tuple, list)) else (values,):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name}={values!r}: expected finite values > 0")


def _check_positive_ints(name: str, values) -> None:
    for v in values if isinstance(values, (tuple, list)) else (values,):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={values!r}: expected integers >= 1")


def fit_slope(x, y) -> float:
    """Least-squares slope of ``log10 y`` against ``log10 x`` (nan with fewer than 2 points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log10(x[ok]), np.log10(y[ok]), 1)[0])


# --------------------------------------------------------------------------------------------
# Toy experiments
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """The paper's two toy experiments.

    Paper settings: ``uv run experiments/signsgd/toy.py paper``.

    1. Deterministic ill-conditioned quadratic ``f = 1/2 sum L_i x_i^2``, ``L_0 = stiff_L``,
       ``L_i = 1`` otherwise, exact gradients, ``x0 ~ N(0, I)`` then ``x0[0] /= stiff_L``; each
       optimiser uses the step size from ``det_lrs`` with the smallest final loss that is finite
       and not above the initial loss.
    2. ``f = 1/2 ||x||^2`` in ``noise_d`` dimensions, ``x0 ~ N(0, I)`` per run, stochastic
       gradient ``x + N(0, noise_std^2)`` on coordinate 0 only; fixed step sizes; mean and
       10th-90th percentile band over ``runs`` runs.
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
    runs: int = 42
    """Independent runs (seeds) of the noisy experiment."""
    sgd_lr: float = 1e-3
    """SGD step size in the noisy experiment."""
    signsgd_lr: float = 1e-2
    """SignSGD step size in the noisy experiment."""
    steps: int = 3000
    """Optimiser steps of both experiments."""
    log_every: int = 5
    """Record the loss every this many steps."""
    seed: int = 0
    """Seed of x0 and of the noise."""
    name: str = "toy"
    """Run folder name under <root>/signsgd/."""
    root: Path = Path("results")
    """Results root."""
    overwrite: bool = False
    """Replace a complete run folder of the same name."""


TOY_PRESETS = {
    "smoke": (
        "tiny sizes, seconds",
        ToyConfig(det_d=50, noise_d=10, runs=4, steps=60, log_every=2, name="toy-smoke"),
    ),
    "quick": ("the paper's exact settings (cheap: a few seconds on a CPU)", ToyConfig()),
    "paper": (
        "the paper's exact settings, every step logged",
        ToyConfig(log_every=1, name="toy-paper"),
    ),
}


def _validate_toy(cfg: ToyConfig) -> None:
    _check_positive_ints("det_d", cfg.det_d)
    _check_positive_ints("noise_d", cfg.noise_d)
    _check_positive_ints("runs", cfg.runs)
    _check_positive_ints("steps", cfg.steps)
    _check_positive_ints("log_every", cfg.log_every)
    _check_positive_floats("det_lrs", cfg.det_lrs)
    for n in ("stiff_L", "noise_std", "sgd_lr", "signsgd_lr"):
        _check_positive_floats(n, getattr(cfg, n))
    if cfg.steps % cfg.log_every:
        raise ValueError(f"steps={cfg.steps} is not a multiple of log_every={cfg.log_every}")


def select_step_size(losses: np.ndarray, initial: float) -> int:
    """The paper's rule: index of the smallest final loss that is finite and ``<= initial``
    (-1 if none qualifies)."""
    final = np.asarray(losses, float)
    ok = np.isfinite(final) & (final <= initial)
    if not ok.any():
        return -1
    return int(np.argmin(np.where(ok, final, np.inf)))


def run_toy(cfg: ToyConfig) -> Path:
    """Run both toy experiments; returns the run folder."""
    _validate_toy(cfg)
    run = Run.create(FAMILY, cfg.name, cfg, root=cfg.root, overwrite=cfg.overwrite)
    t0 = time.perf_counter()
    k_x0, k_noise, k_x0n = jax.random.split(jax.random.key(cfg.seed), 3)
    steps_axis = np.arange(0, cfg.steps + 1, cfg.log_every)

    # 1. deterministic ill-conditioned quadratic
    L = np.ones(cfg.det_d)
    L[0] = cfg.stiff_L
    x0 = np.asarray(jax.random.normal(k_x0, (cfg.det_d,)), np.float64)
    x0[0] /= cfg.stiff_L
    det = stack_problems([separable_problem(L, np.zeros(cfg.det_d), x0)])
    keys = jax.random.split(k_noise, 1)
    summary: dict = {"deterministic": {}, "noisy": {}}
    rows = []
    for name in ("sgd", "signsgd"):
        loss = np.asarray(
            run_trajectories(
                det, name, cfg.det_lrs, keys, steps=cfg.steps, log_every=cfg.log_every
            )["loss"][0, :, 0]
        )
        initial = float(loss[0, 0])
        pick = select_step_size(loss[:, -1], initial)
        summary["deterministic"][name] = {
            "chosen_lr": cfg.det_lrs[pick] if pick >= 0 else None,
            "final_loss": float(loss[pick, -1]) if pick >= 0 else None,
            "initial_loss": initial,
            "final_loss_per_lr": loss[:, -1].tolist(),
        }
        for g, lr in enumerate(cfg.det_lrs):
            rows.append(
                {
                    "experiment": "deterministic",
                    "opt": name,
                    "lr": lr,
                    "chosen": g == pick,
                    "steps": steps_axis.tolist(),
                    "loss": loss[g].tolist(),
                }
            )

    # 2. one noisy coordinate
    sigma = np.zeros(cfg.noise_d)
    sigma[0] = cfg.noise_std
    noisy = stack_problems([separable_problem(np.ones(cfg.noise_d), sigma, np.zeros(cfg.noise_d))])
    x0s = jax.random.normal(k_x0n, (cfg.runs, cfg.noise_d))
    run_keys = jax.random.split(k_noise, cfg.runs)
    for name, lr in (("sgd", cfg.sgd_lr), ("signsgd", cfg.signsgd_lr)):
        loss = np.asarray(
            run_trajectories(
                noisy, name, [lr], run_keys, steps=cfg.steps, log_every=cfg.log_every, x0=x0s
            )["loss"][0, 0]
        )
        mean, lo, hi = loss.mean(0), np.percentile(loss, 10, 0), np.percentile(loss, 90, 0)
        summary["noisy"][name] = {
            "lr": lr,
            "final_mean_loss": float(mean[-1]),
            "final_p10": float(lo[-1]),
            "final_p90": float(hi[-1]),
            "initial_mean_loss": float(mean[0]),
        }
        rows.append(
            {
                "experiment": "noisy",
                "opt": name,
                "lr": lr,
                "steps": steps_axis.tolist(),
                "mean": mean.tolist(),
                "p10": lo.tolist(),
                "p90": hi.tolist(),
            }
        )
    run.log_rows(rows)
    summary["seconds"] = time.perf_counter() - t0
    run.finish(summary)
    return run.path


def plot_toy(run_dir: Path, out_dir: Path) -> list[Path]:
    """``toy_deterministic.png`` and ``toy_sparse_noise.png`` (loss vs step, log y)."""
    _, rows, summary = load_run(run_dir)
    if summary is None:
        raise FileNotFoundError(f"{run_dir}: run is not complete")
    out = []
    fig, ax = plotting.figure(1, 1, width=4.2, height=3.0)
    for r in rows:
        if r["experiment"] == "deterministic" and r["chosen"]:
            loss = np.asarray(r["loss"], float)
            ax.plot(
                r["steps"],
                loss,
                color=_color(r["opt"]),
                label=f"{LABELS[r['opt']]} (lr {r['lr']:g})",
            )
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss f(x)")
    ax.set_title("Ill-conditioned quadratic, d = 5000 (exact gradients)")
    ax.legend()
    out.append(plotting.save(fig, Path(out_dir) / "toy_deterministic.png"))

    fig, ax = plotting.figure(1, 1, width=4.2, height=3.0)
    for r in rows:
        if r["experiment"] == "noisy":
            c = _color(r["opt"])
            ax.plot(r["steps"], r["mean"], color=c, label=f"{LABELS[r['opt']]} (lr {r['lr']:g})")
            plotting.band(ax, r["steps"], r["p10"], r["p90"], label_color=c)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss f(x)")
    ax.set_title("One noisy coordinate, d = 100 (mean, 10-90%)")
    ax.legend()
    out.append(plotting.save(fig, Path(out_dir) / "toy_sparse_noise.png"))
    return out


# --------------------------------------------------------------------------------------------
# Sparse vs dense noise: complexity versus d and phi
# --------------------------------------------------------------------------------------------


def _log_dims(lo: int, hi: int, per_decade: int) -> tuple[int, ...]:
    n = int(round(per_decade * math.log10(hi / lo))) + 1
    return tuple(
        int(v) for v in np.unique(np.round(np.logspace(math.log10(lo), math.log10(hi), n)))
    )


@dataclasses.dataclass(frozen=True)
class SparseNoiseConfig:
    """Gradient evaluations to reach ``E||grad f||_1 <= eps`` vs ``d`` and vs ``phi``.

    Problem (:func:`geomopt.problems.sgd_hard_instance`): a quadratic with ``L_inf = ||L||_1``,
    ``Delta = f(x0)`` and ``||sigma||_1`` held fixed as ``d`` grows; sparse noise = one noisy
    coordinate (``phi = 1/d``), dense = all ``d`` (``phi = 1``). Complexity: the first checkpoint
    ``T`` (about ``per_decade`` per decade) at which ``(1/T) sum_{t<T} E||grad f(x_t)||_1 <= eps``
    (the expected stationarity of a uniformly drawn iterate, as in the paper's rates; E = mean
    over seeds) for some step size of the grid (:func:`geomopt.problems.steps_to_reach`); batch
    size 1, so steps = gradient evaluations. Predicted slopes (log-log, from the paper's
    complexities ``||sigma||_1^2 L_inf Delta / eps^4`` for SignSGD and ``.../(phi eps^4)`` for
    SGD): vs ``d``, SignSGD 0 for both noises, SGD 1 for sparse and 0 for dense; vs ``phi`` at
    fixed ``d``, SignSGD 0 and SGD -1.

    Paper preset: ``uv run experiments/signsgd/sparse_noise.py paper``.
    """

    dims: tuple[int, ...] = _log_dims(10, 1000, 2)
    """Dimensions d of the sweep (log-spaced)."""
    phi_d: int = 1000
    """Fixed d of the phi sweep."""
    phi_points: int = 7
    """Number of noisy-coordinate counts s (log-spaced in [1, phi_d]; phi = s / phi_d)."""
    sigma_l1: float = 0.25
    """||sigma||_1, the same for every d and phi."""
    eps: float = 0.2
    """Target of the iterate- and seed-averaged ||grad f||_1 (||grad f(x0)||_1 is about 0.96)."""
    l_inf: float = 1.0
    """L_inf = ||L||_1."""
    delta: float = 0.5
    """Delta = f(x0) - f*."""
    optimizers: tuple[Literal["sgd", "signsgd", "signum"], ...] = ("sgd", "signsgd")
    """Optimisers to compare (Signum uses momentum 0.9)."""
    sgd_grid: tuple[float, ...] = tuple(float(v) for v in np.geomspace(1e-2, 1.9, 8))
    """SGD step sizes in units of 1 / max_i L_i (SGD is stable for < 2): eta = g / max_i L_i."""
    sign_grid: tuple[float, ...] = tuple(float(v) for v in np.geomspace(2e-3, 0.5, 8))
    """SignSGD / Signum step sizes (absolute; every coordinate moves by eta per step)."""
    seeds: int = 16
    """Independent runs averaged in E||grad f||_1."""
    levels: int = 4
    """Representatives per coordinate class (and x0 levels), see sgd_hard_instance."""
    full_max_d: int = 100
    """Problems with d <= this are simulated coordinate by coordinate; larger ones by the exact
    class reduction (multiplicity-weighted representatives)."""
    noise: Literal["gaussian", "student_t"] = "gaussian"
    """Noise distribution (Student-t scaled to variance sigma_i^2)."""
    df: float = 4.0
    """Degrees of freedom of the Student-t noise (> 2)."""
    max_steps: int = 2_000_000
    """Censoring horizon: runs that have not reached eps by then are reported as censored."""
    per_decade: int = 20
    """Checkpoints per decade of steps (the resolution of the complexity)."""
    seed: int = 0
    """Seed of the noise."""
    name: str = "sparse_noise"
    """Run folder name under <root>/signsgd/."""
    root: Path = Path("results")
    """Results root."""
    overwrite: bool = False
    """Replace a complete run folder of the same name."""


SPARSE_PRESETS = {
    "smoke": (
        "three small d, 4 seeds (seconds)",
        SparseNoiseConfig(
            dims=(10, 30, 100), phi_d=30, phi_points=3, seeds=4, name="sparse_noise-smoke"
        ),
    ),
    "quick": ("d = 10..1000, phi sweep at d = 1000, 16 seeds", SparseNoiseConfig()),
    "paper": (
        "d = 10..10^5 (9 values), phi sweep at d = 10^4, 16 seeds, full simulation up to d = 1000",
        SparseNoiseConfig(
            dims=_log_dims(10, 100_000, 2),
            phi_d=10_000,
            phi_points=9,
            full_max_d=1000,
            name="sparse_noise-paper",
        ),
    ),
}


def _validate_sparse(cfg: SparseNoiseConfig) -> None:
    _check_positive_ints("dims", cfg.dims)
    for n in ("phi_d", "phi_points", "seeds", "levels", "max_steps", "per_decade"):
        _check_positive_ints(n, getattr(cfg, n))
    for n in ("sigma_l1", "eps", "l_inf", "delta", "sgd_grid", "sign_grid"):
        _check_positive_floats(n, getattr(cfg, n))
    if isinstance(cfg.full_max_d, bool) or not isinstance(cfg.full_max_d, int):
        raise ValueError(f"full_max_d={cfg.full_max_d!r}: expected an integer")
    if not cfg.optimizers or any(o not in ("sgd", "signsgd", "signum") for o in cfg.optimizers):
        raise ValueError(
            f"optimizers={cfg.optimizers!r}: expected a subset of sgd, signsgd, signum"
        )
    if not (math.isfinite(cfg.df) and cfg.df > 2):
        raise ValueError(f"df={cfg.df!r}: expected > 2")


def _grid_for(name: str, problems, cfg) -> np.ndarray:
    if name == "sgd":
        lmax = np.asarray(problems.L).max(axis=1)
        return np.asarray(cfg.sgd_grid)[None, :] / lmax[:, None]
    return np.asarray(cfg.sign_grid)


def _complexity_rows(problems, meta: list[dict], cfg, keys) -> list[dict]:
    rows = []
    for name in cfg.optimizers:
        res = steps_to_reach(
            problems,
            name,
            _grid_for(name, problems, cfg),
            keys,
            cfg.eps,
            max_steps=cfg.max_steps,
            per_decade=cfg.per_decade,
        )
        best_curve = res["curves"].min(axis=-1)  # (K, P): best step size at each checkpoint
        for p, m in enumerate(meta):
            c = int(res["complexity"][p])
            rows.append(
                {
                    **m,
                    "opt": name,
                    "complexity": c if c > 0 else None,
                    "censored": c < 0,
                    "best_lr": float(res["best_lr"][p]),
                    "checkpoints": res["checkpoints"].tolist(),
                    "best_avg_grad_l1": best_curve[:, p].tolist(),
                }
            )
    return rows


def _instance(cfg, d: int, s: int):
    return sgd_hard_instance(
        d,
        s,
        cfg.sigma_l1,
        l_inf=cfg.l_inf,
        delta=cfg.delta,
        reduced=d > cfg.full_max_d,
        levels=cfg.levels,
        noise=cfg.noise,
        df=cfg.df,
    )


def run_sparse_noise(cfg: SparseNoiseConfig, *, log=print) -> Path:
    """The d sweep and the phi sweep; returns the run folder (slopes in ``summary.json``)."""
    _validate_sparse(cfg)
    run = Run.create(FAMILY, cfg.name, cfg, root=cfg.root, overwrite=cfg.overwrite)
    t0 = time.perf_counter()
    keys = jax.random.split(jax.random.key(cfg.seed), cfg.seeds)
    steps_total = 0
    rows: list[dict] = []
    for d in cfg.dims:
        probs = stack_problems([_instance(cfg, d, 1), _instance(cfg, d, d)])
        meta = [
            {"sweep": "d", "d": d, "s": 1, "phi": 1.0 / d, "noise": "sparse"},
            {"sweep": "d", "d": d, "s": d, "phi": 1.0, "noise": "dense"},
        ]
        new = _complexity_rows(probs, meta, cfg, keys)
        run.log_rows(new)
        rows += new
        log(
            f"[sparse_noise] d={d}: "
            + ", ".join(f"{r['opt']}/{r['noise']}={r['complexity']}" for r in new)
        )
    s_values = sorted(
        {int(v) for v in np.round(np.logspace(0, math.log10(cfg.phi_d), cfg.phi_points))}
    )
    probs = stack_problems([_instance(cfg, cfg.phi_d, s) for s in s_values])
    meta = [
        {"sweep": "phi", "d": cfg.phi_d, "s": s, "phi": s / cfg.phi_d, "noise": f"s={s}"}
        for s in s_values
    ]
    new = _complexity_rows(probs, meta, cfg, keys)
    run.log_rows(new)
    rows += new
    log(
        f"[sparse_noise] phi sweep at d={cfg.phi_d}: "
        + ", ".join(f"{r['opt']}/s={r['s']}={r['complexity']}" for r in new)
    )
    for r in rows:
        steps_total += r["checkpoints"][-1]
    summary = {"slopes_vs_d": {}, "slopes_vs_phi": {}, "predicted_vs_d": {}, "predicted_vs_phi": {}}
    for name in cfg.optimizers:
        sign_like = name != "sgd"
        for noise in ("sparse", "dense"):
            sel = [
                r for r in rows if r["sweep"] == "d" and r["opt"] == name and r["noise"] == noise
            ]
            ok = [r for r in sel if not r["censored"]]
            summary["slopes_vs_d"][f"{name}/{noise}"] = fit_slope(
                [r["d"] for r in ok], [r["complexity"] for r in ok]
            )
            summary["predicted_vs_d"][f"{name}/{noise}"] = (
                0.0 if sign_like or noise == "dense" else 1.0
            )
        sel = [r for r in rows if r["sweep"] == "phi" and r["opt"] == name and not r["censored"]]
        summary["slopes_vs_phi"][name] = fit_slope(
            [r["phi"] for r in sel], [r["complexity"] for r in sel]
        )
        summary["predicted_vs_phi"][name] = 0.0 if sign_like else -1.0
    summary["censored_runs"] = sum(r["censored"] for r in rows)
    summary["seconds"] = time.perf_counter() - t0
    summary["run_steps"] = steps_total
    run.finish(summary)
    return run.path


def _theory_line(ax, xs, ys, slope, color):
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(xs) < 1:
        return
    anchor_x, anchor_y = xs[0], ys[0]
    xx = np.array([xs.min(), xs.max()])
    ax.plot(xx, anchor_y * (xx / anchor_x) ** slope, ls=":", color=color, lw=1.0)


def plot_sparse_noise(run_dir: Path, out_dir: Path) -> list[Path]:
    """``sparse_noise_scaling.png``: complexity vs d (sparse / dense) and vs phi at fixed d."""
    config, rows, summary = load_run(run_dir)
    if summary is None:
        raise FileNotFoundError(f"{run_dir}: run is not complete")
    fig, axes = plotting.figure(2, 1, width=4.0, height=3.2)
    ax = axes[0, 0]
    for name in config["optimizers"]:
        for noise, marker, ls in (("sparse", "o", "-"), ("dense", "s", "--")):
            sel = [
                r for r in rows if r["sweep"] == "d" and r["opt"] == name and r["noise"] == noise
            ]
            ok = [r for r in sel if not r["censored"]]
            xs, ys = [r["d"] for r in ok], [r["complexity"] for r in ok]
            slope = summary["slopes_vs_d"][f"{name}/{noise}"]
            pred = summary["predicted_vs_d"][f"{name}/{noise}"]
            ax.plot(
                xs,
                ys,
                marker=marker,
                ls=ls,
                ms=3,
                color=_color(name),
                label=f"{LABELS[name]}, {noise}: slope {slope:.2f} (theory {pred:g})",
            )
            _theory_line(ax, xs, ys, pred, _color(name))
            cens = [r["d"] for r in sel if r["censored"]]
            if cens:
                ax.plot(
                    cens,
                    [config["max_steps"]] * len(cens),
                    marker="^",
                    ls="none",
                    color=_color(name),
                    label=f"{LABELS[name]}, {noise}: censored",
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dimension d")
    ax.set_ylabel(f"grad. evals to avg E||grad f||_1 <= {config['eps']:g}")
    ax.set_title("sparse (phi=1/d) vs dense (phi=1), same ||sigma||_1", fontsize=9)
    ax.legend(fontsize=6)
    ax = axes[0, 1]
    for name in config["optimizers"]:
        sel = [r for r in rows if r["sweep"] == "phi" and r["opt"] == name and not r["censored"]]
        xs, ys = [r["phi"] for r in sel], [r["complexity"] for r in sel]
        slope, pred = summary["slopes_vs_phi"][name], summary["predicted_vs_phi"][name]
        ax.plot(
            xs,
            ys,
            marker="o",
            ms=3,
            color=_color(name),
            label=f"{LABELS[name]}: slope {slope:.2f} (theory {pred:g})",
        )
        _theory_line(ax, xs, ys, pred, _color(name))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("noise density phi")
    ax.set_ylabel("gradient evaluations")
    ax.set_title(f"d = {config['phi_d']}, phi swept from 1/d to 1", fontsize=9)
    ax.legend(fontsize=6)
    return [plotting.save(fig, Path(out_dir) / "sparse_noise_scaling.png")]


# --------------------------------------------------------------------------------------------
# Matrix analogue
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MatrixNoiseConfig:
    """Muon (SVD / Newton-Schulz msign, no momentum) vs SGD on the diagonal-embedded problem.

    ``F(W) = sum_i L_i ((Q W P^T)_ii)^2 / 2`` (:func:`geomopt.problems.sgd_hard_matrix_instance`)
    with ``L_* = ||L||_1``, ``F(W0)`` and the noise trace norm ``||Sigma||_*`` fixed; noise of
    rank r lies in the problem's diagonal frame. Complexity: gradient evaluations ``T`` until
    ``(1/T) sum_{t<T} E||grad F(W_t)||_* <= eps`` for the best step size. Predicted: Muon (SVD)
    equals SignSGD on the diagonal, so its complexity depends on neither n nor r; SGD's grows like
    ``n / r`` (slope 1 vs n for rank-1 noise, 0 for full rank; -1 vs r).

    Paper preset: ``uv run experiments/signsgd/matrix_noise.py paper``.
    """

    sizes: tuple[int, ...] = (4, 8, 16)
    """Square matrix sizes n."""
    rank_n: int = 16
    """Size n of the rank sweep."""
    ranks: tuple[int, ...] = (1, 2, 4, 8, 16)
    """Noise ranks of the rank sweep (each <= rank_n)."""
    trace_norm: float = 0.25
    """||Sigma||_*, the same for every size and rank."""
    eps: float = 0.2
    """Target of the iterate- and seed-averaged nuclear norm of the gradient."""
    optimizers: tuple[Literal["sgd", "muon_svd", "muon_ns"], ...] = ("sgd", "muon_svd", "muon_ns")
    """Optimisers to compare."""
    sgd_grid: tuple[float, ...] = tuple(float(v) for v in np.geomspace(1e-2, 1.9, 6))
    """SGD step sizes in units of 1 / max_i L_i."""
    sign_grid: tuple[float, ...] = tuple(float(v) for v in np.geomspace(5e-3, 0.5, 6))
    """Muon step sizes (absolute)."""
    seeds: int = 8
    """Independent runs averaged in E||grad F||_*."""
    max_steps: int = 200_000
    """Censoring horizon."""
    per_decade: int = 16
    """Checkpoints per decade of steps."""
    seed: int = 0
    """Seed of Q, P and the noise."""
    name: str = "matrix_noise"
    """Run folder name under <root>/signsgd/."""
    root: Path = Path("results")
    """Results root."""
    overwrite: bool = False
    """Replace a complete run folder of the same name."""


MATRIX_PRESETS = {
    "smoke": (
        "two tiny sizes, 2 seeds (seconds)",
        MatrixNoiseConfig(sizes=(4, 8), rank_n=8, ranks=(1, 8), seeds=2, name="matrix_noise-smoke"),
    ),
    "quick": ("n = 4, 8, 16; ranks 1..16 at n = 16; 8 seeds", MatrixNoiseConfig()),
    "paper": (
        "n = 8..128; ranks 1..64 at n = 64; 16 seeds",
        MatrixNoiseConfig(
            sizes=(8, 16, 32, 64, 128),
            rank_n=64,
            ranks=(1, 2, 4, 8, 16, 32, 64),
            seeds=16,
            name="matrix_noise-paper",
        ),
    ),
}


def _validate_matrix(cfg: MatrixNoiseConfig) -> None:
    _check_positive_ints("sizes", cfg.sizes)
    _check_positive_ints("ranks", cfg.ranks)
    for n in ("rank_n", "seeds", "max_steps", "per_decade"):
        _check_positive_ints(n, getattr(cfg, n))
    for n in ("trace_norm", "eps", "sgd_grid", "sign_grid"):
        _check_positive_floats(n, getattr(cfg, n))
    if any(r > cfg.rank_n for r in cfg.ranks):
        raise ValueError(f"ranks={cfg.ranks}: expected every rank <= rank_n={cfg.rank_n}")
    if not cfg.optimizers or any(o not in ("sgd", "muon_svd", "muon_ns") for o in cfg.optimizers):
        raise ValueError(
            f"optimizers={cfg.optimizers!r}: expected a subset of sgd, muon_svd, muon_ns"
        )


def run_matrix_noise(cfg: MatrixNoiseConfig, *, log=print) -> Path:
    """The size sweep (rank-1 vs full-rank noise) and the rank sweep; returns the run folder."""
    _validate_matrix(cfg)
    run = Run.create(FAMILY, cfg.name, cfg, root=cfg.root, overwrite=cfg.overwrite)
    t0 = time.perf_counter()
    key_qp, key_noise = jax.random.split(jax.random.key(cfg.seed))
    keys = jax.random.split(key_noise, cfg.seeds)
    rows: list[dict] = []

    def batch(n, ranks, sweep):
        kq = jax.random.fold_in(key_qp, n)
        probs = stack_problems(
            [sgd_hard_matrix_instance(n, r, cfg.trace_norm, key=kq) for r in ranks]
        )
        meta = [
            {"sweep": sweep, "n": n, "rank": r, "noise": "low-rank" if r < n else "full-rank"}
            for r in ranks
        ]
        out = []
        for name in cfg.optimizers:
            grid = (
                np.asarray(cfg.sgd_grid)[None] / np.asarray(probs.L).max(axis=1)[:, None]
                if name == "sgd"
                else np.asarray(cfg.sign_grid)
            )
            res = steps_to_reach(
                probs, name, grid, keys, cfg.eps, max_steps=cfg.max_steps, per_decade=cfg.per_decade
            )
            for p, m in enumerate(meta):
                c = int(res["complexity"][p])
                out.append(
                    {
                        **m,
                        "opt": name,
                        "complexity": c if c > 0 else None,
                        "censored": c < 0,
                        "best_lr": float(res["best_lr"][p]),
                    }
                )
        run.log_rows(out)
        log(
            f"[matrix_noise] {sweep} n={n}: "
            + ", ".join(f"{r['opt']}/r={r['rank']}={r['complexity']}" for r in out)
        )
        return out

    rank_rows = batch(cfg.rank_n, list(cfg.ranks), "rank")
    for n in cfg.sizes:
        if n == cfg.rank_n and {1, n} <= set(cfg.ranks):  # already run in the rank sweep
            rows += [{**r, "sweep": "size"} for r in rank_rows if r["rank"] in (1, n)]
        else:
            rows += batch(n, sorted({1, n}), "size")
    rows += rank_rows
    summary: dict = {"slopes_vs_n": {}, "slopes_vs_rank": {}}
    for name in cfg.optimizers:
        for noise in ("low-rank", "full-rank"):
            ok = [
                r
                for r in rows
                if r["sweep"] == "size"
                and r["opt"] == name
                and r["noise"] == noise
                and not r["censored"]
            ]
            summary["slopes_vs_n"][f"{name}/{noise}"] = fit_slope(
                [r["n"] for r in ok], [r["complexity"] for r in ok]
            )
        ok = [r for r in rows if r["sweep"] == "rank" and r["opt"] == name and not r["censored"]]
        summary["slopes_vs_rank"][name] = fit_slope(
            [r["rank"] for r in ok], [r["complexity"] for r in ok]
        )
    summary["censored_runs"] = sum(r["censored"] for r in rows)
    summary["seconds"] = time.perf_counter() - t0
    run.finish(summary)
    return run.path


def plot_matrix_noise(run_dir: Path, out_dir: Path) -> list[Path]:
    """``matrix_noise.png``: complexity vs n (rank-1 / full-rank noise) and vs noise rank."""
    config, rows, summary = load_run(run_dir)
    if summary is None:
        raise FileNotFoundError(f"{run_dir}: run is not complete")
    fig, axes = plotting.figure(2, 1, width=4.0, height=3.2)
    ax = axes[0, 0]
    for name in config["optimizers"]:
        for noise, marker, ls in (("low-rank", "o", "-"), ("full-rank", "s", "--")):
            ok = [
                r
                for r in rows
                if r["sweep"] == "size"
                and r["opt"] == name
                and r["noise"] == noise
                and not r["censored"]
            ]
            slope = summary["slopes_vs_n"][f"{name}/{noise}"]
            label = "rank 1" if noise == "low-rank" else "full rank"
            ax.plot(
                [r["n"] for r in ok],
                [r["complexity"] for r in ok],
                marker=marker,
                ls=ls,
                ms=3,
                color=_color(name),
                label=f"{LABELS[name]}, {label}: slope {slope:.2f}",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("matrix size n (n x n)")
    ax.set_ylabel(f"grad. evaluations to avg E||grad F||_* <= {config['eps']:g}")
    ax.set_title("Matched trace norm ||Sigma||_*")
    ax.legend(fontsize=6)
    ax = axes[0, 1]
    for name in config["optimizers"]:
        ok = [r for r in rows if r["sweep"] == "rank" and r["opt"] == name and not r["censored"]]
        slope = summary["slopes_vs_rank"][name]
        ax.plot(
            [r["rank"] for r in ok],
            [r["complexity"] for r in ok],
            marker="o",
            ms=3,
            color=_color(name),
            label=f"{LABELS[name]}: slope {slope:.2f}",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("noise rank r")
    ax.set_ylabel("gradient evaluations")
    ax.set_title(f"n = {config['rank_n']}, rank swept")
    ax.legend(fontsize=6)
    return [plotting.save(fig, Path(out_dir) / "matrix_noise.png")]


def latest_summary(run_dir: Path) -> dict:
    """``summary.json`` of a run folder (for the README / report)."""
    return json.loads((Path(run_dir) / "summary.json").read_text())
