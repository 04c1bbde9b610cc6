"""``signsgd/matrix_noise``: Muon (SVD / Newton-Schulz msign) vs SGD on the matrix analogue,
versus matrix size (rank-1 vs full-rank noise) and noise rank, nuclear-norm stationarity.

    uv run experiments/signsgd/matrix_noise.py [smoke|quick|paper] [--field value ...]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.checks import check_ints, check_nonempty, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.problems._methods import check_methods, label
from geomopt.problems.exp_sparse_noise import (
    geomspace,
    slope_headline,
)


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
    optimizers: tuple[str, ...] = ("sgd", "muon_svd", "muon_ns")
    """Optimisers to compare: sgd, muon_svd, muon_ns, or any name of geomopt.optim.OPTIMIZERS
    at its defaults (on the sign_grid step sizes)."""
    sgd_grid: tuple[float, ...] = geomspace(1e-2, 1.9, 6)
    """SGD step sizes in units of 1 / max_i L_i."""
    sign_grid: tuple[float, ...] = geomspace(5e-3, 0.5, 6)
    """Muon step sizes (absolute)."""
    n_seeds: int = 8
    """Independent runs (noise keys split from seed) averaged in E||grad F||_*."""
    max_steps: int = 200_000
    """Censoring horizon."""
    per_decade: int = 16
    """Checkpoints per decade of steps."""
    seed: int = 0
    """Seed of Q, P and the noise."""


def validate(cfg: MatrixNoiseConfig) -> None:
    """Every field, before the run folder exists (one ``ValueError`` naming the field)."""
    check_nonempty(cfg, "sizes", "ranks", "sgd_grid", "sign_grid")
    check_ints(cfg, "sizes", "ranks", "rank_n", "n_seeds", "max_steps", "per_decade")
    check_ints(cfg, "seed", minimum=0)
    check_positive(cfg, "trace_norm", "eps", "sgd_grid", "sign_grid")
    if any(r > cfg.rank_n for r in cfg.ranks):
        raise ValueError(f"ranks={cfg.ranks}: expected every rank <= rank_n={cfg.rank_n}")
    check_methods(cfg, "optimizers", ("sgd", "muon_svd", "muon_ns"))


def sweep_plan(cfg: MatrixNoiseConfig) -> list[tuple[str, int, tuple[int, ...]]]:
    """The batches to run: ``(sweep, n, ranks)``. The size sweep needs ranks 1 and n at every
    size; at ``n = rank_n`` those come from the rank sweep when it has them."""
    plan = [("rank", cfg.rank_n, tuple(cfg.ranks))]
    for n in cfg.sizes:
        if not (n == cfg.rank_n and {1, n} <= set(cfg.ranks)):
            plan.append(("size", n, tuple(sorted({1, n}))))
    return plan


def run(cfg: MatrixNoiseConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np

    from geomopt.problems._matrix import sgd_hard_matrix_instance
    from geomopt.problems._run import stack_problems, steps_to_reach

    key_qp, key_noise = jax.random.split(jax.random.key(cfg.seed))
    keys = jax.random.split(key_noise, cfg.n_seeds)
    rows: list[dict] = []
    plan = sweep_plan(cfg)
    bar = run.progress(total=len(plan), desc="matrix noise", unit="batch")
    for sweep, n, ranks in plan:
        bar.set_description(f"{sweep} sweep, n={n}, ranks {list(ranks)}, {cfg.n_seeds} seeds")
        kq = jax.random.fold_in(key_qp, n)
        # every instance twice: with its noise and without (the control: the same quadratic,
        # whose curvature follows the noise rank, so the control changes with the rank too)
        probs = stack_problems([sgd_hard_matrix_instance(n, r, tn, key=kq)
                                for tn in (cfg.trace_norm, 0.0) for r in ranks])  # fmt: skip
        out = []
        for name in cfg.optimizers:
            if name == "sgd":
                grid = np.asarray(cfg.sgd_grid)[None] / np.asarray(probs.L).max(axis=1)[:, None]
            else:
                grid = np.asarray(cfg.sign_grid)
            res = steps_to_reach(probs, name, grid, keys, cfg.eps, max_steps=cfg.max_steps,
                                 per_decade=cfg.per_decade)  # fmt: skip
            for p, r in enumerate(ranks):
                c, c0 = int(res["complexity"][p]), int(res["complexity"][p + len(ranks)])
                out.append({"sweep": sweep, "n": n, "rank": r,
                            "noise": "low-rank" if r < n else "full-rank", "opt": name,
                            "complexity": c if c > 0 else None, "censored": c < 0,
                            "control": c0 if c0 > 0 else None,
                            "excess": c - c0 if c > 0 and c0 > 0 else None,
                            "best_lr": float(res["best_lr"][p])})  # fmt: skip
        if sweep == "rank" and n in cfg.sizes and {1, n} <= set(ranks):
            # the size sweep's point at n = rank_n is this batch's rank-1 and full-rank rows
            out += [{**r, "sweep": "size"} for r in out if r["rank"] in (1, n)]
        run.log_rows(out)
        rows += out
        bar.update(1)
    bar.close()

    headline: dict[str, float] = {}
    # the slopes of the complexity, of the noise-free control on the same instance (the
    # deterministic term alone) and of the noise-attributable excess T(Sigma) - T(0)
    fields = (("slope", "complexity"), ("control_slope", "control"),
              ("noise_excess_slope", "excess"))  # fmt: skip
    for name in cfg.optimizers:
        for prefix, field in fields:
            for noise in ("low-rank", "full-rank"):
                sel = [r for r in rows if r["sweep"] == "size" and r["opt"] == name
                       and r["noise"] == noise]  # fmt: skip
                ok = [r for r in sel if r[field] is not None and r[field] > 0]
                key = f"{prefix}_vs_n/{name}/{noise}"
                headline[key] = slope_headline(run, key, [r["n"] for r in ok],
                                               [r[field] for r in ok], "n",
                                               len(sel) - len(ok))  # fmt: skip
            sel = [r for r in rows if r["sweep"] == "rank" and r["opt"] == name]
            ok = [r for r in sel if r[field] is not None and r[field] > 0]
            key = f"{prefix}_vs_rank/{name}"
            headline[key] = slope_headline(run, key, [r["rank"] for r in ok],
                                           [r[field] for r in ok], "rank",
                                           len(sel) - len(ok))  # fmt: skip
    headline["censored_runs"] = sum(r["censored"] for r in rows)
    return headline


COLORS = {"sgd": "sgd", "muon_svd": "muon-svd", "muon_ns": "muon-ns"}
MARKERS = {"sgd": "o", "muon_svd": "s", "muon_ns": "D"}


def _series(ax, xs, rows, name: str, slope: float) -> None:
    """One optimiser's complexities; Muon (Newton-Schulz) with open markers."""
    from geomopt import plotting

    ax.plot(xs, [r["complexity"] for r in rows], marker=MARKERS.get(name, "x"), ms=5,
            mfc="none" if name == "muon_ns" else None,
            color=plotting.color(COLORS.get(name, name)),
            label=f"{label(name)}: slope {slope:.2f}")  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``matrix_noise.png``: complexity vs n for rank-1 and for full-rank noise (one panel each)
    and vs noise rank. Muon (SVD) and Muon (Newton-Schulz) nearly coincide: open vs filled
    markers keep both visible."""
    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg, rows, head = record.config_values, record.metrics, record.headline
    fig, axes = plotting.figure(3, 1, width=3.4, height=3.0)
    panels = (("low-rank", "rank-1 noise"), ("full-rank", "full-rank noise"))
    for ax, (noise, title) in zip(axes[0, :2], panels, strict=True):
        for name in cfg["optimizers"]:
            ok = [r for r in rows if r["sweep"] == "size" and r["opt"] == name
                  and r["noise"] == noise and not r["censored"]]  # fmt: skip
            _series(ax, [r["n"] for r in ok], ok, name, head[f"slope_vs_n/{name}/{noise}"])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(cfg["sizes"], [str(n) for n in cfg["sizes"]])
        ax.set_xlabel("matrix size n (n x n)")
        ax.set_title(f"{title}, matched ||Sigma||_*", fontsize=9)
        ax.legend(loc="best", fontsize=7)
    axes[0, 0].set_ylabel(f"grad. evals to avg E||grad F||_* <= {cfg['eps']:g}")
    ax = axes[0, 2]
    for name in cfg["optimizers"]:
        ok = [r for r in rows if r["sweep"] == "rank" and r["opt"] == name and not r["censored"]]
        _series(ax, [r["rank"] for r in ok], ok, name, head[f"slope_vs_rank/{name}"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(cfg["ranks"], [str(r) for r in cfg["ranks"]])
    ax.set_xlabel("noise rank r")
    ax.set_title(f"n = {cfg['rank_n']}, rank swept", fontsize=9)
    ax.legend(loc="best", fontsize=7)
    return [plotting.save(fig, figure_path(run_dir, out, "matrix_noise"))]


EXPERIMENT = Experiment(
    name="signsgd/matrix_noise",
    description="Muon (SVD / Newton-Schulz) vs SGD under low-rank vs full-rank matrix noise",
    presets={
        "smoke": MatrixNoiseConfig(
            sizes=(4, 8), rank_n=8, ranks=(1, 8), n_seeds=2, max_steps=20_000, per_decade=8
        ),
        "quick": MatrixNoiseConfig(),
        "paper": MatrixNoiseConfig(
            sizes=(8, 16, 32, 64, 128), rank_n=64, ranks=(1, 2, 4, 8, 16, 32, 64), n_seeds=16
        ),
    },  # fmt: skip
    notes={
        "smoke": "n = 4 and 8, ranks 1 and 8 at n = 8, SGD and both Muons, 2 seeds (seconds)",
        "quick": "n = 4, 8, 16; ranks 1..16 at n = 16; 8 seeds",
        "paper": "n = 8..128; ranks 1..64 at n = 64; 16 seeds",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/signsgd/figures",
    key_numbers=(
        "noise_excess_slope_vs_n/sgd/low-rank",
        "control_slope_vs_n/sgd/low-rank",
        "control_slope_vs_n/sgd/full-rank",
        "slope_vs_n/sgd/low-rank",
        "slope_vs_n/sgd/full-rank",
        "slope_vs_rank/sgd",
        "slope_vs_n/muon_svd/low-rank",
        "slope_vs_rank/muon_svd",
        "slope_vs_n/muon_ns/low-rank",
    ),
    paper={
        "noise_excess_slope_vs_n/sgd/low-rank": 1.0,
        "slope_vs_n/sgd/low-rank": 1.0,
        "slope_vs_n/sgd/full-rank": 0.0,
        "slope_vs_rank/sgd": -1.0,
        "slope_vs_n/muon_svd/low-rank": 0.0,
        "slope_vs_rank/muon_svd": 0.0,
    },
    paper_source="theory: the paper's matrix analogue, SGD ~ n / rank, Muon (exact msign) free "
    "of n and rank",
    seconds={"smoke": 6.7, "quick": 10.2},  # quick measured with the controls, quiet machine
)
