"""Wall time and throughput of the ``paper`` preset of the sparse-noise experiment.

``uv run benchmarks/bench_sparse_noise.py`` runs ``experiments/signsgd/sparse_noise.py paper``
(d = 10..10^5, sparse and dense noise, the step-size grids, 16 seeds, and the phi sweep) into a
temporary results root, prints the wall time and the throughput in optimiser steps per second
summed over the batch (runs x steps), and writes ``benchmarks/results/sparse_noise.md``.
Goal: under 2 minutes on 2 CPU cores.
"""

import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import jax

from geomopt.cli import preset_cli
from geomopt.problems.experiments import SPARSE_PRESETS, run_sparse_noise


@dataclasses.dataclass(frozen=True)
class Config:
    preset: str = "paper"
    """Preset of the sparse-noise experiment to time (paper, quick or smoke)."""
    out: Path | None = Path("benchmarks/results/sparse_noise.md")
    """Markdown file for the results (None: print only)."""


PRESETS = {
    "paper": ("time the paper preset (the goal: < 2 min on 2 CPU cores)", Config()),
    "quick": ("time the quick preset", Config(preset="quick", out=None)),
    "smoke": ("time the smoke preset (seconds)", Config(preset="smoke", out=None)),
}


def main(cfg: Config) -> None:
    exp = SPARSE_PRESETS[cfg.preset][1]
    with tempfile.TemporaryDirectory() as tmp:
        run_cfg = dataclasses.replace(exp, root=Path(tmp), overwrite=True)
        load_before = os.getloadavg()[0]
        t0, cpu0 = time.perf_counter(), time.process_time()
        path = run_sparse_noise(run_cfg)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        load_after = os.getloadavg()[0]
        rows = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
        summary = json.loads((path / "summary.json").read_text())
    run_steps = coord_steps = full_coord_steps = 0
    for r in rows:
        grid = len(exp.sgd_grid) if r["opt"] == "sgd" else len(exp.sign_grid)
        steps = r["checkpoints"][-1] * grid * exp.seeds
        stored = r["d"] if r["d"] <= exp.full_max_d else 2 * exp.levels
        run_steps += steps
        coord_steps += steps * stored
        full_coord_steps += steps * r["d"]
    lines = [
        "# Sparse-noise experiment: paper preset timing",
        "",
        f"Command: `uv run benchmarks/bench_sparse_noise.py {cfg.preset}`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores "
        f"visible, JAX {jax.__version__} on {jax.default_backend()}, float32.",
        "",
        "| quantity | value |",
        "|---|---:|",
        f"| wall time (incl. compilation) | {wall:.1f} s |",
        f"| CPU time of this process (all threads) | {cpu:.1f} s |",
        f"| 1-min load average before / after (other jobs on the machine) | "
        f"{load_before:.1f} / {load_after:.1f} |",
        f"| dimensions d | {', '.join(map(str, exp.dims))} |",
        f"| phi sweep | d = {exp.phi_d}, {exp.phi_points} values of s |",
        f"| seeds x grid | {exp.seeds} x {len(exp.sgd_grid)} (SGD), "
        f"{exp.seeds} x {len(exp.sign_grid)} (SignSGD) |",
        f"| optimiser steps summed over the batch | {run_steps:.3e} |",
        f"| throughput (optimiser steps / s, summed over the batch) | {run_steps / wall:.3e} |",
        f"| stored coordinate updates / s | {coord_steps / wall:.3e} |",
        f"| equivalent full-d coordinate updates / s | {full_coord_steps / wall:.3e} |",
        f"| censored (problem, optimiser) pairs | {summary['censored_runs']} |",
        "",
        "Fitted slopes (log-log least squares) of gradient evaluations to reach eps:",
        "",
        "| optimiser / noise | slope vs d | theory |",
        "|---|---:|---:|",
    ]
    for k, v in summary["slopes_vs_d"].items():
        lines.append(f"| {k} | {v:.3f} | {summary['predicted_vs_d'][k]:g} |")
    lines += ["", "| optimiser | slope vs phi | theory |", "|---|---:|---:|"]
    for k, v in summary["slopes_vs_phi"].items():
        lines.append(f"| {k} | {v:.3f} | {summary['predicted_vs_phi'][k]:g} |")
    lines += [
        "",
        f"Problems with d > {exp.full_max_d} are simulated by the exact class reduction "
        f"({2 * exp.levels} stored coordinates standing for all d, see "
        "`geomopt.problems.sgd_hard_instance`); the last row counts the coordinate updates of "
        "the full d-dimensional runs they stand for.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if cfg.out is not None:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(text)
        print(f"wrote {cfg.out}", file=sys.stderr)


if __name__ == "__main__":
    main(preset_cli(PRESETS, default="paper", description=__doc__))
