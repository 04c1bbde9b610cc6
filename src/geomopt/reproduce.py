"""``experiments/reproduce.py``: run one preset of every registered experiment, then plot.

    uv run experiments/reproduce.py                 # every quick preset
    uv run experiments/reproduce.py smoke           # every smoke preset (CI runs this)
    uv run experiments/reproduce.py paper --only gfm/paths
    uv run experiments/reproduce.py --list

Runs go to ``<out>/<family>/<name>/<preset>/``, figures to ``<out>/figures/<family>/``, and the
table of outcomes and headline numbers to ``<out>/summary.md`` / ``summary.json``. A finished
run is reused (not rerun) unless ``--overwrite`` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from geomopt.experiment import DEFAULT_OUT, Experiment, Outcome, execute, headline_table, plot_run
from geomopt.runs import atomic_write_bytes, atomic_write_json

__all__ = ["reproduce", "main", "select"]


def select(experiments: Sequence[Experiment], only: Sequence[str]) -> list[Experiment]:
    """Experiments whose name equals or starts with one of ``only`` (all when empty)."""
    chosen = [e for e in experiments if not only or any(e.name.startswith(o) for o in only)]
    if only and not chosen:
        known = ", ".join(e.name for e in experiments)
        raise ValueError(f"--only {list(only)} matches no experiment; known: {known}")
    return chosen


@dataclasses.dataclass
class Result:
    outcome: Outcome | None
    name: str
    status: str
    seconds: float
    figures: list[str]
    error: str = ""


def reproduce(
    experiments: Sequence[Experiment],
    *,
    preset: str,
    out: Path = DEFAULT_OUT,
    overwrite: bool = False,
    keep_going: bool = True,
    argv: Sequence[str] | None = None,
) -> list[Result]:
    """Run ``preset`` of each experiment (reusing finished runs), plot it, write the summary."""
    out = Path(out)
    results = []
    for i, exp in enumerate(experiments):
        print(f"[{i + 1}/{len(experiments)}] {exp.name} ({preset}): {exp.description}",
              file=sys.stderr, flush=True)  # fmt: skip
        t0 = time.perf_counter()
        try:
            outcome = execute(exp, exp.preset(preset), preset=preset, out=out,
                              overwrite=overwrite, reuse=True, argv=argv)  # fmt: skip
            figs = [str(p) for p in plot_run(exp, outcome.path, out / "figures" / exp.family)]
            results.append(Result(outcome, exp.name, outcome.status, time.perf_counter() - t0,
                                  figs))  # fmt: skip
        except KeyboardInterrupt:
            raise
        except Exception as e:
            if not keep_going:
                raise
            err = traceback.format_exc()
            print(err, file=sys.stderr)
            results.append(Result(None, exp.name, "FAILED", time.perf_counter() - t0, [],
                                  f"{type(e).__name__}: {e}"))  # fmt: skip
        r = results[-1]
        print(f"[{i + 1}/{len(experiments)}] {exp.name}: {r.status} in {r.seconds:.1f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    atomic_write_json(out / "summary.json", {
        "preset": preset,
        "results": [
            {"experiment": r.name, "status": r.status, "seconds": r.seconds,
             "figures": r.figures, "error": r.error,
             "run": str(r.outcome.path) if r.outcome else None,
             "headline": r.outcome.headline if r.outcome else {}}
            for r in results
        ],
    })  # fmt: skip
    atomic_write_bytes(out / "summary.md", format_markdown(results, preset).encode())
    return results


def format_markdown(results: Sequence[Result], preset: str) -> str:
    lines = [
        f"# geomopt reproduction ({preset} preset)",
        "",
        "| experiment | status | runtime (s) | headline | figures |",
        "|---|---|---:|---|---|",
    ]
    for r in results:
        head = r.outcome.headline if r.outcome else {}
        hl = "<br>".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                         for k, v in head.items()) or "-"  # fmt: skip
        figs = "<br>".join(r.figures) or "-"
        status = r.status if not r.error else f"{r.status}: {r.error.splitlines()[0]}"
        lines.append(f"| {r.name} | {status} | {r.seconds:.1f} | {hl} | {figs} |")
    lines += ["", f"Total: {sum(r.seconds for r in results):.1f} s"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from geomopt.registry import load_all

    parser = argparse.ArgumentParser(
        prog="reproduce.py",
        description=__doc__.split("\n\n")[0] + " Measured on a quiet 2-core machine: the smoke "
        "set about 220 s; the quick set takes hours there (see README.md), so use --only to "
        "reproduce one figure.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "preset",
        nargs="?",
        default="quick",
        help="preset to run for every experiment: smoke, quick (default), paper",
    )
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument(
        "--only",
        nargs="+",
        default=(),
        metavar="NAME",
        help="run only experiments whose name starts with one of these",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="folder for runs, figures and the summary (default: results)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="rerun experiments whose run folder is already finished",
    )
    parser.add_argument("--stop-on-error", action="store_true",
                        help="stop at the first failing experiment")  # fmt: skip
    args = parser.parse_args(argv)
    experiments = load_all()
    if args.list:
        for e in experiments:
            print(f"{e.name:28s} {', '.join(e.presets):28s} {e.description}")
        return 0
    try:
        chosen = select(experiments, args.only)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    missing = [e.name for e in chosen if args.preset not in e.presets]
    if missing:
        print(f"preset {args.preset!r} missing in {missing}", file=sys.stderr)
        return 2
    full_argv = ["experiments/reproduce.py", *(sys.argv[1:] if argv is None else argv)]
    try:
        results = reproduce(chosen, preset=args.preset, out=args.out, overwrite=args.overwrite,
                            keep_going=not args.stop_on_error, argv=full_argv)  # fmt: skip
    except KeyboardInterrupt:
        print("\ninterrupted; run the same command again to continue (finished runs are reused)",
              file=sys.stderr)  # fmt: skip
        return 130
    print()
    print(headline_table([r.outcome for r in results if r.outcome is not None]))
    for r in results:
        if r.status == "FAILED":
            print(f"FAILED {r.name}: {r.error}")
    print(f"\nsummary: {args.out / 'summary.md'}   figures: {args.out / 'figures'}")
    return 0 if all(r.status != "FAILED" for r in results) else 1
