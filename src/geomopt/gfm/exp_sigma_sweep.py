"""``gfm/sigma_sweep``: GFM and the score-based baselines as the score's noise level goes from
0.5 to 0.01, against a trained denoiser.

    uv run experiments/gfm/sigma_sweep.py [smoke|quick|paper] [--field value ...]

The density-aware metrics scale like ``1/sigma`` (Jacobian, Stein's ``s s^T`` term like
``1/sigma^2``) or ``exp(d^2 / 2 sigma^2)`` (1/p) off the manifold, which is where they become
unstable; GFM's residual is linear in the score. Same pairs, initialisations, official baseline
settings and honest outcome counts as ``gfm/paths`` (see ``geomopt.gfm._protocol``); a pair fails
when it stalls, diverges or ends off the manifold. Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_names, check_one_of
from geomopt.experiment import Experiment, Run, check_ints, check_positive, figure_path
from geomopt.gfm._exp_common import INITS, check_common
from geomopt.gfm.exp_train_score import QUICK_DENOISER, SMOKE_DENOISER, DenoiserSpec

METHODS = ("gfm", "jacobian", "stein", "inverse_density")


@dataclasses.dataclass(frozen=True)
class SigmaSweepConfig:
    """Methods at each noise level on the same pairs (see the module doc).

    Paper command: ``uv run experiments/gfm/sigma_sweep.py paper``."""

    manifold: Literal["torus", "twin_peaks"] = "torus"
    """Manifold."""
    sigmas: tuple[float, ...] = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
    """Noise levels of the score."""
    methods: tuple[str, ...] = METHODS
    """Sigma-dependent methods: gfm, jacobian, stein, inverse_density (rbf / land / linear do
    not use the score)."""
    gfm_init: Literal["denoised", "chord", "slerp"] = "denoised"
    """GFM's initial path (see gfm/paths)."""
    gfm_solver: Literal["default", "action", "lm"] = "default"
    """GFM's solver: "default" (``gfm.solve`` without a method: the default a user gets),
    "action" (trust-region descent of the path action, then LM: it reaches minima of the
    action) or "lm" (Levenberg-Marquardt on the residual alone, which also converges to saddles
    such as paths through the torus's hole)."""
    potential: Literal["trained", "analytic"] = "trained"
    """The score: a trained EDM denoiser (default) or the analytic tube potential (ablation)."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Denoiser network and training (cached by manifold + spec)."""
    n_denoisers: int = 3
    """Denoisers trained with seeds ``denoiser.seed``, ``+1``, ...: every method runs on the
    same pairs against each (the replication unit of the failure rates)."""
    lam: float = 1.0
    """GFM's lambda."""
    n_pairs: int = 8
    """Endpoint pairs."""
    pair_seed: int = 0
    """Seed of the pairs."""
    n_points: int = 50
    """Waypoints per path."""
    on_manifold_tol: float = 0.1
    """A path is on the manifold when its largest distance to it is at most this."""
    check_sigma: float = 0.05
    """Noise level of the denoiser displacement check."""


def validate(cfg: SigmaSweepConfig) -> None:
    check_one_of(cfg, "manifold", ("torus", "twin_peaks"))
    check_names(cfg, "methods", METHODS)
    check_one_of(cfg, "gfm_init", INITS)
    if not cfg.sigmas:
        raise ValueError(f"sigmas={cfg.sigmas!r}: expected at least one noise level")
    check_positive(cfg, "sigmas")
    keys = [f"{s:g}" for s in cfg.sigmas]
    if len(set(keys)) != len(keys):
        raise ValueError(f"sigmas={cfg.sigmas!r}: expected distinct values (to 6 digits, as "
                         "the headline keys print them)")  # fmt: skip
    check_common(cfg)
    check_ints(cfg, "n_denoisers")
    if cfg.potential == "analytic" and cfg.n_denoisers != 1:
        raise ValueError(f"n_denoisers={cfg.n_denoisers!r} with potential 'analytic': expected 1 "
                         "(the analytic potential has no training seed)")  # fmt: skip


