"""The GFM experiments (paths, sigma sweep, torus priors) as library functions.

The entry points in ``experiments/gfm/`` and the reproduce registry only parse a config and
call :func:`run_paths`, :func:`run_sigma_sweep` or :func:`run_torus_metrics`; each writes one
run folder ``<root>/gfm/<name>/`` (config, one metrics row per method / pair / setting, the
solved paths in ``paths.npz``, a summary) from which ``experiments/gfm/plot.py`` draws.

Potentials (``potential`` field):

- ``"tube"``: the analytic small-noise potential :class:`TubePotential`,
  ``U = d(x)^2 / (2 sigma^2)`` with ``d`` the exact distance to the manifold (score
  ``-(x - proj(x)) / sigma^2``). It is the leading term of the Gaussian-smoothed manifold's
  ``-log p`` as ``sigma -> 0`` (it drops the density's variation along the manifold and the
  curvature correction), smooth and exact in the normal direction at every ``sigma``.
- ``"trained"``: a denoiser from :func:`geomopt.diffusion.train_for_manifold` (loaded from
  ``<root>/gfm/scores/<manifold>/`` when trained before), ``score(x, sigma)``.
"""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from geomopt.runs import Run, atomic_write_bytes

from . import baselines as bl
from ._evaluate import LogDensityAt, ScoreAt, compiled_memory_bytes, path_metrics
from ._gfm import _gfm_core, solve, straight_line
from ._metrics import TorusMetric

__all__ = [
    "TubePotential",
    "PathsConfig",
    "SigmaSweepConfig",
    "TorusMetricsConfig",
    "PATHS_PRESETS",
    "SIGMA_PRESETS",
    "TORUS_PRESETS",
    "run_paths",
    "run_sigma_sweep",
    "run_torus_metrics",
    "sample_pairs",
    "load_paths",
]

ALL_METHODS = ("gfm", "gfm_adam", "linear", "rbf", "land", "score", "stein", "density")


class TubePotential(eqx.Module):
    """``U(x) = d(x)^2 / (2 sigma^2)`` around a :mod:`geomopt.manifolds` shape (see module doc);
    ``score(x, sigma)`` and ``log_density(x, sigma)`` (normalised in the normal direction)."""

    manifold: eqx.Module

    def score(self, x, sigma):
        return -(x - self.manifold.project(x)) / sigma**2

    def log_density(self, x, sigma):
        d = self.manifold.distance(x)
        return -(d**2) / (2 * sigma**2) - 0.5 * jnp.log(2 * jnp.pi * sigma**2)


@dataclasses.dataclass(frozen=True)
class PathsConfig:
    """GFM and every baseline on many endpoint pairs per manifold.

    Paper-scale command: ``uv run experiments/gfm/paths.py paper``.
    """

    manifolds: tuple[str, ...] = ("torus", "twin_peaks")
    """Manifolds (geomopt.manifolds names)."""
    methods: tuple[str, ...] = ALL_METHODS
    """Methods: gfm (LM), gfm_adam (official Adam), linear, rbf, land, score, stein, density."""
    potential: Literal["tube", "trained"] = "tube"
    """Potential behind GFM and the score-based baselines (see module doc)."""
    score_preset: str = "quick"
    """geomopt.diffusion training preset when potential='trained'."""
    sigma: float = 0.1
    """Noise level at which the score is evaluated (official torus runs: 0.1)."""
    lam: float = 1.0
    """GFM's potential weight lambda (official: 1)."""
    n_pairs: int = 8
    """Endpoint pairs per manifold, sampled on the clean manifold."""
    n_points: int = 24
    """Waypoints per path, endpoints included (official: 20-25)."""
    n_data: int = 2000
    """Data points for fitting the RBF and LAND metrics."""
    rbf_centers: int = 64
    """k-means centres of the RBF metric."""
    adam_iters: int = 1501
    """Iterations of the official Adam solver (gfm_adam)."""
    memory: bool = False
    """Also record XLA's peak-memory estimate per method (one extra compilation each)."""
    seed: int = 0
    """Seed of the pairs and the data."""
    name: str = "paths"
    """Run folder name under <root>/gfm/."""


