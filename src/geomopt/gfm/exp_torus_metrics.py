"""``gfm/torus_metrics``: the official torus runs A / B / C: three (alpha, beta) priors
``G = alpha e_th e_th^T + beta e_ph e_ph^T + gamma n n^T`` between (1.2, 0, 0.4) and
(-1.2, 0, 0.4), against a trained torus denoiser.

    uv run experiments/gfm/torus_metrics.py [smoke|quick|paper] [--field value ...]

Exactly as the official runs: sigma 0.1, lambda 1, gamma 1; run A (0.05, 0.5) with 20 waypoints,
B (5, 0.1) with 20, C (1, 0.01) with 25; the initial path linear in the intrinsic angles mapped
onto the surface (both endpoints have poloidal angle pi/2, so it is the top circle). Each run is
solved by ``gfm.solve`` with its default method (action descent + LM), by our Levenberg-Marquardt
(one solve at sigma; and ``lm_continuation``: solved at sigma
0.3, then 0.2, then 0.1, each level warm-starting the next, ``gfm.solve_continuation``) and by the
official Adam (lr 1e-3 / 5e-3 / 5e-4, clip 10, 1501 iterations). A route is named by the
poloidal angle at the path's middle (outer 0, top pi/2, inner pi, bottom -pi/2); an off-manifold
path is reported as such. Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

from geomopt.checks import (
    check_ints,
    check_names,
    check_nonnegative,
    check_one_of,
    check_positive,
    is_number,
)
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.gfm.exp_train_score import QUICK_DENOISER, SMOKE_DENOISER, DenoiserSpec, validate_spec

OFFICIAL_RUNS = (("A", 0.05, 0.5, 20, 1e-3), ("B", 5.0, 0.1, 20, 5e-3), ("C", 1.0, 0.01, 25, 5e-4))
SOLVERS = ("default", "action", "lm", "lm_continuation", "adam")
DEFAULT_SOLVERS = ("default", "lm", "lm_continuation", "adam")


@dataclasses.dataclass(frozen=True)
class TorusMetricsConfig:
    """The official torus metric-prior runs (see the module doc).

    Paper command: ``uv run experiments/gfm/torus_metrics.py paper``."""

    runs: tuple[tuple[str, float, float, int, float], ...] = OFFICIAL_RUNS
    """(name, alpha, beta, waypoints, Adam lr) per run (official A, B, C)."""
    gamma: float = 1.0
    """Normal-direction weight of the prior."""
    sigma: float = 0.1
    """Noise level of the score (official 0.1)."""
    lam: float = 1.0
    """GFM's lambda (official 1)."""
    solvers: tuple[str, ...] = DEFAULT_SOLVERS
    """default (``gfm.solve`` without a method: the default a user gets), action (ours:
    trust-region descent of the path action, then LM; one solve at sigma),
    lm (ours, one solve at sigma), lm_continuation (ours: gfm.solve_continuation over
    continuation_sigmas, each level warm-starting the next; the solver README's recommendation for
    learned potentials) and adam (official: clip 10, adam_iters iterations, the run's lr)."""
    continuation_sigmas: tuple[float, ...] = (0.3, 0.2)
    """Noise levels solved before sigma by lm_continuation (largest first)."""
    adam_iters: int = 1501
    """Official Adam iterations."""
    potential: Literal["trained", "analytic"] = "trained"
    """The score: a trained EDM denoiser (default) or the analytic tube potential (ablation)."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Denoiser network and training (cached by manifold + spec)."""
    on_manifold_tol: float = 0.1
    """A path is on the manifold when its largest distance to it is at most this."""


def _good_run(r) -> bool:
    if not (isinstance(r, tuple) and len(r) == 5 and isinstance(r[0], str) and r[0]):
        return False
    _, alpha, beta, k, lr = r
    positive = all(is_number(v) and math.isfinite(v) and v > 0 for v in (alpha, beta, lr))
    return positive and isinstance(k, int) and not isinstance(k, bool) and k >= 4


