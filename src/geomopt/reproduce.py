"""``experiments/reproduce.py``: run one preset of every registered experiment, then plot.

    uv run experiments/reproduce.py smoke           # every smoke preset (CI runs this)
    uv run experiments/reproduce.py --only gfm/paths     # one experiment's quick preset
    uv run experiments/reproduce.py                 # every quick preset (hours on 2 cores)
    uv run experiments/reproduce.py --list

Runs go to ``<out>/<family>/<name>/<preset>/``, figures to ``<out>/figures/<family>/``, and the
report (key numbers beside the paper's, times, links) to ``<out>/summary.md`` / ``summary.json``.
A finished run is reused (not rerun) unless ``--overwrite`` is given or it is stale: its recorded
config differs from the preset's, or the source of a module the experiment uses changed since it
ran (``geomopt.code``); a stale run is run again and the reason printed (and kept in
``summary.json``). An unfinished or unreadable one is run again (a resumable one resumes).
``--only`` takes experiment names or families, matched exactly. A failing experiment is reported
in one line (its traceback saved under ``<out>/errors/``) and the others still run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from geomopt.experiment import (
    DEFAULT_OUT,
    Experiment,
    Outcome,
    OverallProgress,
    RunError,
    atomic_write_bytes,
    atomic_write_json,
    check_out_dir,
    debug_wanted,
    execute,
    plot_run,
    provenance,
    report_entry,
)
from geomopt.interrupts import (
    EXIT_INTERRUPTED,
    exit_interrupted,
    interrupt_guard,
    interrupt_requested,
)
from geomopt.report import ReportEntry, format_seconds, render_markdown, render_table

__all__ = ["reproduce", "main", "select", "Result"]


def select(experiments: Sequence[Experiment], only: Sequence[str]) -> list[Experiment]:
    """Experiments named by ``only``, each an experiment name (``canon/stability``) or a family
    (``canon``) matched exactly (all when empty); an entry that names neither is an error."""
    unknown = [o for o in only if not any(o in (e.name, e.family) for e in experiments)]
    if unknown:
        known = ", ".join(e.name for e in experiments)
        families = ", ".join(dict.fromkeys(e.family for e in experiments))
        raise ValueError(
            f"--only {unknown} matches no experiment or family; experiments: {known}; "
            f"families: {families}"
        )
    return [e for e in experiments if not only or e.name in only or e.family in only]


@dataclasses.dataclass
class Result:
    """One experiment of a reproduction. ``seconds`` is the run's own time (recorded in its
    ``summary.json``; for a reused run, the time it took when it ran); ``wall`` adds plotting."""

    outcome: Outcome | None
    name: str
    status: str
    seconds: float | None
    figures: list[str]
    error: str = ""
    wall: float = 0.0

    @property
    def stale(self) -> str:
        """Why a finished run was run again instead of reused (``""``: it was not)."""
        return self.outcome.stale if self.outcome is not None else ""


def _error_log(out: Path, exp: Experiment, e: BaseException) -> Path | None:
    path = out / "errors" / f"{exp.name.replace('/', '_')}.txt"
    try:
        atomic_write_bytes(path, "".join(traceback.format_exception(e)).encode())
    except OSError:
        return None
    return path


def reproduce(
    experiments: Sequence[Experiment],
    *,
    preset: str,
    out: Path = DEFAULT_OUT,
    overwrite: bool = False,
    keep_going: bool = True,
    argv: Sequence[str] | None = None,
    debug: bool = False,
) -> list[Result]:
    """Run ``preset`` of each experiment (reusing finished runs), plot it, write the summary.

    Ctrl-C stops at once: the summary of what finished is written, then ``KeyboardInterrupt``
    propagates.
    """
    out = check_out_dir(out)
    results: list[Result] = []
    t_start = time.perf_counter()
    overall = OverallProgress([e.seconds.get(preset) for e in experiments],
                              desc=f"reproduce {preset}")  # fmt: skip
    try:
        with overall:
            for i, exp in enumerate(experiments):
                overall.start(i, exp.name)
                results.append(_one(exp, preset, out, overwrite, argv, debug, keep_going))
                r = results[-1]
                overall.finish(r.seconds, ran=r.status in ("ran", "resumed"))
                if r.stale:
                    overall.bar.write(f"{exp.name}: ran again: {r.stale}", file=sys.stderr)
                if r.status == "FAILED":
                    overall.bar.write(f"{exp.name}: FAILED: {r.error}", file=sys.stderr)
    finally:
        _write_summary(results, experiments, preset, out, time.perf_counter() - t_start)
    return results


def _one(exp, preset, out, overwrite, argv, debug, keep_going) -> Result:
    t0 = time.perf_counter()
    try:
        outcome = execute(exp, exp.preset(preset), preset=preset, out=out, overwrite=overwrite,
                          reuse=True, argv=argv)  # fmt: skip
        figs = [str(p) for p in plot_run(exp, outcome.path, out / "figures" / exp.family)]
    except KeyboardInterrupt:
        raise
    except Exception as e:
        if interrupt_requested():  # an error caused by the interrupt (e.g. a cut import)
            raise KeyboardInterrupt from e
        if not keep_going:
            raise
        log = _error_log(out, exp, e)
        if debug:
            traceback.print_exception(e)
        where = f" (traceback: {log})" if log is not None and not _expected(e) else ""
        return Result(None, exp.name, "FAILED", None, [], f"{_one_line(e)}{where}",
                      time.perf_counter() - t0)  # fmt: skip
    return Result(outcome, exp.name, outcome.status, outcome.seconds, figs, "",
                  time.perf_counter() - t0)  # fmt: skip


def _expected(e: BaseException) -> bool:
    from geomopt.experiment import EXPECTED_ERRORS

    return isinstance(e, EXPECTED_ERRORS)


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg if _expected(e) else f"{type(e).__name__}: {msg}"


def _entries(results: Sequence[Result], experiments: Sequence[Experiment]) -> list[ReportEntry]:
    by_name = {e.name: e for e in experiments}
    entries = []
    for r in results:
        exp = by_name[r.name]
        if r.outcome is not None:
            entries.append(report_entry(exp, r.outcome, [Path(f) for f in r.figures]))
        else:
            entries.append(ReportEntry(exp.name, "", r.status, None, error=r.error))
    return entries


def _write_summary(results, experiments, preset, out: Path, total: float) -> None:
    entries = _entries(results, experiments)
    for e in entries:
        e.preset = e.preset or preset
    commit = provenance_commit()
    try:
        atomic_write_json(out / "summary.json", {
            "preset": preset,
            "commit": commit,
            "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "seconds": total,
            "results": [
                {"experiment": r.name, "status": r.status, "seconds": r.seconds,
                 "figures": r.figures, "error": r.error, "stale": r.stale,
                 "run": str(r.outcome.path) if r.outcome else None,
                 "headline": r.outcome.headline if r.outcome else {}}
                for r in results
            ],
        })  # fmt: skip
        text = render_markdown(entries, preset=preset, root=out, commit=commit,
                               total_seconds=total)  # fmt: skip
        atomic_write_bytes(out / "summary.md", text.encode())
    except OSError as e:
        print(f"reproduce: error: cannot write the summary into {out} ({e})", file=sys.stderr)


def provenance_commit() -> str | None:
    """The git commit (with ``+dirty`` when tracked files changed) of this checkout."""
    p = provenance([])
    commit = p.get("git_commit")
    if commit and p.get("git_dirty"):
        commit += "+dirty"
    return commit


RUNTIMES = ("Measured on a quiet 2-core CPU: the smoke set in about 3 minutes; the quick set takes "
            "hours, so use --only to reproduce one figure.")  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    """The command line of ``reproduce.py``."""
    parser = argparse.ArgumentParser(
        prog="reproduce.py",
        description="Run one preset of every experiment (or those chosen with --only), draw "
        "their figures and write a report beside the paper's numbers to <out>/summary.md. "
        + RUNTIMES,
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
        help="run (or --list) only these experiments (canon/stability) or "
        "families (canon), matched exactly",
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
    parser.add_argument(
        "--stop-on-error", action="store_true", help="stop at the first failing experiment"
    )
    parser.add_argument("--debug", action="store_true",
                        help="print tracebacks (also: GEOMOPT_DEBUG=1)")  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from geomopt.registry import load_all

    cli = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    debug = args.debug or debug_wanted()
    experiments = load_all()
    try:
        chosen = select(experiments, args.only)
    except ValueError as e:
        print(f"reproduce: error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for e in chosen:
            times = ", ".join(f"{p} {format_seconds(s)}" for p, s in e.seconds.items())
            print(f"{e.name:24s} {', '.join(e.presets):26s} {e.description}"
                  + (f" [{times}]" if times else ""))  # fmt: skip
        return 0
    missing = [e.name for e in chosen if args.preset not in e.presets]
    if missing:
        print(f"reproduce: error: preset {args.preset!r} missing in {missing}", file=sys.stderr)
        return 2
    try:
        check_out_dir(args.out)
    except RunError as e:
        print(f"reproduce: error: {e}", file=sys.stderr)
        return 2
    full_argv = ["experiments/reproduce.py", *argv]
    hint = ("interrupted; finished runs are kept and reused: continue with: "
            f"{shlex.join(['uv', 'run', *full_argv])}")  # fmt: skip
    with interrupt_guard(message=lambda: hint):
        try:
            results = reproduce(chosen, preset=args.preset, out=args.out,
                                overwrite=args.overwrite, keep_going=not args.stop_on_error,
                                argv=full_argv, debug=debug)  # fmt: skip
        except KeyboardInterrupt:
            print(f"\n{hint}", file=sys.stderr)
            if cli:
                exit_interrupted()
            return EXIT_INTERRUPTED
        except Exception as e:  # only with --stop-on-error
            from geomopt.experiment import report_error

            return report_error("reproduce", e, debug)
    print()
    render_table(_entries(results, chosen), title=f"geomopt reproduction, {args.preset} preset")
    failed = [r for r in results if r.status == "FAILED"]
    for r in failed:
        print(f"FAILED {r.name}: {r.error}")
    print(f"\nsummary: {args.out / 'summary.md'}   figures: {args.out / 'figures'}")
    return 1 if failed else 0
