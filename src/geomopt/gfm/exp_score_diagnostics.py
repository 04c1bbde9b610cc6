"""``gfm/score_diagnostics``: where do trained denoisers' force fields differ from the exact
smoothed-manifold scores they learn?

    uv run experiments/gfm/score_diagnostics.py [smoke|quick|paper] [--field value ...]

Per manifold, ``n_pairs`` endpoint pairs on the clean surface get the three official score
diagnostics (:func:`geomopt.gfm.score_diagnostics`: ``|F|`` on the straight path over sigma,
the tangential / normal split at ``sigma``, the field in the pair's plane) for the exact score
(:func:`geomopt.gfm._adherence.exact_potential`, built for the smallest sigma) and for
``n_denoisers`` trained EDM denoisers (seeds ``denoiser.seed + i``). The comparison:

- ``<m>/path/rel_error/sigma=<s>``: ``|F_trained - F_exact| / |F_exact|`` over the straight
  path's points (root of summed squares), mean over pairs per denoiser, then mean and 95 %
  interval over the denoisers (``/lo``, ``/hi``).
- ``<m>/path/seed_spread/sigma=<s>``: the same between two trained denoisers of different seeds
  (``|F_i - F_j| / |F_exact|``), the control: a trained-vs-exact error well above it is a bias
  the seeds share (data, network, training), one at its level is seed noise.
- ``<m>/plane/rel_error/near`` and ``/far`` (and ``seed_spread``): on the plane grid at ``sigma``,
  points within ``near`` total noise scales (``sqrt(sigma^2 + data noise^2)``) of the surface vs
  beyond: where on the field the trained models are off.
- ``<m>/normal_fraction/<exact|trained>``: the share of the force's energy normal to the path
  at ``sigma`` (the bending part).

Module-level imports are light.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.checks import check_ints, check_names, check_positive
from geomopt.experiment import Experiment, Run, figure_path
from geomopt.gfm.exp_train_score import (
    MANIFOLD_NAMES,
    QUICK_DENOISER,
    SMOKE_DENOISER,
    DenoiserSpec,
)

OFFICIAL_SIGMAS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclasses.dataclass(frozen=True)
class ScoreDiagnosticsConfig:
    """The official score diagnostics, exact vs trained, on manifolds (module doc).

    Paper command: ``uv run experiments/gfm/score_diagnostics.py paper``."""

    manifolds: tuple[str, ...] = ("two_moons", "swiss_roll", "torus")
    """Manifolds (geomopt.manifolds names)."""
    sigmas: tuple[float, ...] = OFFICIAL_SIGMAS
    """Noise levels of the heat map (the official ones)."""
    sigma: float = 0.1
    """Noise level of the decomposition and the plane field."""
    denoiser: DenoiserSpec = QUICK_DENOISER
    """Denoiser network and training (cached by manifold + spec)."""
    n_denoisers: int = 3
    """Trained denoisers (seeds ``denoiser.seed``, ``+1``, ...); at least 2 for the control."""
    n_pairs: int = 8
    """Endpoint pairs per manifold."""
    pair_seed: int = 0
    """Seed of the pairs and of the planes' second directions."""
    n_points: int = 20
    """Points on the straight path (official: 20)."""
    grid_size: int = 15
    """Plane grid points per side (official: 15)."""
    extent: float = 1.5
    """Plane half-width in units of half the pair's distance (official: 1.5)."""
    near: float = 2.0
    """Plane points within ``near * sqrt(sigma^2 + data noise^2)`` of the surface count as near
    the data."""


def validate(cfg: ScoreDiagnosticsConfig) -> None:
    check_names(cfg, "manifolds", MANIFOLD_NAMES)
    if not cfg.manifolds or not cfg.sigmas:
        raise ValueError("manifolds / sigmas: expected at least one value")
    check_positive(cfg, "sigmas", "sigma", "extent", "near")
    check_ints(cfg, "n_pairs", "n_points", "grid_size")
    if cfg.n_denoisers < 2:
        raise ValueError(f"n_denoisers={cfg.n_denoisers}: expected >= 2 (the seed-spread "
                         "control compares two trained denoisers)")  # fmt: skip
    if cfg.sigma not in cfg.sigmas:
        raise ValueError(f"sigma={cfg.sigma!r}: expected one of sigmas={cfg.sigmas!r} (the "
                         "path error is reported per sigma)")  # fmt: skip


