"""Wall time and throughput of the ``paper`` preset of the sparse-noise experiment.

``uv run benchmarks/bench_sparse_noise.py`` runs ``experiments/signsgd/sparse_noise.py paper``
(d = 10..10^5, sparse and dense noise, the step-size grids, 16 seeds, and the phi sweep) into a
temporary results root, prints the wall time and the throughput in optimiser steps per second
summed over the batch (runs x steps), and writes ``benchmarks/results/sparse_noise.md``.
Goal: under 2 minutes on 2 CPU cores.
"""

import dataclasses
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import tyro

from geomopt.experiment import execute
from geomopt.problems.exp_sparse_noise import EXPERIMENT, PREDICTED_VS_D, PREDICTED_VS_PHI
from geomopt.runs import read_run


@dataclasses.dataclass(frozen=True)
class Config:
    preset: str = "paper"
    """Preset of the sparse-noise experiment to time (paper, quick or smoke)."""
    out: Path | None = Path("benchmarks/results/sparse_noise.md")
    """Markdown file for the results (None: print only)."""


def main(cfg: Config) -> None:
    import jax

    exp = EXPERIMENT.preset(cfg.preset)
    with tempfile.TemporaryDirectory() as tmp:
        load_before = os.getloadavg()[0]
        t0, cpu0 = time.perf_counter(), time.process_time()
        outcome = execute(EXPERIMENT, exp, preset=cfg.preset, out=Path(tmp))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        load_after = os.getloadavg()[0]
        record = read_run(outcome.path)
        rows, head = record.metrics, record.headline
    run_steps = coord_steps = full_coord_steps = 0
    for r in rows:
        grid = len(exp.sgd_grid) if r["opt"] == "sgd" else len(exp.sign_grid)
        steps = r["checkpoints"][-1] * grid * exp.n_seeds
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
        f"| seeds x grid | {exp.n_seeds} x {len(exp.sgd_grid)} (SGD), "
        f"{exp.n_seeds} x {len(exp.sign_grid)} (SignSGD) |",
        f"| optimiser steps summed over the batch | {run_steps:.3e} |",
        f"| throughput (optimiser steps / s, summed over the batch) | {run_steps / wall:.3e} |",
        f"| stored coordinate updates / s | {coord_steps / wall:.3e} |",
        f"| equivalent full-d coordinate updates / s | {full_coord_steps / wall:.3e} |",
        f"| censored (problem, optimiser) pairs | {head['censored_runs']} |",
        "",
        "Fitted slopes (log-log least squares) of gradient evaluations to reach eps:",
        "",
        "| optimiser / noise | slope vs d | theory |",
        "|---|---:|---:|",
    ]
    for k, v in head.items():
        if k.startswith("slope_vs_d/"):
            key = k.removeprefix("slope_vs_d/")
            lines.append(f"| {key} | {v:.3f} | {PREDICTED_VS_D.get(key, 0.0):g} |")
    lines += ["", "| optimiser | slope vs phi | theory |", "|---|---:|---:|"]
    for k, v in head.items():
        if k.startswith("slope_vs_phi/"):
            key = k.removeprefix("slope_vs_phi/")
            lines.append(f"| {key} | {v:.3f} | {PREDICTED_VS_PHI.get(key, 0.0):g} |")
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
    main(tyro.cli(Config, description=__doc__))
