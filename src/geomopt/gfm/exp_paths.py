"""``gfm/paths``: GFM against every baseline on many endpoint pairs per manifold, under the
official protocol and a trained EDM denoiser's score.

    uv run experiments/gfm/paths.py [smoke|quick|paper] [--field value ...]

Protocol (see ``geomopt.gfm._exp_protocol`` and ``geomopt.gfm.baselines.OFFICIAL``): endpoints drawn
from the clean manifold; the score is a trained denoiser's at ``sigma``
(``potential="analytic"`` swaps in the tube potential, an ablation only); GFM is solved by
``gfm.solve``'s default solver (``gfm_solver``) from each initialisation in ``gfm_inits`` (the
first is the headline's ``gfm``); the baselines run the official Adam settings from their
official initial paths (RBF / LAND / 1/p linear, Jacobian / Stein SLERP); RBF and LAND are
fitted as the official code fits them. Not pinned by the official code (the torus GFM / Jacobian
/ Stein figure shows one pair with 50 waypoints): our choice is the same waypoint count for
every method (50 in quick and paper), ``n_pairs`` pairs for each of the ``n_seeds`` seeds
``pair_seed, pair_seed + 1, ...``, sigma 0.1 and lambda 1 (the official torus setting).
Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from geomopt.checks import check_ints, check_names, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.gfm.exp_train_score import QUICK_DENOISER, SMOKE_DENOISER, DenoiserSpec

ALL_METHODS = ("gfm", "jacobian", "stein", "inverse_density", "rbf", "land", "linear")
MANIFOLDS = ("torus", "twin_peaks", "sphere", "swiss_roll")


@dataclasses.dataclass(frozen=True)
class PathsConfig:
    """GFM and the baselines on endpoint pairs of each manifold (see the module doc).

    Paper command: ``uv run experiments/gfm/paths.py paper``."""

    manifolds: tuple[str, ...] = ("torus", "twin_peaks")
    """Manifolds: torus, twin_peaks, sphere, swiss_roll (the 3-D ones of geomopt.manifolds)."""
    methods: tuple[str, ...] = ALL_METHODS
    """Methods: gfm, gfm_adam, jacobian, stein, inverse_density, rbf, land, linear."""
    gfm_inits: tuple[str, ...] = ("denoised", "chord", "slerp")
    """GFM initial paths (denoised: the chord's waypoints moved onto the support by the
    denoiser's PF-ODE from sigma 0.5; chord; slerp). The first one is the headline's gfm."""
    gfm_solver: Literal["default", "action", "lm"] = "default"
    """GFM's solver: "default" (``gfm.solve`` without a method: the default a user gets),
    "action" (trust-region descent of the path action, then LM: it reaches minima of the
    action) or "lm" (Levenberg-Marquardt on the residual alone, which also converges to saddles
    such as paths through the torus's hole)."""
    potential: Literal["trained", "analytic"] = "trained"
    """The score: a trained EDM denoiser (default) or the analytic tube potential (ablation)."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Denoiser network and training (cached by manifold + spec)."""
    sigma: float = 0.1
    """Noise level of the score (official torus runs: 0.1)."""
    lam: float = 1.0
    """GFM's potential weight lambda (official: 1)."""
    n_pairs: int = 8
    """Endpoint pairs per seed and manifold."""
    n_seeds: int = 1
    """How many seeds draw pairs: pair_seed, pair_seed + 1, ... (each n_pairs pairs per
    manifold)."""
    pair_seed: int = 0
    """First seed of the pairs."""
    n_points: int = 50
    """Waypoints per path, endpoints included, for every method."""
    metric_data: int = 5000
    """Data points (default noise) for fitting the RBF and LAND metrics."""
    rbf_centers: int = 1000
    """k-means centres of the RBF metric (official: 1000 class default, 2000 in training)."""
    rbf_kappa: float = 3.0
    """RBF bandwidth factor kappa (official: 3 class default, 2 in training)."""
    rbf_fit_iters: int = 30_000
    """Adam iterations fitting the RBF weights (official: 30,000)."""
    land_fit_iters: int = 3000
    """Adam iterations fitting the LAND weight (official: 3000)."""
    on_manifold_tol: float = 0.1
    """A path is on the manifold when its largest distance to it is at most this."""
    check_sigma: float = 0.05
    """Noise level of the denoiser displacement check |D(x, check_sigma) - x|."""


def validate(cfg: PathsConfig) -> None:
    from geomopt.gfm._exp_common import INITS, check_common

    check_names(cfg, "manifolds", MANIFOLDS)
    check_names(cfg, "methods", ("gfm", "gfm_adam", *ALL_METHODS[1:]))
    check_names(cfg, "gfm_inits", INITS)
    check_common(cfg)
    check_ints(cfg, "n_seeds", "metric_data", "rbf_centers", "rbf_fit_iters", "land_fit_iters")
    check_positive(cfg, "rbf_kappa")
    if cfg.metric_data <= max(cfg.rbf_centers, 1000):
        raise ValueError(
            f"metric_data={cfg.metric_data!r}: expected more than rbf_centers={cfg.rbf_centers} "
            "and the 1000 LAND reference points"
        )


def method_keys(cfg) -> list[tuple[str, str, str]]:
    """``(key, method, init)`` for each solve: ``gfm`` (first init), ``gfm@<init>`` (others)."""
    keys = []
    for m in cfg.methods:
        if m in ("gfm", "gfm_adam"):
            for j, init in enumerate(cfg.gfm_inits):
                keys.append((m if j == 0 else f"{m}@{init}", m, init))
        else:
            keys.append((m, m, ""))
    return keys


def fit_metrics(cfg, manifold, key) -> dict:
    """The official RBF / LAND metrics on ``cfg.metric_data`` noisy manifold samples."""
    import numpy as np

    from geomopt.gfm import baselines as bl

    fitted = {}
    if "rbf" in cfg.methods or "land" in cfg.methods:
        data = np.asarray(manifold.sample(key, cfg.metric_data), np.float64)
        if "rbf" in cfg.methods:
            fitted["rbf"] = bl.fit_rbf_official(
                data, n_centers=cfg.rbf_centers, kappa=cfg.rbf_kappa, fit_iters=cfg.rbf_fit_iters
            )
        if "land" in cfg.methods:
            fitted["land"] = bl.fit_land_official(data, fit_iters=cfg.land_fit_iters)
    return fitted


def markdown_table(table: list[dict], first: tuple[str, ...]) -> str:
    """The honest table: counts per status, on-manifold and success fractions, errors."""
    cols = ("n", "converged", "stalled", "diverged", "budget", "on_manifold", "success",
            "error_mean", "error_max", "displacement_max", "el_residual", "seconds")  # fmt: skip
    lines = [
        "| " + " | ".join(first + cols) + " |",
        "|" + "---|" * len(first) + "---:|" * len(cols),
    ]
    for r in table:
        vals = [str(r[c]) for c in first] + [
            f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols
        ]
        lines.append("| " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def run(cfg: PathsConfig, run: Run) -> dict[str, float]:
    import jax
    import numpy as np

    from geomopt.gfm._exp_protocol import evaluate, sample_pairs, solve_method, summarise
    from geomopt.gfm._potentials import potential_for
    from geomopt.manifolds import get_manifold

    keys = method_keys(cfg)
    models = {m: potential_for(run, m, cfg.potential, cfg.denoiser) for m in cfg.manifolds}
    run.details["denoisers"] = {m: info for m, (_, info) in models.items()}
    headline: dict[str, float] = {}
    arrays, table = {}, []
    seeds = range(cfg.pair_seed, cfg.pair_seed + cfg.n_seeds)
    bar = run.progress(total=len(cfg.manifolds) * len(seeds) * len(keys), desc="paths")
    with jax.enable_x64(True):
        for mi, name in enumerate(cfg.manifolds):
            manifold = get_manifold(name)
            model = models[name][0]
            fitted = fit_metrics(cfg, manifold, jax.random.fold_in(jax.random.key(1234), mi))
            per_key: dict[str, list] = {k: [] for k, _, _ in keys}
            for seed in seeds:
                pk = jax.random.fold_in(jax.random.key(seed), mi)
                x0, x1 = sample_pairs(manifold, cfg.n_pairs, pk)
                for key, method, init in keys:
                    bar.set_description(f"{name}, seed {seed}, {key}")
                    out = solve_method(
                        method, x0, x1, model=model, sigma=cfg.sigma, lam=cfg.lam,
                        n_points=cfg.n_points, init=init, fitted=fitted, solver=cfg.gfm_solver,
                    )  # fmt: skip
                    ev = evaluate(
                        out["paths"], manifold=manifold, model=model, sigma=cfg.sigma,
                        lam=cfg.lam, check_sigma=cfg.check_sigma, tol=cfg.on_manifold_tol,
                    )  # fmt: skip
                    run.log_rows(
                        dict(manifold=name, seed=seed, pair=i, method=key, init=init,
                             status=out["status"][i], code=int(out["code"][i]),
                             iterations=int(out["iterations"][i]),
                             error_mean=ev["error_mean"][i], error_max=ev["error_max"][i],
                             displacement_max=ev["displacement_max"][i],
                             el_residual=ev["el_residual"][i],
                             on_manifold=bool(ev["on_manifold"][i]))
                        for i in range(cfg.n_pairs)
                    )  # fmt: skip
                    per_key[key].append((out, ev))
                    bar.update(1)
            for key, _, _ in keys:
                outs = per_key[key]
                status = np.concatenate([o["status"] for o, _ in outs])
                ev = {k: np.concatenate([e[k] for _, e in outs]) for k in outs[0][1]}
                row = dict(manifold=name, method=key, **summarise(status, ev))
                row["seconds"] = float(sum(o["seconds"] for o, _ in outs))
                table.append(row)
                arrays[f"{name}/{key}/paths"] = np.concatenate([o["paths"] for o, _ in outs])
                arrays[f"{name}/{key}/dist"] = ev["dist"]
                headline[f"{name}/{key}"] = row["error_mean"]
                if row["n_finite"] == 0:
                    run.explain_nan(f"{name}/{key}", "every path diverged (non-finite waypoints)")
                headline[f"{name}/{key}/on_manifold"] = row["on_manifold"]
                headline[f"{name}/{key}/success"] = row["success"]
    bar.close()
    run.save_arrays("paths.npz", **arrays)
    run.details["table"] = table
    text = markdown_table(table, ("manifold", "method"))
    (run.path / "table.md").write_text(text)
    run.print(text)
    return headline


COLORS = {
    "gfm": "#d62728",
    "gfm_adam": "#ff7f0e",
    "linear": "#7f7f7f",
    "rbf": "#9467bd",
    "land": "#8c564b",
    "jacobian": "#1f77b4",
    "stein": "#2ca02c",
    "inverse_density": "#bcbd22",
}


def method_color(key: str) -> str:
    from geomopt import plotting

    return COLORS.get(key.split("@")[0], plotting.color(key))


def surface(ax, name: str) -> None:
    """A light wireframe of the torus / twin peaks."""
    import numpy as np

    if name == "torus":
        th, ph = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, 2 * np.pi, 49))
        ring = 1.2 + 0.4 * np.cos(th)
        x, y, z = ring * np.cos(ph), ring * np.sin(ph), 0.4 * np.sin(th)
        ax.set_box_aspect((3.2, 3.2, 1.0))
    elif name == "twin_peaks":
        x, y = np.meshgrid(np.linspace(-1, 1, 25), np.linspace(-1, 1, 25))
        z = 0.5 * np.exp(-(x**2 + y**2) / 0.5)
        ax.set_box_aspect((2.0, 2.0, 0.8))
    else:
        return
    ax.plot_wireframe(x, y, z, color="0.8", linewidth=0.3)


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_paths_distance.png`` (distance to the manifold along the path, per method and
    manifold) and ``gfm_paths_<manifold>_3d.png`` (three pairs' paths on the surface)."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.gfm._exp_protocol import label_of

    record = read_run(run_dir)
    cfg = record.config_values
    table = {(r["manifold"], r["method"]): r for r in record.details["table"]}
    with np.load(Path(run_dir) / "paths.npz") as f:
        arrays = dict(f)
    names = cfg["manifolds"]
    keys = list(dict.fromkeys(r["method"] for r in record.details["table"]))
    fig, axes = plotting.figure(len(names), 1, width=4.0, height=3.0)
    for ax, name in zip(np.atleast_1d(axes).ravel(), names, strict=False):
        for key in keys:
            dist = arrays.get(f"{name}/{key}/dist")
            if dist is None:
                continue
            t = np.linspace(0, 1, dist.shape[1])
            r = table[(name, key)]
            base, _, init = key.partition("@")
            label = label_of(base, cfg) + (f" [{init}]" if init else "")
            label += f": {r['error_mean']:.3f}, ok {r['success']:.0%}"
            ax.plot(t, np.nanmean(dist, 0), color=method_color(key), label=label,
                    linestyle="--" if init else "-", linewidth=1.0 if init else 1.5)  # fmt: skip
        ax.set_xlabel("path parameter t")
        ax.set_ylabel("distance to the manifold")
        ax.set_title(f"{name} (sigma {cfg['sigma']:g}, {cfg['potential']} potential)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=6)
    figures = [plotting.save(fig, figure_path(run_dir, out, "gfm_paths_distance"))]
    shown = [k for k in ("gfm", "jacobian", "stein", "rbf", "linear") if k in keys]
    for name in names:
        fig = plotting.figure(1, 1, width=5.0, height=4.0)[0]
        fig.clf()
        ax = fig.add_subplot(1, 1, 1, projection="3d")
        surface(ax, name)
        for key in shown:
            paths = arrays[f"{name}/{key}/paths"][:3]
            for i, p in enumerate(paths):
                ax.plot(*p.T, color=method_color(key), linewidth=1.2,
                        label=label_of(key, cfg) if i == 0 else None)  # fmt: skip
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_zlabel("z")
        ax.set_title(f"{name}: three pairs")
        ax.legend(loc="upper left", bbox_to_anchor=(1.05, 1.0), fontsize=7)
        figures.append(plotting.save(fig, figure_path(run_dir, out, f"gfm_paths_{name}_3d")))
    return figures


SMOKE = PathsConfig(
    manifolds=("torus",), methods=("gfm", "jacobian", "stein", "rbf", "land", "linear"),
    gfm_inits=("denoised", "chord"), denoiser=SMOKE_DENOISER, n_pairs=2, n_points=10,
    metric_data=1200, rbf_centers=50, rbf_fit_iters=200, land_fit_iters=100,
)  # fmt: skip

EXPERIMENT = Experiment(
    name="gfm/paths",
    description="GFM vs the density-aware baselines on torus and twin peaks (trained score, "
    "official protocol)",
    presets={
        "smoke": SMOKE,
        "quick": PathsConfig(),
        "paper": PathsConfig(
            methods=("gfm", "gfm_adam", *ALL_METHODS[1:]),
            denoiser=DenoiserSpec(),
            n_seeds=3,
            metric_data=20_000,
            rbf_centers=2000,
            rbf_kappa=2.0,
        ),  # fmt: skip
    },
    notes={
        "smoke": "torus, 2 pairs, 10 waypoints, tiny denoiser and fits (76 s wall at load 20)",
        "quick": "torus + twin peaks, 8 pairs, 50 waypoints, quick denoisers (3 min wall, cached "
        "denoisers)",
        "paper": "official 128x4 denoiser, 3 seeds x 8 pairs, RBF 2000 centres kappa 2, "
        "official GFM Adam too",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "torus/gfm",
        "torus/jacobian",
        "torus/stein",
        "torus/gfm/success",
        "twin_peaks/gfm",
    ),
    paper={"torus/gfm": 0.029, "torus/jacobian": 0.054, "torus/stein": 0.326},
    paper_source="gfm.md, torus 'distance to manifold' figure means; the figure is one pair, 50 "
    "waypoints, settings unpublished, so only indicative",
    # README.md: quick 182 s (2026-12-04) and paper 738 s wall (both official denoisers trained in
    # the run) at load ~3
    seconds={"smoke": 13.5, "quick": 182.0, "paper": 738.0},
)