PATHS_PRESETS = {
    "smoke": (
        "seconds: torus only, 2 pairs, 3 methods",
        PathsConfig(manifolds=("torus",), methods=("gfm", "linear", "stein"), n_pairs=2,
                    n_points=12, n_data=300, rbf_centers=16, name="paths-smoke"),
    ),
    "quick": ("CPU: torus + twin peaks, 8 pairs, tube potential, no Adam (see the benchmark)",
              PathsConfig(methods=tuple(m for m in ALL_METHODS if m != "gfm_adam"),
                          rbf_centers=32)),
    "paper": (
        "trained denoisers, 64 pairs, 25 waypoints, official Adam budget, memory",
        PathsConfig(potential="trained", score_preset="paper", n_pairs=64, n_points=25,
                    memory=True, name="paths-paper"),
    ),
}  # fmt: skip


def sample_pairs(manifold, n_pairs: int, key) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` endpoint pairs drawn independently from the clean manifold."""
    k0, k1 = jax.random.split(key)
    return (
        np.asarray(manifold.sample(k0, n_pairs, noise=0.0), np.float64),
        np.asarray(manifold.sample(k1, n_pairs, noise=0.0), np.float64),
    )


def _potential(cfg, manifold_name: str, root: Path):
    from geomopt.manifolds import get_manifold

    if cfg.potential == "tube":
        return TubePotential(get_manifold(manifold_name)), True
    if cfg.potential == "trained":
        from geomopt.diffusion import train_for_manifold

        model, _ = train_for_manifold(manifold_name, cfg.score_preset, root=root, progress=False)
        return model, False
    raise ValueError(f"potential {cfg.potential!r}: expected 'tube' or 'trained'")


def _save_npz(path: Path, **arrays) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write_bytes(path, buf.getvalue())


def load_paths(run_dir: str | Path) -> dict[str, np.ndarray]:
    """The arrays a run saved in ``paths.npz``."""
    with np.load(Path(run_dir) / "paths.npz") as f:
        return dict(f)


def _solve_method(method, x0, x1, cfg, score, logp, data, n_points):
    """Solve all pairs with one method; returns ``(paths, report)``."""
    if method == "gfm":
        return solve(x0, x1, score=score, lam=cfg.lam, n_points=n_points)
    if method == "gfm_adam":
        return solve(x0, x1, score=score, lam=cfg.lam, n_points=n_points, method="adam",
                     max_iters=cfg.adam_iters)  # fmt: skip
    if method == "linear":
        path = bl.linear(x0, x1, n_points)
        z = np.zeros(x0.shape[0])
        return path, bl.SolveReport(z, z, np.ones_like(z, bool), z, 0.0, "linear")
    if method == "rbf":
        energy = bl.fit_rbf(data, n_centers=cfg.rbf_centers, seed=cfg.seed)
    elif method == "land":
        energy = bl.fit_land(data, seed=cfg.seed)
    elif method == "score":
        energy = bl.ScoreEnergy(score)
    elif method == "stein":
        energy = bl.SteinEnergy(score)
    elif method == "density":
        if logp is None:
            raise ValueError("method 'density' needs a potential with a log-density")
        energy = bl.DensityConformalEnergy(logp)
    else:
        raise ValueError(f"method {method!r}: expected one of {ALL_METHODS}")
    return bl.minimise_energy(energy, x0, x1, n_points=n_points)


def _evaluate(method, paths, rep, manifold, score, logp, cfg, sigma):
    m = path_metrics(paths, manifold=manifold, score=score, lam=cfg.lam, log_density=logp)
    rows = []
    for i in range(paths.shape[0]):
        row = dict(
            method=method,
            sigma=float(sigma),
            pair=i,
            finite=bool(np.all(np.isfinite(np.asarray(paths[i])))),
            converged=bool(np.asarray(rep.converged)[i]),
            code=int(np.asarray(rep.code)[i]),
            iterations=int(np.asarray(rep.iterations)[i]),
            wall_time=float(rep.wall_time) / paths.shape[0],
        )
        for k, v in m.items():
            if k != "dist":
                row[k] = float(np.asarray(v)[i])
        rows.append(row)
    return rows, np.asarray(m["dist"])


def run_paths(cfg: PathsConfig, *, root: str | Path = "results", overwrite: bool = False) -> Path:
    """Solve every method on ``cfg.n_pairs`` pairs per manifold; write ``<root>/gfm/<name>``."""
    from geomopt.manifolds import get_manifold

    root = Path(root)
    run = Run.create("gfm", cfg.name, cfg, root=root, overwrite=overwrite)
    arrays, summary = {}, {}
    with jax.enable_x64(True):
        for mi, name in enumerate(cfg.manifolds):
            manifold = get_manifold(name)
            model, has_logp = _potential(cfg, name, root)
            score = ScoreAt(model, cfg.sigma)
            logp = LogDensityAt(model, cfg.sigma) if has_logp else None
            key = jax.random.fold_in(jax.random.key(cfg.seed), mi)
            x0, x1 = sample_pairs(manifold, cfg.n_pairs, key)
            data = np.asarray(manifold.sample(jax.random.fold_in(key, 7), cfg.n_data), np.float64)
            for method in cfg.methods:
                if method == "density" and logp is None:
                    continue
                t0 = time.perf_counter()
                paths, rep = _solve_method(method, x0, x1, cfg, score, logp, data, cfg.n_points)
                seconds = time.perf_counter() - t0
                rows, dist = _evaluate(method, paths, rep, manifold, score, logp, cfg, cfg.sigma)
                mem = -1
                if cfg.memory and method in ("gfm", "gfm_adam"):
                    mem = _gfm_memory(x0, x1, score, cfg, method)
                for r in rows:
                    r.update(manifold=name, peak_memory_bytes=mem)
                run.log_rows(rows)
                arrays[f"{name}/{method}/paths"] = np.asarray(paths)
                arrays[f"{name}/{method}/dist"] = dist
                summary[f"{name}/{method}"] = _aggregate(rows) | {"seconds": seconds}
    _save_npz(run.path / "paths.npz", **arrays)
    run.finish(summary)
    return run.path


def _gfm_memory(x0, x1, score, cfg, method):
    path0 = straight_line(jnp.asarray(x0), jnp.asarray(x1), cfg.n_points)
    iters = cfg.adam_iters if method == "gfm_adam" else 200
    args = (
        jnp.asarray(cfg.lam), jnp.asarray(1e-8), jnp.asarray(iters), jnp.asarray(0.05),
        jnp.asarray(10.0),
    )  # fmt: skip
    kind_method = "adam" if method == "gfm_adam" else "lm"
    fn = lambda p: _gfm_core(p, *args, score, None, "euclidean", kind_method, method == "gfm")  # noqa: E731
    return compiled_memory_bytes(fn, path0)


def _aggregate(rows: list[dict]) -> dict:
    out = {}
    for k in ("manifold_error_mean", "manifold_error_max", "prior_length", "el_residual",
              "iterations", "wall_time", "log_density_mean"):  # fmt: skip
        vals = np.array([r[k] for r in rows if k in r], float)
        if len(vals):
            finite = vals[np.isfinite(vals)]
            out[k] = float(np.mean(finite)) if len(finite) else float("nan")
    out["converged"] = float(np.mean([r["converged"] for r in rows]))
    out["finite"] = float(np.mean([r["finite"] for r in rows]))
    return out


@dataclasses.dataclass(frozen=True)
class SigmaSweepConfig:
    """Methods as sigma goes from 0.5 to 0.01: which stay stable, where density-aware metrics
    blow up. Paper-scale command: ``uv run experiments/gfm/sigma_sweep.py paper``."""

    manifold: str = "torus"
    """Manifold."""
    sigmas: tuple[float, ...] = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
    """Noise levels of the score (one compiled solve per method serves all: sigma is an array)."""
    methods: tuple[str, ...] = ("gfm", "score", "stein", "density")
    """Methods (sigma-dependent ones; rbf/land do not use the score)."""
    potential: Literal["tube", "trained"] = "tube"
    """Potential (see module doc)."""
    score_preset: str = "quick"
    """Training preset when potential='trained'."""
    lam: float = 1.0
    """GFM's lambda."""
    n_pairs: int = 6
    """Endpoint pairs."""
    n_points: int = 24
    """Waypoints per path."""
    blowup: float = 1.0
    """A path counts as failed if non-finite or its mean manifold error exceeds this."""
    seed: int = 0
    """Seed of the pairs."""
    name: str = "sigma_sweep"
    """Run folder name under <root>/gfm/."""


SIGMA_PRESETS = {
    "smoke": ("seconds", SigmaSweepConfig(sigmas=(0.3, 0.03), methods=("gfm", "stein"),
                                          n_pairs=2, n_points=12, name="sigma_sweep-smoke")),
    "quick": ("CPU, ~30 s: torus, tube potential, 4 pairs",
              SigmaSweepConfig(sigmas=(0.5, 0.2, 0.1, 0.05, 0.02, 0.01), n_pairs=4)),
    "paper": ("trained torus denoiser, 32 pairs",
              SigmaSweepConfig(potential="trained", score_preset="paper", n_pairs=32,
                               n_points=25, name="sigma_sweep-paper")),
}  # fmt: skip


def run_sigma_sweep(
    cfg: SigmaSweepConfig, *, root: str | Path = "results", overwrite: bool = False
) -> Path:
    """Run each method at each sigma on the same pairs; write ``<root>/gfm/<name>``."""
    from geomopt.manifolds import get_manifold

    root = Path(root)
    run = Run.create("gfm", cfg.name, cfg, root=root, overwrite=overwrite)
    summary = {}
    pcfg = PathsConfig(lam=cfg.lam)
    with jax.enable_x64(True):
        manifold = get_manifold(cfg.manifold)
        model, has_logp = _potential(
            dataclasses.replace(pcfg, potential=cfg.potential, score_preset=cfg.score_preset),
            cfg.manifold, root,
        )  # fmt: skip
        x0, x1 = sample_pairs(manifold, cfg.n_pairs, jax.random.key(cfg.seed))
        for sigma in cfg.sigmas:
            score = ScoreAt(model, sigma)
            logp = LogDensityAt(model, sigma) if has_logp else None
            for method in cfg.methods:
                if method == "density" and logp is None:
                    continue
                paths, rep = _solve_method(method, x0, x1, pcfg, score, logp, None, cfg.n_points)
                rows, _ = _evaluate(method, paths, rep, manifold, score, logp, pcfg, sigma)
                for r in rows:
                    r["failed"] = (not r["finite"]) or not (r["manifold_error_mean"] <= cfg.blowup)
                run.log_rows(rows)
                agg = _aggregate(rows)
                agg["failed"] = float(np.mean([r["failed"] for r in rows]))
                summary[f"{method}/sigma={sigma:g}"] = agg
    run.finish(summary)
    return run.path


@dataclasses.dataclass(frozen=True)
class TorusMetricsConfig:
    """The paper's three (alpha, beta) torus priors between (1.2, 0, 0.4) and (-1.2, 0, 0.4).

    Paper command: ``uv run experiments/gfm/torus_metrics.py paper``."""

    settings: tuple[tuple[float, float], ...] = ((0.05, 0.5), (5.0, 0.1), (1.0, 0.01))
    """(alpha, beta) pairs (poloidal, toroidal weights)."""
    gamma: float = 1.0
    """Normal-direction weight."""
    sigma: float = 0.1
    """Score noise level (official 0.1)."""
    lam: float = 1.0
    """GFM's lambda (official 1)."""
    n_points: int = 25
    """Waypoints (official 20-25)."""
    potential: Literal["tube", "trained"] = "tube"
    """Potential (see module doc)."""
    score_preset: str = "quick"
    """Training preset when potential='trained'."""
    name: str = "torus_metrics"
    """Run folder name under <root>/gfm/."""


TORUS_PRESETS = {
    "smoke": ("seconds", TorusMetricsConfig(n_points=13, name="torus_metrics-smoke")),
    "quick": ("CPU, seconds: tube potential", TorusMetricsConfig()),
    "paper": ("trained torus denoiser", TorusMetricsConfig(potential="trained",
                                                          score_preset="paper",
                                                          name="torus_metrics-paper")),
}  # fmt: skip


ROUTES = {"top": 0.0, "inner": 1.0, "outer": -1.0}


def torus_angle_init(n_points: int, route: str = "top", major=1.2, minor=0.4) -> np.ndarray:
    """A path from (th, ph) = (pi/2, 0) to (pi/2, pi), linear in ``ph``, mapped to the surface.

    ``"top"`` keeps ``th = pi/2`` (the official initialisation: linear in the intrinsic
    angles); ``"inner"`` / ``"outer"`` bend ``th`` by ``+-pi/2 sin(pi t)`` through the inner /
    outer equator, to find the other local solutions of the collocation problem."""
    t = np.linspace(0.0, 1.0, n_points)
    th = np.pi / 2 + ROUTES[route] * np.pi / 2 * np.sin(np.pi * t)
    ph = np.pi * t
    ring = major + minor * np.cos(th)
    return np.stack([ring * np.cos(ph), ring * np.sin(ph), minor * np.sin(th)], 1)


def discrete_action(path, metric, energy=None, lam=1.0) -> float:
    """``sum_i [1/2 dx_i^T G(m_i) dx_i / dt + lam U(m_i) dt]``: the action GFM makes stationary
    (the potential term only where ``energy`` = U is available)."""
    path = jnp.asarray(path)
    dt = 1.0 / (path.shape[0] - 1)
    dx = path[1:] - path[:-1]
    mid = 0.5 * (path[1:] + path[:-1])
    kin = 0.5 * jnp.einsum("ki,kij,kj->", dx, jax.vmap(metric)(mid), dx) / dt
    pot = 0.0 if energy is None else lam * dt * jnp.sum(jax.vmap(energy)(mid))
    return float(kin + pot)


def run_torus_metrics(
    cfg: TorusMetricsConfig, *, root: str | Path = "results", overwrite: bool = False
) -> Path:
    """Solve GFM under each (alpha, beta) prior from the top, inner and outer initial routes
    (one batched solve); the route of least action is the prior's choice.
    Writes ``<root>/gfm/<name>``."""
    from geomopt.manifolds import get_manifold

    root = Path(root)
    run = Run.create("gfm", cfg.name, cfg, root=root, overwrite=overwrite)
    arrays, summary = {}, {}
    with jax.enable_x64(True):
        manifold = get_manifold("torus")
        model, has_logp = _potential(
            PathsConfig(potential=cfg.potential, score_preset=cfg.score_preset), "torus", root
        )
        score = ScoreAt(model, cfg.sigma)
        energy = None
        if has_logp:
            logp = LogDensityAt(model, cfg.sigma)
            energy = lambda x: -logp(x)  # noqa: E731
        init = jnp.asarray(np.stack([torus_angle_init(cfg.n_points, r) for r in ROUTES]))
        x0, x1 = init[:, 0], init[:, -1]
        for alpha, beta in cfg.settings:
            metric = TorusMetric(alpha, beta, cfg.gamma)
            paths, rep = solve(x0, x1, score=score, metric=metric, lam=cfg.lam,
                               n_points=cfg.n_points, init=init)  # fmt: skip
            m = path_metrics(paths, manifold=manifold, metric=metric, score=score, lam=cfg.lam)
            rows = []
            for i, route in enumerate(ROUTES):
                p = np.asarray(paths[i])
                theta = np.arctan2(p[:, 2], np.hypot(p[:, 0], p[:, 1]) - 1.2)
                row = dict(
                    alpha=alpha, beta=beta, route=route, converged=bool(rep.converged[i]),
                    code=int(rep.code[i]), iterations=int(rep.iterations[i]),
                    residual=float(rep.residual[i]), wall_time=rep.wall_time,
                    action=discrete_action(p, metric, energy, cfg.lam),
                    mean_theta=float(np.mean(theta)),
                    **{k: float(np.asarray(v)[i]) for k, v in m.items() if k != "dist"},
                )  # fmt: skip
                rows.append(row)
                arrays[f"a{alpha:g}_b{beta:g}/{route}"] = p
            ok = [r for r in rows if r["converged"]] or rows
            best = min(ok, key=lambda r: r["action"])
            for r in rows:
                r["chosen"] = r is best
            run.log_rows(rows)
            summary[f"alpha={alpha:g},beta={beta:g}"] = best
    _save_npz(run.path / "paths.npz", **arrays)
    run.finish(summary)
    return run.path