def _rel(a, b, ref, mask=None):
    import numpy as np

    d, r = np.sum((a - b) ** 2, -1), np.sum(ref**2, -1)
    if mask is not None:
        if not mask.any():
            return float("nan")
        d, r = d[mask], r[mask]
    return float(np.sqrt(d.sum() / r.sum()))


def _finite(values):
    """The finite values (a plane with no point near, or none far, gives NaN for that pair)."""
    import numpy as np

    return [v for v in values if np.isfinite(v)]


def _plane_rel(a, b, ref, mask):
    """:func:`_rel` of two diagnostics' in-plane force fields, relative to ``ref``'s."""
    import numpy as np

    def uv(diag):
        return np.stack([diag.plane.f_u, diag.plane.f_v], -1)

    return _rel(uv(a), uv(b), uv(ref), mask)


def _models(cfg: ScoreDiagnosticsConfig, run: Run, name: str, manifold, bar) -> list:
    """``[(label, model)]``: the exact smoothed-manifold score and ``n_denoisers`` trained ones
    (seeds ``denoiser.seed + i``, cached by the runner)."""
    import dataclasses as dc

    from geomopt.gfm._adherence import exact_potential
    from geomopt.gfm._potentials import potential_for

    models = [("exact", exact_potential(manifold, min(cfg.sigmas))[0])]
    for i in range(cfg.n_denoisers):
        bar.set_description(f"{name}: denoiser {i}")
        spec = dc.replace(cfg.denoiser, seed=cfg.denoiser.seed + i)
        model, info = potential_for(run, name, "trained", spec)
        run.details["denoisers"].append({"manifold": name, "denoiser": i, **info})
        models.append((f"trained{i}", model))
    return models


def _figure_arrays(name: str, diags: dict, near: list) -> dict:
    """The first pair's diagnostics, exact and denoiser 0, for the figure."""
    import numpy as np

    arrays = {}
    for label in ("exact", "trained0"):
        d = diags[label][0]
        for k, v in dict(alphas=d.alphas, sigmas=d.sigmas, force_norm=d.force_norm,
                         tangential=d.tangential, normal=d.normal, total=d.total,
                         u=d.plane.u, v=d.plane.v, f_u=d.plane.f_u, f_v=d.plane.f_v,
                         f_norm=d.plane.f_norm).items():  # fmt: skip
            arrays[f"{name}/{label}/{k}"] = np.asarray(v)
    arrays[f"{name}/near"] = near[0]
    return arrays


