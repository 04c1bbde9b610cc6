"""``signsgd/sparse_noise``: gradient evaluations to reach ``E||grad f||_1 <= eps`` vs ``d``
(sparse vs dense noise of equal ``||sigma||_1``) and vs the noise density ``phi`` at fixed ``d``.

    uv run experiments/signsgd/sparse_noise.py [smoke|quick|paper] [--field value ...]
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

from geomopt.checks import check_nonempty
from geomopt.experiment import Experiment, Run, check_ints, check_positive, figure_path
from geomopt.problems._methods import check_methods, label


def geomspace(lo: float, hi: float, n: int) -> tuple[float, ...]:
    """``n`` log-spaced floats from ``lo`` to ``hi`` (pure Python: configs load without NumPy)."""
    if n == 1:
        return (float(lo),)
    return tuple(float(lo * (hi / lo) ** (i / (n - 1))) for i in range(n))


def log_dims(lo: int, hi: int, per_decade: int) -> tuple[int, ...]:
    """Distinct integers log-spaced from ``lo`` to ``hi``, about ``per_decade`` per decade."""
    n = int(round(per_decade * math.log10(hi / lo))) + 1
    return tuple(sorted({int(round(v)) for v in geomspace(lo, hi, n)}))


def fit_slope(x, y) -> float:
    """Least-squares slope of ``log10 y`` against ``log10 x`` (nan with fewer than 2 distinct
    positive x)."""
    import numpy as np

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if np.unique(x[ok]).size < 2:
        return float("nan")
    return float(np.polyfit(np.log10(x[ok]), np.log10(y[ok]), 1)[0])


def slope_headline(run: Run, key: str, xs, ys, what: str, censored: int) -> float:
    """:func:`fit_slope` of one headline entry; when it is NaN, ``run.explain_nan`` says why
    (fewer than two distinct ``what`` values with an uncensored complexity)."""
    slope = fit_slope(xs, ys)
    if not math.isfinite(slope):
        n = len({x for x, y in zip(xs, ys, strict=True) if x and y})
        reason = f"{n} {what} value(s) with a complexity, a slope needs 2"
        run.explain_nan(key, reason + (f" ({censored} censored)" if censored else ""))
    return slope


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

    dims: tuple[int, ...] = log_dims(10, 1000, 2)
    """Dimensions d of the sweep (log-spaced; the slope vs d needs two or more)."""
    phi_d: int = 1000
    """Fixed d of the phi sweep."""
    phi_points: int = 7
    """Number of noisy-coordinate counts s (log-spaced in [1, phi_d]; phi = s / phi_d; the
    slope vs phi needs two or more distinct s)."""
    sigma_l1: float = 0.25
    """||sigma||_1, the same for every d and phi."""
    eps: float = 0.2
    """Target of the iterate- and seed-averaged ||grad f||_1 (||grad f(x0)||_1 is about 0.96)."""
    l_inf: float = 1.0
    """L_inf = ||L||_1."""
    delta: float = 0.5
    """Delta = f(x0) - f*."""
    optimizers: tuple[str, ...] = ("sgd", "signsgd")
    """Optimisers to compare: sgd, signsgd, signum (momentum 0.9), or any name of
    geomopt.optim.OPTIMIZERS at its defaults (on the sign_grid step sizes, no theory line)."""
    sgd_grid: tuple[float, ...] = geomspace(1e-2, 1.9, 8)
    """SGD step sizes in units of 1 / max_i L_i (SGD is stable for < 2): eta = g / max_i L_i."""
    sign_grid: tuple[float, ...] = geomspace(2e-3, 0.5, 8)
    """SignSGD / Signum step sizes (absolute; every coordinate moves by eta per step)."""
    n_seeds: int = 16
    """Independent runs (noise keys split from seed) averaged in E||grad f||_1."""
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

    @property
    def phi_counts(self) -> tuple[int, ...]:
        """The noisy-coordinate counts s of the phi sweep."""
        return tuple(sorted({int(round(v)) for v in geomspace(1, self.phi_d, self.phi_points)}))


def validate(cfg: SparseNoiseConfig) -> None:
    """Every field, before the run folder exists (one ``ValueError`` naming the field)."""
    check_nonempty(cfg, "dims", "sgd_grid", "sign_grid")
    check_ints(cfg, "dims", "phi_d", "phi_points", "n_seeds", "levels", "max_steps", "per_decade")
    check_ints(cfg, "full_max_d", "seed", minimum=0)
    check_positive(cfg, "sigma_l1", "eps", "l_inf", "delta", "sgd_grid", "sign_grid")
    check_methods(cfg, "optimizers", PAPER)
    if cfg.noise not in ("gaussian", "student_t"):
        raise ValueError(f"noise={cfg.noise!r}: expected gaussian or student_t")
    check_positive(cfg, "df")
    if cfg.df <= 2:
        raise ValueError(f"df={cfg.df!r}: expected > 2 (finite noise variance)")


PAPER = ("sgd", "signsgd", "signum")
PREDICTED_VS_D = {"sgd/sparse": 1.0, "sgd/dense": 0.0}  # sign-based methods: 0 for both
PREDICTED_VS_PHI = {"sgd": -1.0}  # sign-based methods: 0


def _theory(table: dict[str, float], name: str, key: str) -> float | None:
    """The predicted slope of a paper method (sign-based: 0); ``None`` for any other."""
    return table.get(key, 0.0) if name in PAPER else None


def _complexity_rows(problems, meta: list[dict], cfg: SparseNoiseConfig, keys) -> list[dict]:
    import numpy as np

    from geomopt.problems._run import steps_to_reach

    rows = []
    for name in cfg.optimizers:
        if name == "sgd":
            grid = np.asarray(cfg.sgd_grid)[None, :] / np.asarray(problems.L).max(axis=1)[:, None]
        else:
            grid = np.asarray(cfg.sign_grid)
        res = steps_to_reach(problems, name, grid, keys, cfg.eps, max_steps=cfg.max_steps,
                             per_decade=cfg.per_decade)  # fmt: skip
        best_curve = res["curves"].min(axis=-1)  # (K, P): best step size at each checkpoint
        for p, m in enumerate(meta):
            c = int(res["complexity"][p])
            rows.append({**m, "opt": name, "complexity": c if c > 0 else None, "censored": c < 0,
                         "best_lr": float(res["best_lr"][p]), "checkpoints": res["checkpoints"],
                         "best_avg_grad_l1": best_curve[:, p]})  # fmt: skip
    return rows


def run(cfg: SparseNoiseConfig, run: Run) -> dict[str, float]:
    import jax

    from geomopt.problems._run import stack_problems
    from geomopt.problems._separable import sgd_hard_instance

    def instance(d: int, s: int):
        return sgd_hard_instance(d, s, cfg.sigma_l1, l_inf=cfg.l_inf, delta=cfg.delta,
                                 reduced=d > cfg.full_max_d, levels=cfg.levels, noise=cfg.noise,
                                 df=cfg.df)  # fmt: skip

    keys = jax.random.split(jax.random.key(cfg.seed), cfg.n_seeds)
    rows: list[dict] = []
    bar = run.progress(total=len(cfg.dims) + 1, desc="d sweep", unit="sweep point")
    for d in cfg.dims:
        bar.set_description(f"d={d} (sparse + dense), {cfg.n_seeds} seeds")
        probs = stack_problems([instance(d, 1), instance(d, d)])
        meta = [{"sweep": "d", "d": d, "s": 1, "phi": 1.0 / d, "noise": "sparse"},
                {"sweep": "d", "d": d, "s": d, "phi": 1.0, "noise": "dense"}]  # fmt: skip
        new = _complexity_rows(probs, meta, cfg, keys)
        run.log_rows(new)
        rows += new
        bar.update(1)
    s_values = cfg.phi_counts
    bar.set_description(f"phi sweep at d={cfg.phi_d}, {len(s_values)} densities")
    probs = stack_problems([instance(cfg.phi_d, s) for s in s_values])
    meta = [{"sweep": "phi", "d": cfg.phi_d, "s": s, "phi": s / cfg.phi_d, "noise": f"s={s}"}
            for s in s_values]  # fmt: skip
    new = _complexity_rows(probs, meta, cfg, keys)
    run.log_rows(new)
    rows += new
    bar.update(1)
    bar.close()

    headline: dict[str, float] = {}
    for name in cfg.optimizers:
        for noise in ("sparse", "dense"):
            sel = [r for r in rows if r["sweep"] == "d" and r["opt"] == name
                   and r["noise"] == noise]  # fmt: skip
            ok = [r for r in sel if not r["censored"]]
            headline[f"slope_vs_d/{name}/{noise}"] = slope_headline(
                run, f"slope_vs_d/{name}/{noise}", [r["d"] for r in ok],
                [r["complexity"] for r in ok], "d", len(sel) - len(ok),
            )  # fmt: skip
        sel = [r for r in rows if r["sweep"] == "phi" and r["opt"] == name]
        ok = [r for r in sel if not r["censored"]]
        headline[f"slope_vs_phi/{name}"] = slope_headline(
            run, f"slope_vs_phi/{name}", [r["phi"] for r in ok], [r["complexity"] for r in ok],
            "phi", len(sel) - len(ok),
        )  # fmt: skip
    headline["censored_runs"] = sum(r["censored"] for r in rows)
    run.details["run_steps"] = sum(int(r["checkpoints"][-1]) for r in rows)
    return headline


MARKERS = {"sgd": "o", "signsgd": "s", "signum": "^"}


def _theory_line(ax, xs, ys, slope, color):
    import numpy as np

    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(xs) < 1 or slope is None:
        return
    xx = np.array([xs.min(), xs.max()])
    ax.plot(xx, ys[0] * (xx / xs[0]) ** slope, ls=":", color=color, lw=1.0)


def _legend(name: str, slope: float, pred: float | None) -> str:
    theory = "" if pred is None else f" (theory {pred:g})"
    return f"{label(name)}: slope {slope:.2f}{theory}"


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``sparse_noise_scaling.png``: complexity vs d under sparse noise, under dense noise (one
    panel each, so lines of equal value do not hide each other), and vs phi at fixed d; dotted
    lines: the predicted slopes."""
    from geomopt import plotting
    from geomopt.runs import read_run

    record = read_run(run_dir)
    cfg, rows, head = record.config_values, record.metrics, record.headline
    fig, axes = plotting.figure(3, 1, width=3.4, height=3.0)
    for ax, noise in zip(axes[0, :2], ("sparse", "dense"), strict=True):
        for name in cfg["optimizers"]:
            sel = [r for r in rows if r["sweep"] == "d" and r["opt"] == name
                   and r["noise"] == noise]  # fmt: skip
            ok = [r for r in sel if not r["censored"]]
            xs, ys = [r["d"] for r in ok], [r["complexity"] for r in ok]
            pred = _theory(PREDICTED_VS_D, name, f"{name}/{noise}")
            slope = head[f"slope_vs_d/{name}/{noise}"]
            c = plotting.color(name)
            ax.plot(xs, ys, marker=MARKERS.get(name, "x"), ms=4, color=c,
                    label=_legend(name, slope, pred))  # fmt: skip
            _theory_line(ax, xs, ys, pred, c)
            cens = [r["d"] for r in sel if r["censored"]]
            if cens:
                ax.plot(cens, [cfg["max_steps"]] * len(cens), marker="^", ls="none", color=c,
                        mfc="none", label=f"{label(name)}: censored")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("dimension d")
        phi = "phi = 1/d" if noise == "sparse" else "phi = 1"
        ax.set_title(f"{noise} noise ({phi}), same ||sigma||_1", fontsize=9)
        ax.legend(loc="best", fontsize=7)
    axes[0, 0].set_ylabel(f"grad. evals to avg E||grad f||_1 <= {cfg['eps']:g}")
    ax = axes[0, 2]
    for name in cfg["optimizers"]:
        ok = [r for r in rows if r["sweep"] == "phi" and r["opt"] == name and not r["censored"]]
        xs, ys = [r["phi"] for r in ok], [r["complexity"] for r in ok]
        pred = _theory(PREDICTED_VS_PHI, name, name)
        slope = head[f"slope_vs_phi/{name}"]
        c = plotting.color(name)
        ax.plot(xs, ys, marker=MARKERS.get(name, "x"), ms=4, color=c,
                label=_legend(name, slope, pred))  # fmt: skip
        _theory_line(ax, xs, ys, pred, c)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("noise density phi")
    ax.set_title(f"d = {cfg['phi_d']}, phi swept from 1/d to 1", fontsize=9)
    ax.legend(loc="best", fontsize=7)
    return [plotting.save(fig, figure_path(run_dir, out, "sparse_noise_scaling"))]


