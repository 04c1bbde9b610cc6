"""``canon/stability``: how often a canonization's order changes under a perturbation, how much.

For lex / Hilbert / Morton canonization of clouds of ``P`` i.i.d. uniform points in ``[0, 1]^d``,
every point is moved by exactly ``eps`` in a random direction
(:func:`geomopt.canon._stability.stability_probe`); measured per ``eps`` and ``d``: (a) the
probability that the canonical permutation changes, (b) conditioned on a change, the largest
move of a slot of the canonical form (the jump) and displacement / Wasserstein distance.

Theory (module doc of :mod:`geomopt.canon._stability`): every permutation canonization is
discontinuous on a codimension-one set, so (a) grows like ``eps^1`` while it is small (at
``d = 3``, 64 points: below about ``1e-4`` for lex, ``1e-3`` for Hilbert / Morton) and (b)
does not shrink with ``eps`` (displacement / W ~ ``eps^-1``); the jump is the distance between
the points that trade places.

    uv run experiments/canon/stability.py [smoke|quick|paper]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.checks import (
    check_ints,
    check_names,
    check_positive,
    check_range,
    check_tuples,
)
from geomopt.experiment import Experiment, Run, figure_path

ORDER_NAMES = ("lex", "hilbert", "morton")
NAN_REASONS = {
    "change_slope": "fewer than two eps with 0 < P(change) < saturate={cfg.saturate}: no slope",
    "ratio_slope": "fewer than two eps where the order changed: no slope",
    "jump": "the order changed at no eps",
}


@dataclasses.dataclass(frozen=True)
class StabilityConfig:
    """Order-change probability and jump size of lex / Hilbert / Morton canonization vs eps, d.

    Paper launch: ``uv run experiments/canon/stability.py paper``.
    """

    dims: tuple[int, ...] = (2, 3, 4, 6, 8)
    """Point dimensions d."""
    orders: tuple[str, ...] = ORDER_NAMES
    """Canonizations probed."""
    eps: tuple[float, ...] = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    """Perturbation sizes (every point moves by exactly eps)."""
    n_clouds: int = 512
    """Clouds per dimension (i.i.d. uniform points in [0, 1]^d; fresh clouds sample the
    near-ties that decide the change probability better than more perturbations of few clouds)."""
    n_points: int = 64
    """Points per cloud (>= 2: one point has one order)."""
    n_perturb: int = 1
    """Perturbations per cloud and eps."""
    bits: int = 12
    """Bits per axis of the Hilbert / Morton quantisation (official: 12)."""
    max_ratio_clouds: int = 64
    """Changed clouds per (order, d, eps) whose displacement / W is averaged (W needs an
    assignment solve when eps is not small against the point separation); 0 = all."""
    saturate: float = 0.5
    """Fits use the eps with 0 < P(change) < saturate (the single-swap regime)."""
    seed: int = 0
    """Data and noise seed."""


def validate(cfg: StabilityConfig) -> None:
    check_names(cfg, "orders", ORDER_NAMES)
    check_tuples(cfg, "dims", "eps")
    check_ints(cfg, "dims", "n_clouds", "n_perturb")
    check_ints(cfg, "n_points", minimum=2)
    check_ints(cfg, "bits")
    check_range(cfg, "bits", 1, 32)
    check_ints(cfg, "max_ratio_clouds", "seed", minimum=0)
    check_positive(cfg, "eps")
    check_range(cfg, "saturate", 0, 1, low_open=True)


def run(cfg: StabilityConfig, run: Run) -> dict[str, float]:
    import numpy as np

    from geomopt.canon._stability import stability_probe, summarise_stability

    headline: dict[str, float] = {}
    bar = run.progress(total=len(cfg.dims), desc="stability", unit="d")
    for d in cfg.dims:
        bar.set_description(f"d={d}, {len(cfg.orders)} orders x {len(cfg.eps)} eps")
        x = np.random.default_rng([cfg.seed, d]).random((cfg.n_clouds, cfg.n_points, d))
        rows = stability_probe(
            x,
            cfg.orders,
            cfg.eps,
            n_perturb=cfg.n_perturb,
            bits=cfg.bits,
            seed=cfg.seed + d,
            max_ratio_clouds=cfg.max_ratio_clouds or None,
        )
        run.log_rows(rows)
        for order in cfg.orders:
            s = summarise_stability([r for r in rows if r["order"] == order], saturate=cfg.saturate)
            for key, v in s.items():
                headline[f"{key}/{order}/d{d}"] = v
                if v != v:
                    run.explain_nan(f"{key}/{order}/d{d}", NAN_REASONS[key].format(cfg=cfg))
        bar.update(1)
    bar.close()
    return headline


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``stability.png``: P(order changes) vs eps per d; jump (largest slot move) given a
    change vs d; displacement / W given a change vs eps."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    rows = record.metrics
    head = record.headline
    dims = list(cfg["dims"])
    fig, axes = plotting.figure(3, 1, width=3.5, height=3.0)
    a, b, c = axes.flat
    styles = dict(zip(dims, ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 3))] * 3, strict=False))
    for order in cfg["orders"]:
        col = plotting.color(order)
        for d in (dims[0], dims[-1]):
            sel = [r for r in rows if r["order"] == order and r["d"] == d]
            eps = [r["eps"] for r in sel]
            changed = [float(r["changed"]) if float(r["changed"]) > 0 else np.nan for r in sel]
            a.plot(
                eps, changed, marker="o", ms=3, ls=styles[d], color=col, label=f"{order}, d = {d}"
            )
            ratio = [float(r["ratio"]) for r in sel]  # NaN is stored as the string "nan"
            c.plot(eps, ratio, marker="o", ms=3, ls=styles[d], color=col)
        jump = [float(head.get(f"jump/{order}/d{d}", "nan")) for d in dims]
        b.plot(dims, jump, "o-", color=col)
    eps_all = np.array(sorted(cfg["eps"]))
    a.plot(eps_all, np.clip(eps_all / eps_all[len(eps_all) // 2] * 0.1, None, 1), "k--", lw=0.8,
           label="slope 1")  # fmt: skip
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("perturbation eps")
    a.set_ylabel("P(canonical order changes)")
    b.set_xticks(dims)
    b.set_xlabel("point dimension d")
    b.set_ylabel("jump: largest slot move | change")
    c.set_xscale("log")
    c.set_yscale("log")
    c.set_xlabel("perturbation eps")
    c.set_ylabel("displacement / W | change")
    ha, la = a.get_legend_handles_labels()
    fig.legend(ha, la, loc="outside lower center", ncol=4)
    return [plotting.save(fig, figure_path(run_dir, out, "stability"))]


EXPERIMENT = Experiment(
    name="canon/stability",
    description="probability that a perturbation changes the canonical order, and the jump size, "
    "for lex / Hilbert / Morton vs eps and d",
    presets={
        "smoke": StabilityConfig(
            dims=(2, 3), eps=(3e-4, 1e-3, 3e-3), n_clouds=64, n_points=16, n_perturb=2
        ),
        "quick": StabilityConfig(),
        "paper": StabilityConfig(
            dims=(2, 3, 4, 5, 6, 8, 10), n_clouds=1024, n_points=256, n_perturb=2
        ),
    },  # fmt: skip
    notes={
        "smoke": "d = 2, 3, 64 clouds of 16 points, eps 3e-4..3e-3 (every slope fitted), seconds",
        "quick": "64 points, 512 clouds, d = 2..8, eps 1e-6..1e-2",
        "paper": "256 points (official covering size), 1024 clouds x 2 perturbations, d = 2..10",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "change_slope/lex/d3",
        "change_slope/hilbert/d3",
        "ratio_slope/lex/d3",
        "ratio_slope/hilbert/d3",
        "jump/lex/d3",
        "jump/hilbert/d3",
    ),
    paper={
        "change_slope/lex/d3": 1.0,
        "change_slope/hilbert/d3": 1.0,
        "ratio_slope/lex/d3": -1.0,
        "ratio_slope/hilbert/d3": -1.0,
    },
    paper_source="theory (README): a permutation canonization jumps on a codimension-1 set, "
    "P(change) ~ eps^1, displacement / W given a change ~ eps^-1",
    seconds={"smoke": 1.8, "quick": 128.0},
)
