"""One latent-interpolation comparison, shared by ``gfm/shapes`` and ``gfm/digits``.

For each seed (``cfg.seed``, ``cfg.seed + 1``, ...; the unit of replication: its own models,
endpoint pairs and noise), :func:`run_study` prepares a :class:`Trial` (the experiment's
models and endpoints), runs every method of :mod:`geomopt.latent._interp` on it (noise ->
solve -> denoise, clean endpoints pinned), scores each method's paths and the experiment's
floors (reference rows such as the autoencoder's reconstructions), and logs one row per seed
and method. The headline is the mean over seeds of each declared metric with its 95 %
t-interval over seeds (:func:`geomopt.stats.mean_ci`): ``method/metric``,
``method/metric/ci_lo``, ``method/metric/ci_hi``.

**Ablations** (``cfg.ablations``, e.g. ``("sigma=0.15", "lam=0", "residual=euclidean")``):
GFM again on every seed's trial with one setting changed -- the same models, endpoint pairs
and noise draw (the noise is ``sigma * eps`` with one ``eps`` per seed) -- as rows
``gfm@sigma=0.15`` etc., scored like the methods, plus the paired difference to the default
``gfm`` row per seed: ``gfm@sigma=0.15/metric/minus_gfm`` with its 95 % interval over seeds.

**GFM against each method**: when ``gfm`` runs, the headline also has its paired difference
to every other method, ``gfm/metric/minus_<method>`` (per seed, same models and pairs) with
its 95 % interval over seeds: the comparison the experiment is for.

An experiment is a :class:`Study`: how to prepare a seed, how to score paths, which floors it
has, which metrics go to the headline, and what to keep for its figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from geomopt.stats import mean_ci, min_detectable_effect

__all__ = [
    "Trial",
    "Study",
    "run_study",
    "summarise",
    "error_bars",
    "fit_subset",
    "quality_ratio",
    "apply_quality_bar",
    "ABLATABLE",
    "parse_ablation",
    "check_ablations",
    "paired_differences",
]


class Trial(NamedTuple):
    """One seed's inputs: the denoiser, the data rbf / land fit, clean endpoints ``x0, x1
    (B, d)``, the key of the endpoint noise, and whatever the experiment's scoring needs
    (``extra``)."""

    denoiser: Any
    data: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    key: Any
    extra: Any = None


@dataclasses.dataclass(frozen=True)
class Study:
    """An experiment, declared: ``prepare(seed) -> Trial``; ``score(trial, paths (B, K, d))
    -> {metric: value}`` of one method's paths; ``floors(trial) -> {name: {metric: value}}``
    (reference rows); the metrics of methods and floors that enter the headline; ``keep(trial,
    paths)`` saves what the figures need (called for the first seed)."""

    prepare: Callable[[int], Trial]
    score: Callable[[Trial, np.ndarray], dict[str, float]]
    headline: tuple[str, ...]
    floors: Callable[[Trial], Mapping[str, Mapping[str, float]]] = lambda trial: {}
    floor_headline: tuple[str, ...] = ()
    keep: Callable[[Trial, dict], None] = lambda trial, paths: None


def summarise(per_seed: list[Mapping[str, Mapping[str, float]]], keys: Mapping[str, tuple]):
    """``{row/metric: mean, row/metric/ci_lo, row/metric/ci_hi}`` over seeds for each ``row``
    and its ``keys[row]`` present, and ``{row/metric: reason}`` where a value is NaN (a seed
    without the value, or a single seed: no interval)."""
    out: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for row, metrics in keys.items():
        for k in metrics:
            vals = [float(seed_rows[row][k]) for seed_rows in per_seed if k in seed_rows[row]]
            if not vals:
                continue
            name = f"{row}/{k}"
            bad = [i for i, v in enumerate(vals) if not math.isfinite(v)]
            if bad:
                out[name] = out[f"{name}/ci_lo"] = out[f"{name}/ci_hi"] = math.nan
                reasons[name] = f"not finite in seed(s) {bad} (see metrics.jsonl)"
                continue
            out[name], out[f"{name}/ci_lo"], out[f"{name}/ci_hi"] = mean_ci(vals)
            if len(vals) < 2:
                reasons[f"{name}/ci_lo"] = reasons[f"{name}/ci_hi"] = "one seed: no interval"
    return out, reasons


def fit_subset(n: int, k: int, seed: int) -> np.ndarray:
    """Sorted indices of a random subset of ``min(k, n)`` of ``range(n)``, drawn from ``seed``
    alone (all of them when ``k >= n``): the same ``n`` and ``seed`` give the same indices, so
    every method of a seed is scored on the same pairs and waypoints (a paired comparison)."""
    if n < 0 or k < 1:
        raise ValueError(f"n={n!r}, k={k!r}: expected n >= 0 and k >= 1")
    if k >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def quality_ratio(sample: float, data: float) -> float:
    """``sample / data``: a model's samples' distance (to the shape family, or FID) divided by
    the data's own in the same units; NaN when either is not finite or ``data <= 0``."""
    sample, data = float(sample), float(data)
    if not (math.isfinite(sample) and math.isfinite(data)) or data <= 0:
        return math.nan
    return sample / data


