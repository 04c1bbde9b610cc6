"""The command lines: one experiment (:func:`main`), a tool (:func:`tool_main`), redrawing
figures (:func:`plot_main`); errors as one line, Ctrl-C handled."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

from geomopt.experiment._execute import _finish_hint, execute, plot_run, report_entry
from geomopt.experiment._folder import _process_index, run_folder, staging_folder
from geomopt.experiment._runfiles import (
    CONFIG_FILE,
    SUMMARY_FILE,
    RunError,
    RunExistsError,
    read_run,
)
from geomopt.experiment._types import DEFAULT_OUT, C, Experiment
from geomopt.interrupts import (
    EXIT_INTERRUPTED,
    exit_interrupted,
    interrupt_guard,
    interrupt_requested,
)
from geomopt.report import render_table


@dataclasses.dataclass(frozen=True)
class RunOptions:
    out: Path = DEFAULT_OUT
    """Results folder; the run goes to <out>/<family>/<experiment>/<name>."""
    name: str | None = None
    """Run folder name (default: the preset's name)."""
    overwrite: bool = False
    """Replace a finished run of the same name (the old one stays until the new one finishes)."""
    plot: bool = True
    """Draw the figures into <out>/figures/<family>/ when the run finishes."""
    debug: bool = False
    """Print the full traceback of an error (also: environment variable GEOMOPT_DEBUG=1)."""


def debug_wanted() -> bool:
    """``GEOMOPT_DEBUG`` is set to something other than 0 or empty (like ``--debug``)."""
    return os.environ.get("GEOMOPT_DEBUG", "0") not in ("", "0")


EXPECTED_ERRORS = (ValueError, OSError, RunExistsError)
"""Errors whose message says what to fix: printed as one line (others add a --debug hint)."""


def report_error(prefix: str, e: BaseException, debug: bool) -> int:
    """Print ``e`` as one line (the traceback only when ``debug``); return exit status 1."""
    if debug:
        import traceback

        traceback.print_exception(e)
    else:
        msg = str(e) or type(e).__name__
        if isinstance(e, OSError) and e.filename is not None and str(e.filename) not in msg:
            msg = f"{e.filename}: {msg}"
        if not isinstance(e, EXPECTED_ERRORS) or type(e) in (OSError, ValueError) and not msg:
            msg = f"{type(e).__name__}: {msg} (run with --debug for the traceback)"
        print(f"{prefix}: error: {msg}", file=sys.stderr)
    return 1


def _preset_help(exp: Experiment, default: str) -> str:
    rows = []
    for p in exp.presets:
        note = exp.notes.get(p, "")
        mark = " (default)" if p == default else ""
        rows.append(f"  {p}{mark}: {note}" if note else f"  {p}{mark}")
    return "\n".join(rows)


def _split_preset(exp: Experiment, argv: list[str], default: str) -> tuple[str, list[str]]:
    if argv and not argv[0].startswith("-"):
        if argv[0] not in exp.presets:
            raise SystemExit(
                f"{exp.name}: unknown preset {argv[0]!r}; expected one of {sorted(exp.presets)}"
            )
        return argv[0], argv[1:]
    return default, argv


def parse(
    exp: Experiment[C],
    argv: Sequence[str] | None = None,
    *,
    default: str = "quick",
    prog: str | None = None,
) -> tuple[str, C, RunOptions]:
    """Parse ``[PRESET] [--field value ...] [runner options]`` without importing JAX."""
    import tyro

    argv = list(sys.argv[1:] if argv is None else argv)
    preset, rest = _split_preset(exp, argv, default)
    cfg_type = exp.config_type

    # name="" drops only the top-level prefix: `--n-seeds 32`, and nested fields keep theirs
    # (`--optim.lr 1e-3`).
    Args = dataclasses.make_dataclass(
        "Args",
        [
            ("config", Annotated[cfg_type, tyro.conf.arg(name="")],
             dataclasses.field(default=exp.presets[preset])),
            ("run", Annotated[RunOptions, tyro.conf.arg(name="")],
             dataclasses.field(default=RunOptions())),
        ],
        frozen=True,
    )  # fmt: skip
    description = (
        f"{exp.name}: {exp.description}\n\n"
        f"{prog or exp.name} [PRESET] [--field value ...]; presets:\n"
        f"{_preset_help(exp, default)}\n\nThe fields below show the {preset!r} preset's values."
    )
    args = tyro.cli(Args, args=rest, description=description, prog=prog)
    return preset, args.config, args.run


def _interrupt_message(exp: Experiment, path: Path, argv: Sequence[str]) -> str:
    """What an interrupted run kept, and the command that continues (the same one, as typed)."""
    cmd = shlex.join(["uv", "run", *argv]) if argv else "the same command"
    stage = staging_folder(path)
    kept = "; the finished run there is unchanged" if (path / SUMMARY_FILE).exists() else ""
    if exp.resumable and stage.exists():
        msg = f"the unfinished run is kept in {stage}{kept}; resume with: {cmd}"
    elif exp.resumable and path.exists() and not (path / SUMMARY_FILE).exists():
        msg = f"the unfinished run is kept in {path}; resume with: {cmd}"
    else:
        msg = f"nothing was written to {path}{kept}; start again with: {cmd}"
    return f"interrupted: {msg}"


def _interrupted(exp: Experiment, path: Path, argv: Sequence[str], cli: bool) -> None:
    """Print :func:`_interrupt_message`; at the command line, then exit at once
    (:func:`geomopt.interrupts.exit_interrupted`)."""
    print(f"\n{_interrupt_message(exp, path, argv)}", file=sys.stderr)
    if cli:
        exit_interrupted()


def main(exp: Experiment, argv: Sequence[str] | None = None, *, default: str = "quick") -> int:
    """The command line of one experiment: parse, run, plot, print the headline numbers.

    Returns the process exit code (0 on success, 1 on a refused or failed run, 130 on Ctrl-C).
    Errors are one line (the traceback with ``--debug``); Ctrl-C stops within seconds (see
    :mod:`geomopt.interrupts`).
    """
    cli = argv is None
    argv_full = list(sys.argv if argv is None else [sys.argv[0], *argv])
    prog = Path(argv_full[0]).name if argv_full else None
    preset, cfg, opts = parse(exp, argv_full[1:], default=default, prog=prog)
    debug = opts.debug or debug_wanted()
    try:
        path = run_folder(exp, opts.out, opts.name or preset)
    except ValueError as e:
        return report_error(exp.name, e, debug)
    with interrupt_guard(message=lambda: _interrupt_message(exp, path, argv_full)):
        try:
            outcome = execute(exp, cfg, preset=preset, out=opts.out, name=opts.name,
                              overwrite=opts.overwrite, argv=argv_full)  # fmt: skip
        except Exception as e:
            if not interrupt_requested():
                return report_error(exp.name, e, debug)
            _interrupted(exp, path, argv_full, cli)  # an error caused by the interrupt
            return EXIT_INTERRUPTED
        except KeyboardInterrupt:
            _interrupted(exp, path, argv_full, cli)
            return EXIT_INTERRUPTED
        figures: list[Path] = []
        status = 0
        if _process_index() != 0:
            return status  # multi-host: process 0 draws and reports
        if opts.plot and exp.plot is not None:
            try:
                figures = plot_run(exp, outcome.path, Path(opts.out) / "figures" / exp.family)
            except KeyboardInterrupt:
                print(f"\ninterrupted while drawing; the run is finished in {outcome.path}",
                      file=sys.stderr)  # fmt: skip
                if cli:
                    exit_interrupted()
                return EXIT_INTERRUPTED
            except Exception as e:
                status = report_error(exp.name, e, debug)
    entry = report_entry(exp, outcome, figures)
    render_table([entry], all_keys=True)
    print(f"run: {outcome.path}")
    for fig in figures:
        print(f"figure: {fig}")
    return status


def tool_main(
    name: str,
    run: Callable[[Any], int | None],
    parse: Callable[[list[str]], Any],
    argv: Sequence[str] | None = None,
) -> int:
    """The command line of a tool that is not an experiment (``sample.py``, ``hellaswag.py``,
    ...): ``parse(argv)`` (tyro prints its own usage errors), then ``run(config)`` with errors
    as one line (the traceback with ``--debug`` or GEOMOPT_DEBUG=1) and Ctrl-C handled."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or debug_wanted()
    cfg = parse([a for a in argv if a != "--debug"])
    with interrupt_guard():
        try:
            return int(run(cfg) or 0)
        except Exception as e:
            if not interrupt_requested():
                return report_error(name, e, debug)
            print(f"\n{name}: interrupted", file=sys.stderr)
        except KeyboardInterrupt:
            print(f"\n{name}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def committed_figures_dir(exp) -> Path:
    """The repository folder of ``exp``'s committed figures (``exp.figures_dir`` under the
    checkout this package runs from: ``src/geomopt/experiment/`` is three levels down)."""
    return Path(__file__).resolve().parents[3] / exp.figures_dir


def plot_main(experiments: Sequence[Experiment], argv: Sequence[str] | None = None) -> int:
    """``plot.py NAME [RUN_DIR ...] [--out DIR] [--preset P] [--update-committed]``.

    Draws figures from saved run folders only. By default they go to ``<out>/figures/<family>``;
    ``--update-committed`` writes into the experiment's committed ``figures_dir`` instead.
    """
    import argparse

    by_name = {e.name: e for e in experiments}
    parser = argparse.ArgumentParser(
        prog="plot.py",
        description="Draw an experiment's figures from its saved run folders.",
        epilog="experiments: " + ", ".join(by_name),
    )
    parser.add_argument("experiment", help="experiment name, e.g. gfm/paths")
    parser.add_argument(
        "runs", nargs="*", type=Path, help="run folders (default: <out>/<experiment>/<preset>)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--preset", default="quick", help="run name to plot by default")
    parser.add_argument(
        "--update-committed",
        action="store_true",
        help="write into the experiment's committed figures folder",
    )
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    args = parser.parse_args(argv)
    if args.experiment not in by_name:
        print(
            f"unknown experiment {args.experiment!r}; known: {', '.join(by_name)}", file=sys.stderr
        )
        return 2
    exp = by_name[args.experiment]
    debug = args.debug or debug_wanted()
    try:
        runs = args.runs or [run_folder(exp, args.out, args.preset)]
    except ValueError as e:
        return report_error(f"plot {exp.name}", e, debug)
    if args.update_committed:
        if exp.figures_dir is None:
            print(f"{exp.name} has no committed figures", file=sys.stderr)
            return 2
        target = committed_figures_dir(exp)
    else:
        target = Path(args.out) / "figures" / exp.family
    status = 0
    for run_dir in runs:
        try:
            if not Path(run_dir).exists():
                raise RunError(_missing_run_hint(exp, Path(run_dir)))
            for fig in plot_run(exp, run_dir, target):
                print(f"figure: {fig}")
        except Exception as e:
            status = report_error(f"plot {exp.name}", e, debug)
    return status


def _missing_run_hint(exp: Experiment, run_dir: Path) -> str:
    """Why ``run_dir`` has nothing to plot, and the command that makes it."""
    stage = staging_folder(run_dir)
    if stage.exists() and (stage / CONFIG_FILE).exists():
        record = read_run(stage)
        return (f"{run_dir}: not finished yet (unfinished run in {stage}); "
                f"{_finish_hint(exp, dataclasses.replace(record, path=run_dir))}")  # fmt: skip
    name = run_dir.name
    args = [name] if name in exp.presets else ["quick", "--name", name]
    if len(run_dir.parents) >= 3:
        args += ["--out", str(run_dir.parents[2])]
    cmd = shlex.join(["uv", "run", f"experiments/{exp.name}.py", *args])
    return f"{run_dir}: no such run folder; make it with: {cmd}"
