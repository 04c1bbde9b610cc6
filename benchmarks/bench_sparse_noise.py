"""Wall time and throughput of a preset of the sparse-noise experiment (default ``quick``).

``uv run benchmarks/bench_sparse_noise.py`` runs ``experiments/signsgd/sparse_noise.py quick``
(d = 10..1000 with sparse noise, dense noise and the noise-free control, the step-size grids,
16 seeds, the phi sweep) into a temporary results root, prints the wall time and the throughput
in optimiser steps per second summed over the batch (runs x steps), and writes
``benchmarks/results/sparse_noise.md``. ``--preset paper`` times the paper preset (d up to
10^4, about 10^8 SGD steps under sparse noise: an hour or more on 2 cores).
Goal: the quick preset under 5 minutes on 2 CPU cores.
"""

import dataclasses
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import tyro

from geomopt.experiment import execute, read_run
from geomopt.problems.exp_sparse_noise import EXPERIMENT, predicted


@dataclasses.dataclass(frozen=True)
class Config:
    preset: str = "quick"
    """Preset of the sparse-noise experiment to time (quick, paper or smoke)."""
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
    for r in rows:  # every problem of a batch runs the batch's steps
        grid = len(exp.sgd_grid) if r["opt"] == "sgd" else len(exp.sign_grid)
        steps = r["steps_run"] * grid * exp.n_seeds
        stored = r["d"] if r["d"] <= exp.full_max_d else 2 * exp.levels
        run_steps += steps
        coord_steps += steps * stored
        full_coord_steps += steps * r["d"]
    lines = [
        f"# Sparse-noise experiment: {cfg.preset} preset timing",
        "",
        f"Command: `uv run benchmarks/bench_sparse_noise.py --preset {cfg.preset}`",
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
        f"| phi sweep | d = {exp.phi_d}, {exp.phi_points} values of phi |",
        f"| seeds x grid | {exp.n_seeds} x {len(exp.sgd_grid)} (SGD), "
        f"{exp.n_seeds} x {len(exp.sign_grid)} (SignSGD) |",
        f"| optimiser steps summed over the batch | {run_steps:.3e} |",
        f"| throughput (optimiser steps / s, summed over the batch) | {run_steps / wall:.3e} |",
        f"| stored coordinate updates / s | {coord_steps / wall:.3e} |",
        f"| equivalent full-d coordinate updates / s | {full_coord_steps / wall:.3e} |",
        f"| censored (problem, optimiser) pairs | {head['censored_runs']} |",
        "",
        "Fitted slopes (log-log least squares; noise excess = T(sigma) - T(0), with the",
        "bootstrap 95 % interval over seeds):",
        "",
        "| headline | slope | interval | theory |",
        "|---|---:|---:|---:|",
    ]
    for k, v in head.items():
        if "slope" in k and not k.endswith(("/lo", "/hi")):
            pred = predicted(k)
            ival = (f"[{head[k + '/lo']:.2f}, {head[k + '/hi']:.2f}]" if k + "/lo" in head
                    else "")  # fmt: skip
            lines.append(f"| {k} | {v:.3f} | {ival} | {'' if pred is None else f'{pred:g}'} |")
    lines += [
        "",
        f"Problems with d > {exp.full_max_d} are simulated by the exact class reduction "
        f"({2 * exp.levels} stored coordinates standing for all d, see "
        "`geomopt.problems.fixed_curvature_instance`); the last row counts the coordinate "
        "updates of the full d-dimensional runs they stand for.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if cfg.out is not None:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(text)
        print(f"wrote {cfg.out}", file=sys.stderr)


if __name__ == "__main__":
    main(tyro.cli(Config, description=__doc__))