def validate(cfg: TorusMetricsConfig) -> None:
    runs = cfg.runs
    if not runs or not all(_good_run(r) for r in runs) or len({r[0] for r in runs}) != len(runs):
        raise ValueError(
            f"runs={runs!r}: expected at least one (name, alpha, beta, waypoints, lr) with "
            "distinct non-empty names, finite alpha, beta, lr > 0 and integer waypoints >= 4"
        )
    check_names(cfg, "solvers", SOLVERS)
    check_positive(cfg, "gamma", "sigma", "on_manifold_tol")
    check_nonnegative(cfg, "lam")
    cs = cfg.continuation_sigmas
    ok = all(is_number(v) and math.isfinite(v) and v > cfg.sigma for v in cs)
    if not ok or len(set(cs)) != len(cs) or list(cs) != sorted(cs, reverse=True):
        raise ValueError(
            f"continuation_sigmas={cs!r}: expected distinct finite numbers > sigma={cfg.sigma!r}, "
            "largest first"
        )
    if not cs and "lm_continuation" in cfg.solvers:
        raise ValueError(
            "continuation_sigmas=(): expected at least one level above sigma for the "
            "lm_continuation solver (without one it is the lm solver)"
        )
    check_ints(cfg, "adam_iters")
    check_one_of(cfg, "potential", ("trained", "analytic"))
    validate_spec(cfg.denoiser)


ROUTES = {"outer": 0.0, "top": math.pi / 2, "inner": math.pi, "bottom": -math.pi / 2}


def angle_linear_init(n_points: int, th0, ph0, th1, ph1, major=1.2, minor=0.4):
    """The official initialisation: linear in the intrinsic angles (th, ph), mapped onto the
    torus surface."""
    import numpy as np

    t = np.linspace(0.0, 1.0, n_points)
    th, ph = th0 + t * (th1 - th0), ph0 + t * (ph1 - ph0)
    ring = major + minor * np.cos(th)
    return np.stack([ring * np.cos(ph), ring * np.sin(ph), minor * np.sin(th)], 1)


def poloidal_angle(p, major=1.2):
    import numpy as np

    p = np.asarray(p)
    return np.arctan2(p[..., 2], np.hypot(p[..., 0], p[..., 1]) - major)