EXPERIMENT = Experiment(
    name="signsgd/sparse_noise",
    description="complexity vs d and phi: SignSGD is d-free under sparse noise, SGD pays 1/phi",
    presets={
        "smoke": SparseNoiseConfig(
            dims=(10, 30),
            phi_d=30,
            phi_points=2,
            n_seeds=2,
            levels=2,
            max_steps=20_000,
            per_decade=8,
        ),
        "quick": SparseNoiseConfig(),
        "paper": SparseNoiseConfig(
            dims=log_dims(10, 100_000, 2), phi_d=10_000, phi_points=9, full_max_d=1000
        ),
    },  # fmt: skip
    notes={
        "smoke": "two small d, 2 seeds (seconds)",
        "quick": "d = 10..1000, phi sweep at d = 1000, 16 seeds",
        "paper": "d = 10..10^5 (9 values), phi sweep at d = 10^4, 16 seeds (about a minute)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/signsgd/figures",
    key_numbers=(
        "slope_vs_d/sgd/sparse",
        "slope_vs_d/sgd/dense",
        "slope_vs_phi/sgd",
        "slope_vs_d/signsgd/sparse",
        "slope_vs_d/signsgd/dense",
        "slope_vs_phi/signsgd",
    ),
    paper={
        "slope_vs_d/sgd/sparse": PREDICTED_VS_D["sgd/sparse"],
        "slope_vs_d/sgd/dense": PREDICTED_VS_D["sgd/dense"],
        "slope_vs_phi/sgd": PREDICTED_VS_PHI["sgd"],
        "slope_vs_d/signsgd/sparse": 0.0,
        "slope_vs_d/signsgd/dense": 0.0,
        "slope_vs_phi/signsgd": 0.0,
    },
    paper_source="theory: the paper's complexities, SGD ~ 1/phi (= d for sparse noise), "
    "SignSGD free of d and phi",
    seconds={"smoke": 2.8, "quick": 144.0, "paper": 267.0},
)
