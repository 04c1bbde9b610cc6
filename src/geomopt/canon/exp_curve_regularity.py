"""``canon/curve_regularity``: the Hoelder exponent of the Hilbert and Morton curves, measured.

For each curve and ``d``, :func:`geomopt.canon._holder.curve_modulus` samples pairs of curve
parameters ``(t, t + D)`` at every scale ``D ~ 2**e`` — uniformly at random and straddling block
boundaries of every level (the worst-case search) — decodes them and fits the exponent of
``sup |H(t) - H(t + D)|`` against ``D`` (log-log). Theory: the Hilbert curve is Hoelder-``1/d``
(exponent ``1/d`` for the sup and for the typical pair); the Morton curve is discontinuous
(worst-case exponent 0: consecutive cells ``sqrt(d - 1)`` apart at a top-level block boundary)
while its typical pair still scales like ``D^(1/d)``.

    uv run experiments/canon/curve_regularity.py [smoke|quick|paper]
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from geomopt.checks import check_ints, check_names, check_range, check_tuples
from geomopt.experiment import Experiment, Run, figure_path

CURVE_NAMES = ("hilbert", "morton")


@dataclasses.dataclass(frozen=True)
class CurveRegularityConfig:
    """Sampled modulus of continuity of space-filling curves, d = 2..10.

    Paper launch: ``uv run experiments/canon/curve_regularity.py paper``.
    """

    dims: tuple[int, ...] = (2, 3, 4, 5, 6, 7, 8)
    """Dimensions d (>= 2)."""
    curves: tuple[str, ...] = CURVE_NAMES
    """Curves measured ("hilbert", "morton")."""
    index_bits: int = 96
    """Bits of the curve index: bits per axis = min(max_bits, index_bits // d)."""
    max_bits: int = 16
    """Largest number of bits per axis (3..32)."""
    n_pairs: int = 256
    """Pairs per scale and sampling kind (random and block-straddling)."""
    scale_step: int = 1
    """Scales e = 1, 1 + step, ... (D ~ 2**e grid steps)."""
    seed: int = 0
    """Sampling seed."""


def validate(cfg: CurveRegularityConfig) -> None:
    check_names(cfg, "curves", CURVE_NAMES)
    check_tuples(cfg, "dims")
    check_ints(cfg, "dims", minimum=2)
    check_ints(cfg, "index_bits", "n_pairs", "scale_step")
    check_ints(cfg, "max_bits", minimum=3)
    check_range(cfg, "max_bits", 3, 32)
    check_ints(cfg, "seed", minimum=0)
    from geomopt.canon._holder import default_bits

    for d in cfg.dims:
        bits = default_bits(d, cfg.index_bits, cfg.max_bits)
        if bits < 3:
            raise ValueError(
                f"index_bits={cfg.index_bits!r}: expected at least 3 bits per axis at d={d} "
                f"(index_bits >= {3 * d})"
            )
        fitted = [e for e in range(1, d * bits, cfg.scale_step) if d <= e <= d * (bits - 1)]
        if len(fitted) < 2:
            raise ValueError(
                f"scale_step={cfg.scale_step!r}: expected a step leaving at least two scales "
                f"in [d, d * (bits - 1)] = [{d}, {d * (bits - 1)}] at d={d} ({bits} bits per axis)"
            )


def run(cfg: CurveRegularityConfig, run: Run) -> dict[str, float]:
    from geomopt.canon._holder import curve_modulus, default_bits

    headline: dict[str, float] = {}
    jobs = [(d, c) for d in cfg.dims for c in cfg.curves]
    bar = run.progress(total=len(jobs), desc="curves", unit="curve")
    for d, curve in jobs:
        bits = default_bits(d, cfg.index_bits, cfg.max_bits)
        bar.set_description(f"{curve}, d={d}, {bits} bits")
        res = curve_modulus(
            curve, d, bits, n_pairs=cfg.n_pairs, scale_step=cfg.scale_step, seed=cfg.seed
        )
        run.log_rows({"curve": curve, "d": d, "bits": bits, **r} for r in res["rows"])
        headline[f"curve/{curve}/d{d}"] = res["exponent"]
        headline[f"curve/{curve}/d{d}/median"] = res["exponent_median"]
        run.details[f"{curve}/d{d}"] = {k: res[k] for k in ("bits", "exponent_random", "constant")}
        bar.update(1)
    bar.close()
    return headline


def plot(run_dir: Path, out: Path) -> list[Path]:
    """``curve_regularity.png``: fitted exponents vs d against 1/d; sup and median modulus vs
    the parameter gap at the smallest and largest d."""
    import numpy as np

    from geomopt import plotting
    from geomopt.experiment import read_run

    record = read_run(run_dir)
    cfg = record.config_values
    head = record.headline
    dims = list(cfg["dims"])
    fig, axes = plotting.figure(2, 1, width=3.8, height=3.0)
    a, b = axes.flat
    for curve in cfg["curves"]:
        c = plotting.color(curve)
        a.plot(dims, [float(head[f"curve/{curve}/d{d}"]) for d in dims], "o-", color=c,
               label=f"{curve}: worst case found")  # fmt: skip
        a.plot(dims, [float(head[f"curve/{curve}/d{d}/median"]) for d in dims], "s:", color=c,
               label=f"{curve}: typical pair (median)")  # fmt: skip
    a.plot(dims, [1 / d for d in dims], "k--", lw=1, label="1/d")
    a.set_xticks(dims)
    a.set_xlabel("dimension d")
    a.set_ylabel("fitted Hoelder exponent")
    a.set_title("exponent of |H(t) - H(s)| vs |t - s|")
    rows = record.metrics
    for d, ls in ((dims[0], "-"), (dims[-1], "--")):
        for curve in cfg["curves"]:
            sel = [r for r in rows if r["curve"] == curve and r["d"] == d]
            delta = np.array([r["delta"] for r in sel])
            b.plot(delta, [r["sup"] for r in sel], ls, color=plotting.color(curve),
                   label=f"{curve}, d = {d}: sup")  # fmt: skip
        delta = np.array(
            [r["delta"] for r in rows if r["d"] == d and r["curve"] == cfg["curves"][0]]
        )
        b.plot(delta, delta ** (1 / d), ls, color="k", lw=0.8, label=f"|t - s|^(1/{d})")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("parameter gap |t - s|")
    b.set_ylabel("largest |H(t) - H(s)| found")
    ha, la = a.get_legend_handles_labels()
    hb, lb = b.get_legend_handles_labels()
    fig.legend(ha + hb, la + lb, loc="outside lower center", ncol=3)
    return [plotting.save(fig, figure_path(run_dir, out, "curve_regularity"))]


EXPERIMENT = Experiment(
    name="canon/curve_regularity",
    description="Hoelder exponent of the Hilbert and Morton curves measured on sampled pairs, "
    "against 1/d",
    presets={
        "smoke": CurveRegularityConfig(dims=(2, 3), index_bits=24, n_pairs=32, scale_step=2),
        "quick": CurveRegularityConfig(),
        "paper": CurveRegularityConfig(
            dims=(2, 3, 4, 5, 6, 7, 8, 9, 10), index_bits=120, n_pairs=1024
        ),
    },
    notes={
        "smoke": "d = 2, 3 at 12 / 8 bits, seconds",
        "quick": "d = 2..8, 96-bit indices, 256 pairs per scale and kind (about 30 s on 2 cores)",
        "paper": "d = 2..10, 120-bit indices, 1024 pairs per scale and kind",
    },
    run=run,
    plot=plot,
    validate=validate,
    figures_dir="experiments/canon/figures",
    key_numbers=(
        "curve/hilbert/d2",
        "curve/hilbert/d3",
        "curve/morton/d2",
        "curve/morton/d3",
        "curve/morton/d3/median",
    ),
    paper={
        "curve/hilbert/d2": 1 / 2,
        "curve/hilbert/d3": 1 / 3,
        "curve/morton/d2": 0.0,
        "curve/morton/d3": 0.0,
        "curve/morton/d3/median": 1 / 3,
    },
    paper_source="theory: Hilbert curve Hoelder-1/d; Morton discontinuous (worst case 0), its "
    "typical pair ~ |t - s|^(1/d)",
    seconds={"smoke": 1.1, "quick": 236.0},
)