def route_of(path) -> str:
    """The route's name from the poloidal angle at the middle waypoint (nearest of ROUTES)."""
    th = float(poloidal_angle(path[len(path) // 2]))
    return min(ROUTES, key=lambda r: abs(math.remainder(th - ROUTES[r], 2 * math.pi)))


def run(cfg: TorusMetricsConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._exp_protocol import status_of_codes
    from geomopt.gfm._potentials import potential_for
    from geomopt.manifolds import get_manifold

    model, info = potential_for(run, "torus", cfg.potential, cfg.denoiser)
    run.details["denoiser"] = info
    torus = get_manifold("torus")
    headline: dict[str, float] = {}
    arrays, rows = {}, []
    bar = run.progress(total=len(cfg.runs) * len(cfg.solvers), desc="torus runs")
    with jax.enable_x64(True):
        score = gfm.ScoreAt(model, cfg.sigma)
        for name, alpha, beta, k, lr in cfg.runs:
            metric = gfm.TorusMetric(alpha, beta, cfg.gamma)
            init = angle_linear_init(int(k), math.pi / 2, 0.0, math.pi / 2, math.pi)
            for solver in cfg.solvers:
                bar.set_description(f"run {name}, {solver}")
                path, rep, levels, seconds = _solve(cfg, solver, model, score, metric, init, lr)
                p = np.asarray(path)
                m = gfm.path_metrics(p, manifold=torus, metric=metric, score=score, lam=cfg.lam)
                finite = bool(np.isfinite(p).all())
                status = str(status_of_codes(np.asarray([rep.code]), np.asarray([finite]))[0])
                if solver == "adam" and status == "stalled" and int(rep.code) == 1:
                    status = "budget"  # the official fixed budget, no convergence test
                err_max = float(m["manifold_error_max"])
                on = finite and err_max <= cfg.on_manifold_tol
                row = dict(
                    run=name, alpha=alpha, beta=beta, n_points=int(k), solver=solver,
                    status=status, code=int(rep.code), iterations=int(rep.iterations),
                    residual=float(rep.residual), error_mean=float(m["manifold_error_mean"]),
                    error_max=err_max, on_manifold=on,
                    success=on and status in ("converged", "budget"),
                    route=route_of(p) if on else "off-manifold",
                    prior_length=float(m["prior_length"]), seconds=seconds,
                    levels=levels,
                )  # fmt: skip
                rows.append(row)
                arrays[f"{name}/{solver}"] = p
                _report(run, headline, row)
                bar.update(1)
    bar.close()
    for solver in cfg.solvers:
        routes = {r["route"] for r in rows if r["solver"] == solver and r["success"]}
        headline[f"{solver}/distinct_routes"] = float(len(routes))
    run.log_rows(rows)
    run.details["rows"] = rows
    run.save_arrays("paths.npz", **arrays)
    return headline


def _solve(cfg, solver, model, score, metric, init, lr):
    """One run by one solver from ``init``: ``(path, report, levels, seconds)``, ``levels`` the
    continuation's per-level reports (empty for a single solve)."""
    from geomopt import gfm

    k = len(init)
    common = dict(metric=metric, lam=cfg.lam, n_points=k, init=init)
    if solver == "lm_continuation":
        sigmas = (*cfg.continuation_sigmas, cfg.sigma)
        path, reps = gfm.solve_continuation(init[0], init[-1], model=model, sigmas=sigmas, **common)
        rep = reps[-1]
        seconds = sum(r.wall_time for r in reps)
        levels = [
            dict(sigma=s, code=int(r.code), iterations=int(r.iterations),
                 residual=float(r.residual))
            for s, r in zip(sigmas, reps, strict=True)
        ]  # fmt: skip
        return path, rep, levels, seconds
    kw = {} if solver == "default" else dict(method=solver)
    if solver == "adam":
        kw = dict(method="adam", lr=lr, clip=10.0, max_iters=cfg.adam_iters)
    path, rep = gfm.solve(init[0], init[-1], score=score, **common, **kw)
    return path, rep, [], rep.wall_time


def _report(run, headline, row):
    """One solve's headline keys (NaN explained) and its printed line."""
    name, solver = row["run"], row["solver"]
    headline[f"{name}/{solver}/error"] = row["error_mean"]
    headline[f"{name}/{solver}/residual"] = row["residual"]
    headline[f"{name}/{solver}/success"] = float(row["success"])
    for what in ("error", "residual"):
        if not math.isfinite(headline[f"{name}/{solver}/{what}"]):
            run.explain_nan(f"{name}/{solver}/{what}",
                            "the solve diverged (non-finite)")  # fmt: skip
    run.print(
        f"run {name} ({row['alpha']:g}, {row['beta']:g}), {solver}: {row['status']} after "
        f"{row['iterations']} iterations, residual {row['residual']:.3g}, mean / max "
        f"distance {row['error_mean']:.4f} / {row['error_max']:.4f}, route {row['route']}"
    )


RUN_COLORS = {"A": "#d62728", "B": "#1f77b4", "C": "#2ca02c"}
LINESTYLES = {"default": ":", "action": ":", "lm": "-", "lm_continuation": "-.", "adam": "--"}
LINE_NAMES = {"-": "solid", "-.": "dash-dot", "--": "dashed", ":": "dotted"}


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_torus_metrics.png``: every path on the torus (3-D; action descent dotted, LM solid,
    LM with continuation dash-dotted, official Adam dashed) and, one panel per solver, unrolled
    in the intrinsic angles (toroidal ph vs poloidal th) with each run's route, middle poloidal
    angle, status and mean distance."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.gfm.exp_paths import surface

    record = read_run(run_dir)
    rows = record.details["rows"]
    with np.load(Path(run_dir) / "paths.npz") as f:
        arrays = dict(f)
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    n = len(solvers)
    fig = plotting.figure(n + 1, 1, width=3.6, height=3.6)[0]
    fig.clf()
    ax3 = fig.add_subplot(1, n + 1, 1, projection="3d")
    panels = {s: fig.add_subplot(1, n + 1, i + 2) for i, s in enumerate(solvers)}
    surface(ax3, "torus")
    for r in rows:
        p = arrays[f"{r['run']}/{r['solver']}"]
        c = RUN_COLORS.get(r["run"], plotting.color(r["run"]))
        ls = LINESTYLES.get(r["solver"], ":")
        th_mid = float(poloidal_angle(p[len(p) // 2]))
        label = (
            f"{r['run']} ({r['alpha']:g}, {r['beta']:g}): {r['route']} (th_mid {th_mid:.2f}),\n"
            f"{r['status']}, residual {r['residual']:.2g}, d {r['error_mean']:.3f}"
        )
        ax3.plot(*p.T, ls, color=c, linewidth=1.5)
        ph = np.unwrap(np.arctan2(p[:, 1], p[:, 0]))
        th = np.unwrap(poloidal_angle(p))
        panels[r["solver"]].plot(ph, th, ls, color=c, marker=".", label=label)
    ax3.set_xlabel("x")
    ax3.set_ylabel("y")
    ax3.set_zlabel("z")
    ax3.set_zticks([-0.4, 0.0, 0.4])
    styles = ", ".join(f"{s} {LINE_NAMES[LINESTYLES.get(s, ':')]}" for s in solvers)
    ax3.set_title(f"paths on the torus\n{styles}", fontsize=7)
    for solver, ax in panels.items():
        mine = [r for r in rows if r["solver"] == solver]
        routes = {r["route"] for r in mine if r["success"]}
        ax.set_xlabel("toroidal angle ph")
        ax.set_xticks([0, np.pi / 2, np.pi])
        ax.set_xticklabels(["0", "pi/2", "pi"])
        ax.set_yticks([-np.pi / 2, 0, np.pi / 2, np.pi])
        ax.set_yticklabels(["-pi/2 bottom", "0 outer", "pi/2 top", "pi inner"])
        ax.set_title(f"{solver}: {len(routes)} distinct successful route(s)", fontsize=8)
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.24), fontsize=6)
    panels[solvers[0]].set_ylabel("poloidal angle th")
    fig.get_layout_engine().set(wspace=0.12)  # room for the 3-D panel's z label
    return [plotting.save(fig, figure_path(run_dir, out, "gfm_torus_metrics"))]


EXPERIMENT = Experiment(
    name="gfm/torus_metrics",
    description="the official torus runs A/B/C: three priors, three routes? (trained score)",
    presets={
        "smoke": TorusMetricsConfig(
            runs=OFFICIAL_RUNS[:1], solvers=("default", "adam"), denoiser=SMOKE_DENOISER,
            adam_iters=50,
        ),
        "quick": TorusMetricsConfig(),
        "paper": TorusMetricsConfig(denoiser=DenoiserSpec()),
    },
    notes={
        "smoke": "run A with the default solver and a 50-iteration official Adam, tiny denoiser "
        "(two solvers: the loop over solvers runs)",
        "quick": "official runs A/B/C: the default solver, LM, LM with continuation and official "
        "Adam (1.7 min wall at load ~3, cached denoiser)",
        "paper": "official runs A/B/C with the official 128x4 denoiser: the default solver, LM, LM "
        "with continuation and official Adam (1.6 min wall at load ~3, cached denoiser)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "A/default/error",
        "A/default/success",
        "default/distinct_routes",
        "B/default/error",
        "C/default/success",
    ),
    # quick 102 s and paper 97 s wall at load ~3, denoiser cached (README.md, 2026-12-04)
    seconds={"smoke": 25.0, "quick": 102.0, "paper": 97.0},
)