def run(cfg: ScoreDiagnosticsConfig, run: Run) -> dict[str, float]:
    import itertools

    import jax
    import numpy as np

    from geomopt import gfm
    from geomopt.gfm._exp_protocol import sample_pairs
    from geomopt.manifolds import get_manifold
    from geomopt.stats import put_mean_ci

    headline: dict[str, float] = {}
    arrays: dict[str, np.ndarray] = {}
    bar = run.progress(total=len(cfg.manifolds) * (1 + cfg.n_denoisers), desc="diagnostics")
    kw = dict(sigma=cfg.sigma, sigmas=cfg.sigmas, n_points=cfg.n_points,
              grid_size=cfg.grid_size, extent=cfg.extent)  # fmt: skip
    run.details["denoisers"] = []
    for name in cfg.manifolds:
        manifold = get_manifold(name)
        with jax.enable_x64(True):
            x0, x1 = sample_pairs(manifold, cfg.n_pairs, jax.random.key(cfg.pair_seed))
        models = _models(cfg, run, name, manifold, bar)
        diags: dict[str, list] = {}
        for label, model in models:
            bar.set_description(f"{name}: {label}")
            diags[label] = [gfm.score_diagnostics(model, x0[p], x1[p],
                                                  key=cfg.pair_seed * 1000 + p, **kw)
                            for p in range(cfg.n_pairs)]  # fmt: skip
            bar.update(1)
        path_f = {label: [d.forces for d in ds] for label, ds in diags.items()}
        noise = float(manifold.default_noise)
        scale = float(np.sqrt(cfg.sigma**2 + noise**2))
        near = [np.asarray(jax.vmap(manifold.distance)(
            d.plane.points.reshape(-1, d.plane.points.shape[-1]))).reshape(
            d.plane.points.shape[:2]) <= cfg.near * scale for d in diags["exact"]]  # fmt: skip
        trained = [lab for lab, _ in models if lab != "exact"]
        ex = diags["exact"]
        rows = []
        for si, s in enumerate(cfg.sigmas):
            err = {(t, p): _rel(path_f[t][p][si], path_f["exact"][p][si], path_f["exact"][p][si])
                   for t in trained for p in range(cfg.n_pairs)}  # fmt: skip
            rows += [dict(manifold=name, model=t, pair=p, sigma=s, path_rel_error=v)
                     for (t, p), v in err.items()]  # fmt: skip
            per_den = [np.mean([err[t, p] for p in range(cfg.n_pairs)]) for t in trained]
            spread = [np.mean([_rel(path_f[a][p][si], path_f[b][p][si], path_f["exact"][p][si])
                               for p in range(cfg.n_pairs)])
                      for a, b in itertools.combinations(trained, 2)]  # fmt: skip
            put_mean_ci(headline, f"{name}/path/rel_error/sigma={s:g}", _finite(per_den))
            put_mean_ci(headline, f"{name}/path/seed_spread/sigma={s:g}", _finite(spread))

        for where, sel in (("near", lambda m: m), ("far", lambda m: ~m)):
            per_den = [np.nanmean([_plane_rel(diags[t][p], ex[p], ex[p], sel(near[p]))
                                   for p in range(cfg.n_pairs)]) for t in trained]  # fmt: skip
            spread = [np.nanmean([_plane_rel(diags[a][p], diags[b][p], ex[p], sel(near[p]))
                                  for p in range(cfg.n_pairs)])
                      for a, b in itertools.combinations(trained, 2)]  # fmt: skip
            put_mean_ci(headline, f"{name}/plane/rel_error/{where}", _finite(per_den))
            put_mean_ci(headline, f"{name}/plane/seed_spread/{where}", _finite(spread))
        run.log_rows(rows)
        headline[f"{name}/plane/near_share"] = float(np.mean([m.mean() for m in near]))
        headline[f"{name}/normal_fraction/exact"] = float(np.mean([d.normal_fraction
                                                                   for d in ex]))  # fmt: skip
        put_mean_ci(headline, f"{name}/normal_fraction/trained",
             [np.mean([d.normal_fraction for d in diags[t]]) for t in trained])
        arrays.update(_figure_arrays(name, diags, near))
    bar.close()
    run.save_arrays("diagnostics.npz", **arrays)
    run.print(_markdown(cfg, headline))
    return headline