def apply_quality_bar(headline: dict[str, float], factor: float, what: str, run: Any) -> bool:
    """The quality bar: the mean over seeds of ``quality/sample_ratio`` (per seed,
    :func:`quality_ratio`) at most ``factor``. Adds ``quality/factor`` and ``quality/ok``
    (1.0 met, 0.0 not met or no finite ratio) to ``headline`` and prints one line saying
    which; the run goes on either way (the comparison is reported, with the bar beside it)."""
    ratio = headline.get("quality/sample_ratio", math.nan)
    ok = math.isfinite(ratio) and ratio <= factor
    headline["quality/factor"] = float(factor)
    headline["quality/ok"] = float(ok)
    verdict = "MET" if ok else "NOT MET: the comparison below is made with models under the bar"
    run.print(f"quality bar ({what} / data's own <= {factor:g}): ratio {ratio:.3g}, {verdict}")
    return ok


def error_bars(headline: Mapping[str, float], rows, metric: str) -> np.ndarray:
    """``(2, len(rows))`` distances from each ``row/metric`` to its ``/ci_lo`` and ``/ci_hi``
    in ``headline`` (``yerr`` of a bar chart; 0 where there is no interval)."""
    err = np.zeros((2, len(rows)))
    for j, row in enumerate(rows):
        name = f"{row}/{metric}"
        mid = headline.get(name, math.nan)
        err[0, j] = mid - headline.get(f"{name}/ci_lo", math.nan)
        err[1, j] = headline.get(f"{name}/ci_hi", math.nan) - mid
    return np.nan_to_num(err, nan=0.0)


ABLATION_BASE = "gfm"
"""The method every ablation re-runs with one setting changed, and compares against."""

ABLATABLE = ("sigma", "lam", "residual")
"""Settings an ablation may change: the noise level, the potential weight, the residual."""

_RESIDUALS = ("hypersphere", "euclidean")


def parse_ablation(spec: str) -> tuple[str, float | str]:
    """``"field=value"`` -> ``(field, value)`` for a field of :data:`ABLATABLE`: ``sigma``
    (finite, > 0), ``lam`` (finite, >= 0), ``residual`` (``hypersphere`` / ``euclidean``);
    a ``ValueError`` naming the spec and what was expected otherwise."""
    field, sep, text = str(spec).partition("=")
    field, text = field.strip(), text.strip()
    if not sep or field not in ABLATABLE:
        raise ValueError(
            f"ablation {spec!r}: expected 'field=value' with field one of {', '.join(ABLATABLE)}"
        )
    if field == "residual":
        if text not in _RESIDUALS:
            raise ValueError(f"ablation {spec!r}: expected residual one of {', '.join(_RESIDUALS)}")
        return field, text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and (value > 0 if field == "sigma" else value >= 0)
    if not ok:
        what = "a finite number > 0" if field == "sigma" else "a finite number >= 0"
        raise ValueError(f"ablation {spec!r}: expected {field} to be {what}")
    return field, value


def check_ablations(cfg: Any) -> None:
    """Validate ``cfg.ablations`` (each :func:`parse_ablation`, no duplicates, ``gfm`` among
    ``cfg.methods`` to compare with); one ``ValueError`` line on the first problem."""
    specs = tuple(getattr(cfg, "ablations", ()))
    for spec in specs:
        parse_ablation(spec)
    if len(set(specs)) != len(specs):
        raise ValueError(f"ablations={specs!r}: expected no duplicates")
    if specs and ABLATION_BASE not in cfg.methods:
        raise ValueError(
            f"ablations={specs!r}: expected {ABLATION_BASE!r} among methods={tuple(cfg.methods)!r} "
            "(each ablation is compared with it on the same pairs)"
        )


def paired_differences(
    per_seed: list[Mapping[str, Mapping[str, float]]], row: str, base: str, metrics: tuple
) -> dict[str, float]:
    """``{row/metric/minus_base: mean, .../ci_lo, .../ci_hi, .../mde80}``: per seed ``row``
    minus ``base`` (same pairs and models), its mean over seeds, 95 % t-interval, and the
    smallest true difference this many seeds detect with 80 % power at that spread
    (:func:`geomopt.stats.min_detectable_effect`); metrics missing from either row are
    skipped, non-finite differences give NaN."""
    out: dict[str, float] = {}
    for k in metrics:
        diffs = [float(r[row][k]) - float(r[base][k]) for r in per_seed
                 if k in r.get(row, {}) and k in r.get(base, {})]  # fmt: skip
        if not diffs:
            continue
        name = f"{row}/{k}/minus_{base}"
        if all(math.isfinite(v) for v in diffs):
            out[name], out[f"{name}/ci_lo"], out[f"{name}/ci_hi"] = mean_ci(diffs)
            sd = float(np.std(diffs, ddof=1)) if len(diffs) > 1 else math.nan
            out[f"{name}/mde80"] = min_detectable_effect(sd, len(diffs))
        else:
            out[name] = out[f"{name}/ci_lo"] = out[f"{name}/ci_hi"] = math.nan
            out[f"{name}/mde80"] = math.nan
    return out


