"""``gfm/sigma_sweep``: does GFM's default solver stay on the data, on every manifold of
:mod:`geomopt.manifolds`, as the score's noise level falls, with exact and trained scores?

    uv run experiments/gfm/sigma_sweep.py [smoke|quick|paper] [--field value ...]

Per manifold, score ("exact": the smoothed sampling law; "trained": EDM denoisers, one per
seed) and sigma, every pair is solved by ``gfm.solve``'s default solver from the denoised start
(``gfm``), from the chord (``gfm@chord``) and with two remedies that need no true manifold
(``gfm+refine``, ``gfm+continuation``: :data:`GFM_VARIANTS`); optionally the density-aware
baselines (``--methods ... jacobian stein inverse_density``: they scale like ``1/sigma`` or
worse off the manifold). A pair **succeeds** when the solve converged and every waypoint and
segment midpoint is within ``on_manifold_tol`` of the surface (``converged_on``; on two moons
``converged_on_reachable`` counts only the pairs on one arc, the others have no on-surface
path). Headline keys (flat): ``<manifold>/<score>/<method>/sigma=<s>/converged_on`` (pooled
over the denoisers, ``/denoiser=<i>`` each), ``.../error`` (mean distance of the waypoints);
the support flag of ``SolveReport`` against the truth, ``<manifold>/<score>/support/sigma=<s>/
false_positive`` (flag off, path on) and ``/false_negative`` (flag on, path off), and the
threshold fitted on the even pairs at sigma <= ``support_fit_max_sigma`` with held-out rates on
the odd ones (``support/threshold_fit``, ``<manifold|all>/support/heldout/<fit|default>/...``);
with ``reference``, a solve from the true surface's intrinsic-coordinate line (an oracle start)
and, where ``gfm`` left the surface while that one stayed, which has the lower discrete action
(``<manifold>/<score>/shortcut/sigma=<s>/lower_action``: the objective prefers the shortcut).
Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_one_of, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.gfm._exp_common import INITS, check_common
from geomopt.gfm.exp_train_score import (
    MANIFOLD_NAMES,
    QUICK_DENOISER,
    SMOKE_DENOISER,
    DenoiserSpec,
)

GFM_VARIANTS = ("gfm", "gfm@chord", "gfm+refine", "gfm+continuation")
"""GFM by ``gfm.solve``'s default solver: from ``gfm_init`` (``gfm``), from the chord
(``gfm@chord``), and two remedies that need no true manifold: ``gfm+refine`` (where the
support check says off, a waypoint inserted in every segment and the path solved again at
``2K - 1`` waypoints, so the potential is felt where the check saw the gap) and
``gfm+continuation`` (solved at ``continuation_sigmas`` above ``sigma`` first, each level
starting from the last)."""
BASELINES = ("jacobian", "stein", "inverse_density")
METHODS = GFM_VARIANTS + BASELINES
POTENTIALS = ("exact", "trained", "analytic")


@dataclasses.dataclass(frozen=True)
class SigmaSweepConfig:
    """GFM (and optionally the score-based baselines) at each noise level on the same pairs,
    on every manifold, with exact and trained scores (see the module doc).

    Paper command: ``uv run experiments/gfm/sigma_sweep.py paper``."""

    manifolds: tuple[str, ...] = MANIFOLD_NAMES
    """Manifolds (geomopt.manifolds names)."""
    potentials: tuple[str, ...] = ("exact", "trained")
    """Scores: "exact" (the manifold's sampling law with its data noise smoothed at sigma:
    closed form on the circle and sphere, quadrature elsewhere), "trained" (EDM denoisers, one
    per seed) or "analytic" (the tube potential, an ablation)."""
    sigmas: tuple[float, ...] = (0.1, 0.05, 0.02)
    """Noise levels of the score."""
    methods: tuple[str, ...] = ("gfm", "gfm@chord", "gfm+refine", "gfm+continuation")
    """GFM variants (gfm, gfm@chord, gfm+refine, gfm+continuation) and sigma-dependent
    baselines (jacobian, stein, inverse_density)."""
    gfm_init: Literal["denoised", "chord", "slerp"] = "denoised"
    """Initial path of ``gfm`` and its remedies (see gfm/paths)."""
    gfm_solver: Literal["default", "action", "lm"] = "default"
    """GFM's solver: "default" (``gfm.solve`` without a method: the default a user gets),
    "action" or "lm"."""
    reference: bool = True
    """Also solve every pair from the intrinsic-coordinate line on the true surface (an oracle
    start, not a method): where it converges on the surface and ``gfm`` ends off it, the two
    discrete actions say which one the objective prefers (``shortcut`` keys)."""
    continuation_sigmas: tuple[float, ...] = (0.2, 0.1)
    """Levels ``gfm+continuation`` solves at first (those above the sweep's sigma)."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Denoiser network and training (cached by manifold + spec)."""
    n_denoisers: int = 3
    """Denoisers trained with seeds ``denoiser.seed``, ``+1``, ...: every method runs on the
    same pairs against each (exact and analytic scores run once)."""
    lam: float = 1.0
    """GFM's lambda."""
    n_pairs: int = 16
    """Endpoint pairs per manifold."""
    pair_seed: int = 0
    """Seed of the pairs."""
    n_points: int = 50
    """Waypoints per path."""
    on_manifold_tol: float = 0.1
    """A path is on the surface when its largest distance to it, over the waypoints and the
    segment midpoints, is at most this."""
    check_sigma: float = 0.05
    """Noise level of the denoiser displacement check of the baselines' table rows."""
    support_fit_max_sigma: float = 0.05
    """The support threshold is fitted (even pairs) and tested (odd pairs) on the GFM solves
    at sigma at most this: the check is in units of sigma, so it cannot resolve the tolerance
    when sigma is close to it."""


def validate(cfg: SigmaSweepConfig) -> None:
    check_names(cfg, "manifolds", MANIFOLD_NAMES)
    check_names(cfg, "potentials", POTENTIALS)
    check_names(cfg, "methods", METHODS)
    check_one_of(cfg, "gfm_init", INITS)
    for name in ("sigmas", "potentials", "manifolds", "methods"):
        if not getattr(cfg, name):
            raise ValueError(f"{name}=(): expected at least one value")
    check_positive(cfg, "sigmas", "continuation_sigmas", "support_fit_max_sigma")
    keys = [f"{s:g}" for s in cfg.sigmas]
    if len(set(keys)) != len(keys):
        raise ValueError(f"sigmas={cfg.sigmas!r}: expected distinct values (to 6 digits, as "
                         "the headline keys print them)")  # fmt: skip
    check_common(cfg)
    check_ints(cfg, "n_denoisers")


def _levels(cfg, sigma):
    return sorted({s for s in cfg.continuation_sigmas if s > sigma}, reverse=True) + [sigma]


def _solve_gfm(cfg, x0, x1, model, sigma, init, n_points=None):
    """``gfm.solve`` (the sweep's solver) from ``init`` (a name or paths): ``(paths, report)``."""
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._protocol import initial_paths

    k = cfg.n_points if n_points is None else n_points
    path0 = initial_paths(init, x0, x1, k, model=model) if isinstance(init, str) else init
    kw = {} if cfg.gfm_solver == "default" else dict(method=cfg.gfm_solver)
    paths, rep = gfm.solve(x0, x1, score=gfm.ScoreAt(model, sigma), lam=cfg.lam, n_points=k,
                           init=path0, **kw)  # fmt: skip
    return np.asarray(paths), rep


def _outcome(manifold, paths, report, tol):
    """Per-pair truth and flag of solved paths."""
    import numpy as np

    from geomopt.gfm._adherence import distance_profile

    prof = distance_profile(manifold, paths)
    dmax = prof.max(-1)
    on = np.nan_to_num(dmax, nan=np.inf) <= tol
    if report is None:
        conv = np.zeros(len(paths), bool)
        flag, smax = np.full(len(paths), np.nan), np.full(len(paths), np.nan)
    else:
        conv = np.asarray(report.converged, bool)
        flag = (np.asarray(report.on_support, float) if report.on_support is not None
                else np.full(len(paths), np.nan))  # fmt: skip
        smax = (np.asarray(report.support_max, float) if report.support_max is not None
                else np.full(len(paths), np.nan))  # fmt: skip
    return dict(
        max_distance=dmax, error_mean=prof[:, ::2].mean(-1), on_surface=on, converged=conv,
        flag_on=flag, support_max=smax,
    )  # fmt: skip


def _gfm_variant(cfg, method, x0, x1, model, sigma, base):
    """Paths and report of one GFM variant; ``base`` is the ``gfm`` solve ``(paths, report)``
    (``gfm+refine`` starts from it)."""
    import numpy as np

    from geomopt.gfm._adherence import insert_midpoints

    if method == "gfm":
        return base
    if method == "gfm@chord":
        return _solve_gfm(cfg, x0, x1, model, sigma, "chord")
    if method == "gfm+continuation":
        paths = cfg.gfm_init
        for s in _levels(cfg, sigma):
            paths, rep = _solve_gfm(cfg, x0, x1, model, s, paths)
        return paths, rep
    if method == "gfm+refine":
        paths, rep = base
        off = ~np.asarray(rep.on_support, bool)
        if not off.any():
            return paths, rep
        fine, frep = _solve_gfm(
            cfg,
            x0[off],
            x1[off],
            model,
            sigma,
            insert_midpoints(paths[off]),
            n_points=2 * cfg.n_points - 1,
        )
        return (paths, rep), (off, fine, frep)
    raise ValueError(f"method {method!r}: not a GFM variant")


def run(cfg: SigmaSweepConfig, run: Run) -> dict[str, float]:
    import dataclasses as dc
    import time

    import jax
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._adherence import (
        action_difference,
        choose_threshold,
        components,
        exact_potential,
        flag_errors,
    )
    from geomopt.gfm._potentials import potential_for
    from geomopt.gfm._protocol import evaluate, sample_pairs, solve_method
    from geomopt.manifolds import get_manifold

    headline: dict[str, float] = {}
    rows: list[dict] = []  # one per pair and solve
    table: list[dict] = []
    run.details["denoisers"], run.details["exact_nodes"] = [], {}
    jobs = [(m, p, rep) for m in cfg.manifolds for p in cfg.potentials
            for rep in range(cfg.n_denoisers if p == "trained" else 1)]  # fmt: skip
    n_solves = len(cfg.methods) + int(cfg.reference)
    bar = run.progress(total=len(jobs) * len(cfg.sigmas) * n_solves, desc="sigma sweep")
    for name, potential, rep in jobs:
        manifold = get_manifold(name)
        model = None
        if potential != "exact":
            spec = dc.replace(cfg.denoiser, seed=cfg.denoiser.seed + rep)
            model, info = potential_for(run, name, potential, spec)
            run.details["denoisers"].append({"manifold": name, "denoiser": rep, **info})
            if "sample_mean_distance" in info:
                headline[f"{name}/trained/denoiser={rep}/sample_distance_ratio"] = (
                    info["sample_mean_distance"] / info["data_mean_distance"]
                )
        with jax.enable_x64(True):
            x0, x1 = sample_pairs(manifold, cfg.n_pairs, jax.random.key(cfg.pair_seed))
            same = components(manifold, x0) == components(manifold, x1)
            for sigma in cfg.sigmas:
                if potential == "exact":
                    model, nodes = exact_potential(manifold, sigma)
                    run.details["exact_nodes"][f"{name}/sigma={sigma:g}"] = nodes
                tag = dict(manifold=name, potential=potential, denoiser=rep, sigma=sigma)

                def record(method, out, seconds=float("nan"), tag=tag, same=same):
                    _record(rows, table, dict(tag, method=method), same, out, seconds)
                    bar.update(1)

                base = None
                if any(m in GFM_VARIANTS for m in cfg.methods):
                    bar.set_description(f"{name}, {potential} {rep}, sigma={sigma:g}, gfm")
                    t0 = time.perf_counter()
                    base = _solve_gfm(cfg, x0, x1, model, sigma, cfg.gfm_init)
                    base_seconds = time.perf_counter() - t0
                for method in cfg.methods:
                    bar.set_description(f"{name}, {potential} {rep}, sigma={sigma:g}, {method}")
                    t0 = time.perf_counter()
                    if method in GFM_VARIANTS:
                        res = _gfm_variant(cfg, method, x0, x1, model, sigma, base)
                        if method == "gfm+refine" and isinstance(res[1], tuple):
                            (paths, rep0), (off, fine, frep) = res
                            out = _outcome(manifold, paths, rep0, cfg.on_manifold_tol)
                            new = _outcome(manifold, fine, frep, cfg.on_manifold_tol)
                            for k in out:
                                out[k] = np.array(out[k])
                                out[k][off] = new[k]
                        else:
                            out = _outcome(manifold, res[0], res[1], cfg.on_manifold_tol)
                        secs = time.perf_counter() - t0
                        if method == "gfm":
                            secs = base_seconds
                    else:
                        res = solve_method(method, x0, x1, model=model, sigma=sigma,
                                           lam=cfg.lam, n_points=cfg.n_points)  # fmt: skip
                        out = _outcome(manifold, res["paths"], None, cfg.on_manifold_tol)
                        out["converged"] = res["status"] != "diverged"  # fixed budget
                        ev = evaluate(res["paths"], manifold=manifold, model=model,
                                      sigma=sigma, lam=cfg.lam, check_sigma=cfg.check_sigma,
                                      tol=cfg.on_manifold_tol)  # fmt: skip
                        out["displacement_max"] = ev["displacement_max"]
                        secs = res["seconds"]
                    record(method, out, seconds=secs)
                if cfg.reference and base is not None:
                    bar.set_description(f"{name}, {potential} {rep}, sigma={sigma:g}, reference")
                    init = np.asarray(gfm.coordinate_linear(manifold, x0, x1, cfg.n_points))
                    ref = _solve_gfm(cfg, x0, x1, model, sigma, init)
                    rout = _outcome(manifold, ref[0], ref[1], cfg.on_manifold_tol)
                    gout = _outcome(manifold, base[0], base[1], cfg.on_manifold_tol)
                    gap = action_difference(base[0], ref[0], gfm.ScoreAt(model, sigma), cfg.lam)
                    rout["action_gfm_minus_reference"] = gap
                    rout["gfm_on_surface"] = gout["on_surface"]
                    record("reference", rout)
    bar.close()
    run.log_rows(rows)
    _summarise(cfg, rows, headline, run, flag_errors, choose_threshold)
    run.details["table"] = table
    run.save_arrays("rows.npz", **{k: np.asarray([r.get(k, np.nan) for r in rows], float)
                                   for k in ("sigma", "pair", "max_distance", "support_max",
                                             "flag_on")})  # fmt: skip
    text = _markdown(table)
    (run.path / "table.md").write_text(text + "\n")
    run.print(text)
    headline["n_denoisers"] = float(cfg.n_denoisers)
    return headline


TABLE_COLUMNS = ("manifold", "potential", "denoiser", "sigma", "method", "n", "reachable",
                 "converged", "on_surface", "converged_on", "flag_on", "error_mean",
                 "seconds")  # fmt: skip


def _markdown(table: list[dict]) -> str:
    """One line per solve: pairs, how many are on one component (``reachable``), converged,
    on the surface (waypoints and midpoints), both, flagged on by the support check."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * 5 + "---:|" * 8]
    for r in table:
        vals = [f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in TABLE_COLUMNS]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines)


def _record(rows, table, base, same, out, seconds):
    """Append one row per pair of one solve and its table row."""
    import numpy as np

    n = len(same)
    for i in range(n):
        rows.append(dict(base, pair=i, same_component=bool(same[i]),
                         **{k: _py(v[i]) for k, v in out.items()}))  # fmt: skip
    r = rows[-n:]
    table.append(dict(
        base, n=n, converged=int(sum(x["converged"] for x in r)),
        on_surface=int(sum(x["on_surface"] for x in r)),
        converged_on=float(np.mean([x["converged"] and x["on_surface"] for x in r])),
        reachable=int(np.sum(same)),
        flag_on=int(np.nansum([x["flag_on"] for x in r])),
        error_mean=float(np.nanmean([x["error_mean"] for x in r])),
        seconds=seconds,
    ))  # fmt: skip


def _py(v):
    import numpy as np

    return np.asarray(v).item()


def _summarise(cfg, rows, headline, run, flag_errors, choose_threshold):
    """The headline from the per-pair rows (module doc). A rate with nothing to count (no pair
    off the surface for a false-negative rate, no shortcut) is left out; its count is there."""
    import numpy as np

    from geomopt.gfm._support import DEFAULT_SUPPORT_THRESHOLD

    def success(rs):
        return float(np.mean([r["converged"] and r["on_surface"] for r in rs]))

    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["manifold"], r["potential"], r["method"], r["sigma"]), []).append(r)
    for (m, p, method, s), rs in groups.items():
        key = f"{m}/{p}/{method}/sigma={s:g}"
        if method == "reference":
            headline[f"{key}/converged_on"] = success(rs)
            short = [r for r in rs if r["converged"] and r["on_surface"]
                     and not r["gfm_on_surface"]]  # fmt: skip
            gaps = [r["action_gfm_minus_reference"] for r in short]
            k = f"{m}/{p}/shortcut/sigma={s:g}"
            headline[f"{k}/n"] = float(len(short))
            if gaps:
                headline[f"{k}/lower_action"] = float(np.mean([g < 0 for g in gaps]))
                headline[f"{k}/median_action_gap"] = float(np.median(gaps))
            continue
        headline[f"{key}/converged_on"] = success(rs)
        reach = [r for r in rs if r["same_component"]]
        if len(reach) < len(rs) and reach:
            headline[f"{key}/converged_on_reachable"] = success(reach)
        err = [r["error_mean"] for r in rs if np.isfinite(r["error_mean"])]
        if err:
            headline[f"{key}/error"] = float(np.mean(err))
        if p == "trained":
            for d in sorted({r["denoiser"] for r in rs}):
                headline[f"{key}/converged_on/denoiser={d}"] = success(
                    [r for r in rs if r["denoiser"] == d]
                )
    # the support flag against the truth, over every GFM solve that ran the check
    checked = [r for r in rows if r["method"] in GFM_VARIANTS + ("reference",)
               and np.isfinite(r["flag_on"])]  # fmt: skip

    def put(prefix, e):
        headline[f"{prefix}/n_on"] = float(e["n_on"])
        headline[f"{prefix}/n_off"] = float(e["n_off"])
        for k in ("false_positive", "false_negative", "error"):
            if np.isfinite(e[k]):
                headline[f"{prefix}/{k}"] = e[k]

    by: dict[tuple, list] = {}
    for r in checked:
        by.setdefault((r["manifold"], r["potential"], r["sigma"]), []).append(r)
    for (m, p, s), rs in by.items():
        put(
            f"{m}/{p}/support/sigma={s:g}",
            flag_errors([r["flag_on"] > 0.5 for r in rs], [r["on_surface"] for r in rs]),
        )
    fit_rows = [r for r in checked if r["sigma"] <= cfg.support_fit_max_sigma]
    if not fit_rows:
        return
    fit = [r for r in fit_rows if r["pair"] % 2 == 0]
    test = [r for r in fit_rows if r["pair"] % 2 == 1] or fit
    grid = np.round(np.arange(0.5, 8.001, 0.25), 2)
    thr, _ = choose_threshold([r["support_max"] for r in fit], [r["on_surface"] for r in fit],
                              grid)  # fmt: skip
    headline["support/threshold_fit"] = thr
    headline["support/threshold_default"] = DEFAULT_SUPPORT_THRESHOLD
    for label, t in (("fit", thr), ("default", DEFAULT_SUPPORT_THRESHOLD)):
        for scope in sorted({r["manifold"] for r in test}) + ["all"]:
            rs = [r for r in test if scope in ("all", r["manifold"])]
            put(
                f"{scope}/support/heldout/{label}",
                flag_errors([r["support_max"] <= t for r in rs], [r["on_surface"] for r in rs]),
            )
    on = [r["support_max"] for r in fit_rows if r["on_surface"]]
    off = [r["support_max"] for r in fit_rows if not r["on_surface"]]
    run.details["support_fit"] = dict(
        threshold=thr, n_fit=len(fit), n_test=len(test),
        on_max=float(max(on)) if on else None, off_min=float(min(off)) if off else None,
    )  # fmt: skip


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_sigma_sweep.png``: per manifold, the share of pairs that converge on the surface
    vs sigma, per score and method (pooled over the denoisers); dotted: the on-surface start
    (the reference)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    table = record.details["table"]
    names = [m for m in cfg["manifolds"] if any(r["manifold"] == m for r in table)]
    fig, axes = plotting.figure(len(names), 1, width=2.6, height=2.6)
    axes = np.atleast_1d(axes).ravel()
    styles = {"exact": "-", "trained": "--", "analytic": ":"}
    methods = list(cfg["methods"]) + (["reference"] if cfg.get("reference") else [])
    colors = {m: f"C{i}" for i, m in enumerate(methods)}
    for ax, name in zip(axes, names, strict=True):
        for pot in cfg["potentials"]:
            for method in methods:
                rs = [r for r in table if r["manifold"] == name and r["potential"] == pot
                      and r["method"] == method]  # fmt: skip
                sig = sorted({r["sigma"] for r in rs})
                if not sig:
                    continue
                y = [np.mean([r["converged_on"] for r in rs if r["sigma"] == v]) for v in sig]
                ax.plot(sig, y, "o" + styles.get(pot, "-"), color=colors[method], ms=3,
                        label=f"{method} ({pot})")  # fmt: skip
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("sigma")
    axes[0].set_ylabel("converged and on the surface")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7)
    return [plotting.save(fig, figure_path(run_dir, out, "gfm_sigma_sweep"))]


EXPERIMENT = Experiment(
    name="gfm/sigma_sweep",
    description="GFM on every manifold over sigma (exact and trained scores): converged and "
    "on the surface, the support flag against the truth, remedies",
    presets={
        "smoke": SigmaSweepConfig(
            manifolds=("two_moons",),
            sigmas=(0.05,),
            methods=("gfm", "gfm+refine"),
            denoiser=SMOKE_DENOISER,
            n_denoisers=1,
            n_pairs=4,
            n_points=12,
        ),  # fmt: skip
        # sigma 0.02 and gfm+continuation are left out: with the exact swiss-roll potential at
        # 0.02 (24,300 quadrature nodes) that run was killed for memory (24 GB) on a 2-core box
        "quick": SigmaSweepConfig(sigmas=(0.1, 0.05), methods=("gfm", "gfm@chord", "gfm+refine")),
        "paper": SigmaSweepConfig(
            sigmas=(0.2, 0.1, 0.05, 0.02, 0.01), denoiser=DenoiserSpec(), n_pairs=32
        ),
    },
    notes={
        "smoke": "two moons, sigma 0.05, exact + a tiny denoiser, 4 pairs (seconds)",
        "quick": "six manifolds, sigma 0.1 / 0.05, exact scores + 3 quick denoisers, 16 pairs, "
        "GFM from the denoised start and the chord, the refine remedy, the on-surface reference",
        "paper": "six manifolds, five sigmas, exact + 3 official denoisers, 32 pairs",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "swiss_roll/exact/gfm/sigma=0.05/converged_on",
        "swiss_roll/trained/gfm/sigma=0.05/converged_on",
        "torus/trained/gfm/sigma=0.05/converged_on",
        "support/threshold_fit",
        "all/support/heldout/default/error",
    ),
    # smoke measured (23.6 s, denoisers cached); quick and paper are estimates, not timed runs
    seconds={"smoke": 23.6, "quick": 900.0, "paper": 3600.0},
)