def _markdown(cfg, h) -> str:
    """Trained-vs-exact relative force error beside its seed-vs-seed control."""
    levels = sorted({min(cfg.sigmas), cfg.sigma})
    head = "".join(f" path, sigma={s:g} | control |" for s in levels)
    lines = [f"| manifold |{head} plane near | control | plane far | control |",
             "|---|" + "---:|" * (2 * len(levels) + 4)]  # fmt: skip
    for m in cfg.manifolds:
        keys = [f"path/{k}/sigma={s:g}" for s in levels for k in ("rel_error", "seed_spread")]
        keys += ["plane/rel_error/near", "plane/seed_spread/near", "plane/rel_error/far",
                 "plane/seed_spread/far"]  # fmt: skip
        lines.append(f"| {m} | " + " | ".join(f"{h.get(f'{m}/{k}', float('nan')):.3g}"
                                              for k in keys) + " |")  # fmt: skip
    return "\n".join(lines)


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``gfm_score_diagnostics.png``: per manifold, the first pair's three diagnostics for the
    exact score (top row) and denoiser 0 (bottom row); ``gfm_score_error.png``: the trained vs
    exact path error over sigma per manifold, with the seed-spread control."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run
    from geomopt.gfm._diagnostics import PlaneField, ScoreDiagnostics, plot_diagnostics

    record = read_run(run_dir)
    cfg = record.config_values
    arr = np.load(Path(run_dir) / "diagnostics.npz")
    names = list(cfg["manifolds"])
    fig, axes = plotting.figure(3, 2 * len(names), width=3.2, height=2.6)
    axes = np.asarray(axes).reshape(2 * len(names), 3)
    for i, name in enumerate(names):
        for j, label in enumerate(("exact", "trained0")):
            g = {k.split("/")[-1]: arr[k] for k in arr.files if k.startswith(f"{name}/{label}/")}
            diag = ScoreDiagnostics(
                alphas=g["alphas"], sigmas=g["sigmas"], forces=np.zeros(0),
                force_norm=g["force_norm"],
                sigma=float(cfg["sigma"]), path_force=np.zeros(0), tangential=g["tangential"],
                normal=g["normal"], total=g["total"],
                plane=PlaneField(u=g["u"], v=g["v"], points=np.zeros(0), f_u=g["f_u"],
                                 f_v=g["f_v"], f_norm=g["f_norm"], e1=np.zeros(0),
                                 e2=np.zeros(0)),
            )  # fmt: skip
            plot_diagnostics(diag, axes[2 * i + j], label=f"({name}, {label})")
    paths = [plotting.save(fig, figure_path(run_dir, out, "gfm_score_diagnostics"))]
    h = record.headline
    fig, axes = plotting.figure(len(names), 1, width=2.8, height=2.4)
    axes = np.atleast_1d(axes).ravel()
    sig = list(cfg["sigmas"])
    for ax, name in zip(axes, names, strict=True):
        for what, style in (("rel_error", "o-"), ("seed_spread", "s--")):
            y = [h.get(f"{name}/path/{what}/sigma={s:g}", np.nan) for s in sig]
            lo = [h.get(f"{name}/path/{what}/sigma={s:g}/lo", np.nan) for s in sig]
            hi = [h.get(f"{name}/path/{what}/sigma={s:g}/hi", np.nan) for s in sig]
            ax.plot(sig, y, style, ms=3, label="trained vs exact" if what == "rel_error"
                    else "seed vs seed (control)")  # fmt: skip
            ax.fill_between(sig, lo, hi, alpha=0.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("sigma")
    axes[0].set_ylabel("|dF| / |F exact| on the straight path")
    axes[0].legend(fontsize=7)
    paths.append(plotting.save(fig, figure_path(run_dir, out, "gfm_score_error")))
    return paths


EXPERIMENT = Experiment(
    name="gfm/score_diagnostics",
    description="the official score-field diagnostics (force over sigma on the straight path, "
    "tangential / normal split, field in the pair's plane), trained denoisers vs exact scores",
    presets={
        "smoke": ScoreDiagnosticsConfig(
            manifolds=("two_moons",), sigmas=(0.1, 0.3), denoiser=SMOKE_DENOISER,
            n_denoisers=2, n_pairs=2, n_points=6, grid_size=5,
        ),  # fmt: skip
        "quick": ScoreDiagnosticsConfig(),
        "paper": ScoreDiagnosticsConfig(
            manifolds=MANIFOLD_NAMES, denoiser=DenoiserSpec(), n_denoisers=5, n_pairs=16
        ),
    },
    notes={
        "smoke": "two moons, 2 tiny denoisers, 2 pairs, 2 sigmas (seconds)",
        "quick": "two moons, swiss roll, torus; 3 quick denoisers; 8 pairs; the official 11 "
        "sigmas, 20 path points, 15 x 15 plane grid",
        "paper": "six manifolds, 5 official denoisers, 16 pairs",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/gfm/figures",
    key_numbers=(
        "swiss_roll/path/rel_error/sigma=0.1",
        "swiss_roll/path/seed_spread/sigma=0.1",
        "swiss_roll/plane/rel_error/far",
        "torus/plane/rel_error/near",
    ),
    paper_source="the official repository has the diagnostics (gfm/path/diag.py) but reports "
    "no numbers from them",
    # smoke and quick measured (quick: 786 s with the nine denoisers trained; paper: an estimate)
    seconds={"smoke": 15.7, "quick": 786.0, "paper": 3600.0},
)