def _mean_rows(per_seed: list[Mapping[str, Mapping[str, float]]]) -> dict[str, dict]:
    """Per row and metric, the mean over seeds of the finite values (NaN if none)."""
    table: dict[str, dict] = {}
    for row in per_seed[0]:
        keys = {k for seed_rows in per_seed for k in seed_rows[row]}
        table[row] = {}
        for k in sorted(keys):
            v = np.array([float(r[row][k]) for r in per_seed if k in r[row]], float)
            v = v[np.isfinite(v)]
            table[row][k] = float(v.mean()) if v.size else math.nan
    return table


def _one_seed(
    study: Study, methods: tuple[str, ...], settings: dict, seed: int, run: Any,
    ablations: tuple[str, ...] = (),
):  # fmt: skip
    """Prepare, interpolate and score one seed (and its ablations, as rows
    ``gfm@<spec>``); ``(trial, rows, paths)`` (``paths`` without the ablations)."""
    from . import _interp as itp

    trial = study.prepare(seed)
    total = len(methods) + len(ablations)
    bar = run.progress(total=total, desc=f"seed {seed}: interpolate", unit="method")

    def step(m):
        bar.set_description(f"seed {seed}: done {m}")
        bar.update(1)

    common = {"denoiser": trial.denoiser, "data": trial.data, "key": trial.key}
    paths = itp.interpolate_all(trial.x0, trial.x1, methods=methods, on_method=step,
                                **common, **settings)  # fmt: skip
    results = dict(paths)
    for spec in ablations:
        field, value = parse_ablation(spec)
        changed = {**settings, field: value}
        res = itp.interpolate_all(trial.x0, trial.x1, methods=(ABLATION_BASE,), **common,
                                  **changed)  # fmt: skip
        results[f"{ABLATION_BASE}@{spec}"] = res[ABLATION_BASE]
        step(f"{ABLATION_BASE}@{spec}")
    bar.close()
    rows: dict[str, dict[str, float]] = {}
    bar = run.progress(total=total + 1, desc=f"seed {seed}: score", unit="set")
    for name, row in study.floors(trial).items():
        rows[name] = dict(row)
    bar.update(1)
    for m, res in results.items():
        bar.set_description(f"seed {seed}: score {m}")
        row = dict(study.score(trial, res["path"]))
        row["seconds"] = res["seconds"]
        if res["converged"] is not None:
            row["converged"] = float(np.mean(res["converged"]))
            row["iterations"] = float(np.mean(res["iterations"]))
        if "endpoint_shift" in res:
            row["endpoint_shift"] = res["endpoint_shift"]
        rows[m] = row
        bar.update(1)
    bar.close()
    return trial, rows, paths


def run_study(study: Study, cfg: Any, run: Any) -> dict[str, float]:
    """Every seed of ``study`` with the methods and settings of ``cfg`` (fields ``methods``,
    ``seed``, ``n_seeds``, optionally ``ablations``, and those of
    :class:`geomopt.latent._interp.Settings`); logs a row per seed and method (floors and
    ablations included) to ``run`` and returns the headline (module docstring).
    ``run.details``: ``table`` (means over seeds), ``per_seed``, ``methods``, ``ablations``
    (row names), ``seeds``."""
    from . import _interp as itp

    check_ablations(cfg)
    settings = dataclasses.asdict(itp.Settings.of(cfg))
    methods = tuple(cfg.methods)
    ablations = tuple(getattr(cfg, "ablations", ()))
    ablation_rows = [f"{ABLATION_BASE}@{spec}" for spec in ablations]
    seeds = [cfg.seed + i for i in range(cfg.n_seeds)]
    per_seed: list[dict[str, dict[str, float]]] = []
    for seed in seeds:
        trial, rows, paths = _one_seed(study, methods, settings, seed, run, ablations)
        run.log_rows([{"seed": seed, "method": name, **row} for name, row in rows.items()])
        if seed == seeds[0]:
            study.keep(trial, paths)
        per_seed.append(rows)
    keys = {m: study.headline for m in (*methods, *ablation_rows)}
    keys.update({name: study.floor_headline for name in per_seed[0] if name not in keys})
    headline, reasons = summarise(per_seed, keys)
    for row in ablation_rows:
        headline.update(paired_differences(per_seed, row, ABLATION_BASE, study.headline))
    if ABLATION_BASE in methods:  # GFM against every other method on the same pairs
        for m in methods:
            if m != ABLATION_BASE:
                headline.update(paired_differences(per_seed, ABLATION_BASE, m, study.headline))
    for k, why in reasons.items():
        run.explain_nan(k, why)
    run.details["table"] = _mean_rows(per_seed)
    run.details["per_seed"] = per_seed
    run.details["methods"] = list(methods)
    run.details["ablations"] = ablation_rows
    run.details["seeds"] = seeds
    return headline