def run(cfg: SigmaSweepConfig, run: Run) -> dict[str, float]:
    import dataclasses as dc

    import jax

    from geomopt.gfm._potentials import potential_for
    from geomopt.gfm._protocol import (
        evaluate,
        failure_reasons,
        sample_pairs,
        solve_method,
        summarise,
    )
    from geomopt.gfm.exp_paths import markdown_table
    from geomopt.manifolds import get_manifold

    manifold = get_manifold(cfg.manifold)
    headline: dict[str, float] = {}
    table, reasons = [], []
    run.details["denoisers"] = []
    pooled: dict[tuple[float, str], list] = {}
    bar = run.progress(
        total=cfg.n_denoisers * len(cfg.sigmas) * len(cfg.methods), desc="sigma sweep"
    )
    for rep in range(cfg.n_denoisers):
        spec = dc.replace(cfg.denoiser, seed=cfg.denoiser.seed + rep)
        model, info = potential_for(run, cfg.manifold, cfg.potential, spec)
        run.details["denoisers"].append(info)
        if "sample_mean_distance" in info:
            headline[f"denoiser={rep}/sample_distance_ratio"] = (
                info["sample_mean_distance"] / info["data_mean_distance"]
            )
        with jax.enable_x64(True):
            x0, x1 = sample_pairs(manifold, cfg.n_pairs, jax.random.key(cfg.pair_seed))
            for sigma in cfg.sigmas:
                for method in cfg.methods:
                    bar.set_description(f"denoiser {rep}, sigma={sigma:g}, {method}")
                    out = solve_method(
                        method, x0, x1, model=model, sigma=sigma, lam=cfg.lam,
                        n_points=cfg.n_points, init=cfg.gfm_init, solver=cfg.gfm_solver,
                    )  # fmt: skip
                    ev = evaluate(
                        out["paths"], manifold=manifold, model=model, sigma=sigma, lam=cfg.lam,
                        check_sigma=cfg.check_sigma, tol=cfg.on_manifold_tol,
                    )  # fmt: skip
                    why = failure_reasons(
                        out["paths"], out["status"], out["code"], ev, manifold,
                        cfg.on_manifold_tol,
                    )  # fmt: skip
                    run.log_rows(
                        dict(denoiser=rep, sigma=sigma, method=method, pair=i,
                             status=out["status"][i], code=int(out["code"][i]),
                             iterations=int(out["iterations"][i]),
                             error_mean=ev["error_mean"][i], error_max=ev["error_max"][i],
                             on_manifold=bool(ev["on_manifold"][i]), reason=why[i])
                        for i in range(cfg.n_pairs)
                    )  # fmt: skip
                    if method == "gfm":
                        reasons += [
                            dict(denoiser=rep, sigma=sigma, pair=i, reason=r)
                            for i, r in enumerate(why) if r != "ok"
                        ]  # fmt: skip
                    row = dict(denoiser=rep, sigma=sigma, method=method,
                               **summarise(out["status"], ev))  # fmt: skip
                    row["seconds"] = out["seconds"]
                    table.append(row)
                    headline[f"{method}/sigma={sigma:g}/failure/denoiser={rep}"] = (
                        1.0 - row["success"]
                    )
                    pooled.setdefault((sigma, method), []).append(row)
                    bar.update(1)
    bar.close()
    for (sigma, method), rows in pooled.items():
        n = sum(r["n"] for r in rows)
        ok = sum(r["success"] * r["n"] for r in rows)
        finite = [r for r in rows if r["n_finite"] > 0]
        err = (sum(r["error_mean"] * r["n_finite"] for r in finite)
               / sum(r["n_finite"] for r in finite)) if finite else float("nan")  # fmt: skip
        headline[f"{method}/sigma={sigma:g}/failure"] = 1.0 - ok / n
        headline[f"{method}/sigma={sigma:g}/error"] = err
        if not finite:
            run.explain_nan(
                f"{method}/sigma={sigma:g}/error", "every path diverged (non-finite waypoints)"
            )
    run.details["table"] = table
    run.details["gfm_failures"] = reasons
    text = markdown_table(table, ("denoiser", "sigma", "method"))
    if reasons:
        text += "\n\nGFM failures (denoiser, sigma, pair: why)\n\n" + "\n".join(
            f"- {r['denoiser']}, {r['sigma']:g}, {r['pair']}: {r['reason']}" for r in reasons
        )
    (run.path / "table.md").write_text(text + "\n")
    run.print(text)
    headline["n_denoisers"] = float(cfg.n_denoisers)
    return headline


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_sigma_sweep.png``: mean manifold error, the fraction of paths off the manifold and
    the failure fraction (stalled, diverged or off) vs sigma per method."""
    import numpy as np

    from geomopt import plotting
    from geomopt.gfm._protocol import label_of
    from geomopt.gfm.exp_paths import method_color
    from geomopt.runs import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    table = record.details["table"]
    fig, axes = plotting.figure(3, 1, width=3.4, height=2.9)
    ax_e, ax_o, ax_f = axes.ravel()
    sigmas = sorted({r["sigma"] for r in table})
    n_methods = len(cfg["methods"])
    for j, method in enumerate(cfg["methods"]):
        # pooled over the denoisers (runs made before n_denoisers existed have one)
        s = np.array(sorted({r["sigma"] for r in table if r["method"] == method}))
        by = [[r for r in table if r["method"] == method and r["sigma"] == v] for v in s]
        err = np.array([np.nanmean([r["error_mean"] for r in rs]) for rs in by], float)
        fail = np.array([1.0 - np.mean([r["success"] for r in rs]) for rs in by])
        off = np.array([1.0 - np.mean([r["on_manifold"] for r in rs]) for rs in by])
        c = method_color(method)
        ax_e.plot(s, err, "o-", color=c, label=label_of(method, cfg))
        # a small vertical offset per method so that equal fractions do not hide each other
        offset = 0.02 * (j - (n_methods - 1) / 2)
        ax_o.plot(s, off + offset, "o-", color=c, label=label_of(method, cfg))
        ax_f.plot(s, fail + offset, "o-", color=c, label=label_of(method, cfg))
    for ax in (ax_e, ax_o, ax_f):
        ax.set_xscale("log")
        ax.set_xticks(sigmas)
        ax.set_xticklabels([f"{v:g}" for v in sigmas])
        ax.minorticks_off()
        ax.set_xlabel("sigma of the score")
        ax.invert_xaxis()
    ax_e.set_yscale("log")
    ax_e.set_ylabel("mean distance to the manifold")
    n_den = cfg.get("n_denoisers", 1)
    ax_e.set_title(f"{cfg['manifold']}, {cfg['n_pairs']} pairs x {n_den} denoisers, "
                   f"{cfg['potential']}", fontsize=9)  # fmt: skip
    ax_o.set_ylabel("fraction off the manifold")
    ax_o.set_title(f"off: max dist. > {cfg['on_manifold_tol']:g}; lines offset", fontsize=9)
    ax_f.set_ylabel("fraction failed (stalled, diverged, off)")
    ax_f.set_title("failed: off, or the solver stalled / diverged", fontsize=9)
    for ax in (ax_o, ax_f):
        ax.set_ylim(-0.05, 1.05)
    ax_f.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return [plotting.save(fig, figure_path(run_dir, out, "gfm_sigma_sweep"))]


EXPERIMENT = Experiment(
    name="gfm/sigma_sweep",
    description="GFM vs the score-based metrics as sigma goes 0.5 -> 0.01 (trained score)",
    presets={
        "smoke": SigmaSweepConfig(
            sigmas=(0.1, 0.01),
            methods=("gfm", "stein"),
            denoiser=SMOKE_DENOISER,
            n_denoisers=1,
            n_pairs=2,
            n_points=10,
        ),  # fmt: skip
        "quick": SigmaSweepConfig(n_pairs=16),
        "paper": SigmaSweepConfig(denoiser=DenoiserSpec(), n_pairs=32),
    },
    notes={
        "smoke": "2 sigmas, GFM + Stein, 2 pairs, tiny denoiser (seconds)",
        "quick": "torus, 6 sigmas, 4 methods, 16 pairs x 3 denoisers, 50 waypoints (6.5 min wall "
        "at load ~3 with the denoisers cached; about 35 s to train each)",
        "paper": "3 official 128x4 denoisers, 32 pairs each, full scale (about 30 min on 2 cores, "
        "most of it in the 1/p baseline; GFM alone: --methods gfm, about 5 min)",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "gfm/sigma=0.05/failure",
        "gfm/sigma=0.02/failure",
        "gfm/sigma=0.01/failure",
        "gfm/sigma=0.01/error",
        "jacobian/sigma=0.01/error",
    ),
    # smoke: inside reproduce.py, after gfm/paths compiled the same solves (about 10 s alone);
    # quick 6.5 min wall at load ~3 with the denoisers cached (README.md); paper estimated from
    # its GFM-only run (5.4 min) and the earlier single-denoiser full run (634 s)
    seconds={"smoke": 0.3, "quick": 390.0, "paper": 1800.0},
)
