"""Executing a run: the run folder (plan, lock, staging, resume, swap-in), ``summary.json``, and
drawing a finished run's figures."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from geomopt.code import code_fingerprint
from geomopt.experiment._folder import (
    _config_diff,
    _finished_problem,
    _headline_from_json,
    _process_index,
    _read_config,
    _run_lock,
    _swap_in,
    _sync_processes,
    check_out_dir,
    check_record,
    run_folder,
    staging_folder,
    stale_reason,
)
from geomopt.experiment._run import Run, provenance
from geomopt.experiment._runfiles import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    RunError,
    RunExistsError,
    RunRecord,
    atomic_write_json,
    load_metrics,
    read_run,
    to_jsonable,
)
from geomopt.experiment._types import DEFAULT_OUT, C, Experiment
from geomopt.report import ReportEntry


@dataclasses.dataclass
class Outcome:
    """What :func:`execute` did: ``status`` is ``"ran"``, ``"resumed"`` or ``"existing"``."""

    experiment: str
    preset: str
    path: Path
    status: str
    seconds: float
    headline: dict[str, float]
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    stale: str = ""
    """Why a finished run there was not reused (``reuse=True``): config or code changed."""


def _check_headline(name: str, headline: Any) -> dict[str, float]:
    if not isinstance(headline, Mapping):
        raise TypeError(f"{name}: run() returned {type(headline).__name__}, expected a mapping")
    out = {}
    for k, v in headline.items():
        if not isinstance(k, str) or not k:
            raise TypeError(f"{name}: headline key {k!r} is not a non-empty string")
        if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}: headline[{k!r}] = {v!r}, expected a number")
        out[k] = v
    return out


@dataclasses.dataclass
class _Plan:
    """Where a run goes, decided before anything is written (so every host decides alike)."""

    work: Path  # the folder the run writes into
    resumed: bool
    fresh: bool  # create ``work`` anew (removing what is there)
    existing: Outcome | None = None
    stale: str = ""  # why the finished run at the final folder is run again


def _plan(exp: Experiment, path: Path, cfg_json: Any, *, preset: str, overwrite: bool,
          reuse: bool, primary: bool) -> _Plan:  # fmt: skip
    stage = staging_folder(path)
    if primary and (stage / SUMMARY_FILE).exists() and _finished_problem(exp, stage) is None:
        _swap_in(stage, path)  # a finished run whose final rename was cut short: complete it
    stale = ""
    if (path / SUMMARY_FILE).exists():
        problem = _finished_problem(exp, path)
        if problem is None and not overwrite:
            if reuse:
                record = read_run(path)
                stale = stale_reason(exp, record, cfg_json)
                if not stale:
                    return _Plan(path, False, False, Outcome(
                        exp.name, preset, path, "existing",
                        float(record.summary.get("seconds", 0.0)),
                        _headline_from_json(record.headline), dict(record.details)))  # fmt: skip
        if problem is None and not overwrite and not stale:
            raise RunExistsError(
                f"{path} holds a finished run; pass --overwrite to replace it (the old run "
                "stays until the new one finishes), or --name NAME to run beside it"
            )
        if problem is not None and not (overwrite or reuse):
            raise RunExistsError(f"{problem}; pass --overwrite to run it again")
    elif path.exists() and not overwrite:
        # an unfinished run in the final folder (written by an older geomopt)
        old = _read_config(path)
        diff = _config_diff(old, cfg_json) if old is not None else []
        if exp.resumable and old is not None and not diff:
            return _Plan(path, True, False)
        if not reuse:
            if diff:
                raise RunExistsError(
                    f"{path} holds an unfinished run started with other settings "
                    f"({', '.join(diff[:6])} differ); pass --overwrite to start it again, or "
                    "--name NAME to run beside it"
                )
            raise RunExistsError(
                f"{path} holds an unfinished run and {exp.name} cannot resume; pass --overwrite "
                "to start it again"
            )
    if stage.exists() and exp.resumable:
        old = _read_config(stage)
        diff = _config_diff(old, cfg_json) if old is not None else ["config"]
        if old is not None and not diff:
            return _Plan(stage, True, False, stale=stale)
        if not overwrite:
            raise RunExistsError(
                f"{stage} holds an unfinished run started with other settings "
                f"({', '.join(diff[:6])} differ); pass --overwrite to discard it and start "
                "again, or --name NAME to run beside it"
            )
    return _Plan(stage, False, True, stale=stale)


def _prepare_folder(exp: Experiment, plan: _Plan, path: Path, preset: str, cfg_json: Any,
                    argv: Sequence[str] | None) -> None:  # fmt: skip
    """Make the planned work folder (process 0): a fresh one gets ``config.json`` with the
    provenance and the code fingerprint; a resumed one has its ``metrics.jsonl`` repaired."""
    work = plan.work
    if plan.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    if plan.resumed:
        load_metrics(work / METRICS_FILE, repair=True)
    else:
        atomic_write_json(work / CONFIG_FILE, {
            "experiment": exp.name,
            "preset": preset,
            "run_name": path.name,
            "config": cfg_json,
            "provenance": provenance(argv),
            "code": code_fingerprint(exp),
        })  # fmt: skip
    (work / METRICS_FILE).touch()


def _write_summary(exp: Experiment, work: Path, path: Path, preset: str,
                   headline: dict[str, float], seconds: float, details: dict) -> None:  # fmt: skip
    """``summary.json``, written last: its presence marks the run finished."""
    atomic_write_json(work / SUMMARY_FILE, {
        "experiment": exp.name,
        "preset": preset,
        "run_name": path.name,
        "headline": headline,
        "seconds": seconds,
        "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "details": details,
    })  # fmt: skip


def execute(
    exp: Experiment[C],
    cfg: C,
    *,
    preset: str,
    out: str | os.PathLike = DEFAULT_OUT,
    name: str | None = None,
    overwrite: bool = False,
    reuse: bool = False,
    argv: Sequence[str] | None = None,
    quiet: bool = False,
) -> Outcome:
    """Run ``exp`` with ``cfg`` in ``<out>/<exp.name>/<name or preset>`` under the runner's rules.

    The run is written into a staging folder beside the final one (:func:`staging_folder`) and
    renamed onto it when it finishes, so a finished run is replaced only by a finished one; a
    lock file refuses a second process writing the same run.

    Args:
        preset: the preset ``cfg`` came from (recorded; also the default run name).
        overwrite: replace a finished run, or restart an unfinished one, of the same name.
        reuse: return a finished run's headline instead of refusing, and rerun an unfinished or
            unreadable one (``reproduce.py`` does this). A finished run is rerun (replaced once
            the new one finishes) when it is stale: its recorded config differs from ``cfg``,
            or the source of a module the experiment uses changed since it ran (the
            ``code`` fingerprint in its ``config.json``, :mod:`geomopt.code`), or it has no
            fingerprint; ``Outcome.stale`` says which.
        argv: the command line recorded in the provenance (``sys.argv`` by default).

    Raises:
        ValueError: the config is invalid (nothing is written).
        RunError: ``out`` is not a writable folder.
        RunExistsError: a finished run is there and neither ``overwrite`` nor ``reuse``; or an
            unfinished one that cannot be resumed, or was started with another config;
            :class:`RunBusyError` if another process is writing it.
    """
    if type(cfg) is not exp.config_type:
        raise TypeError(
            f"{exp.name}: config of type {type(cfg).__name__}, expected {exp.config_type.__name__}"
        )
    if exp.validate is not None:
        exp.validate(cfg)
    out = Path(out)
    path = run_folder(exp, out, name or preset)
    cfg_json = to_jsonable(cfg)
    primary = _process_index() == 0  # in multi-host runs only process 0 touches the folder
    if primary:
        check_out_dir(out)
    with _run_lock(path, primary):
        plan = _plan(exp, path, cfg_json, preset=preset, overwrite=overwrite, reuse=reuse,
                     primary=primary)  # fmt: skip
        if plan.existing is not None:
            return plan.existing
        _sync_processes(f"geomopt run plan {path}")
        work = plan.work
        if primary:
            _prepare_folder(exp, plan, path, preset, cfg_json, argv)
        _sync_processes(f"geomopt run folder {path}")
        run = Run(work, experiment=exp, config=cfg, preset=preset, out=out,
                  resumed=plan.resumed, quiet=quiet or not primary,
                  primary=primary)  # fmt: skip
        status = "resumed" if plan.resumed else "ran"
        t0 = time.perf_counter()
        try:
            headline = _check_headline(exp.name, exp.run(cfg, run))
            seconds = time.perf_counter() - t0
            if primary:
                _write_summary(exp, work, path, preset, headline, seconds, run.details)
        except BaseException:
            if primary and work != path and not exp.resumable:
                shutil.rmtree(work, ignore_errors=True)  # nothing to resume from
            raise
        _sync_processes(f"geomopt run finished {path}")
        if primary and work != path:
            _swap_in(work, path)
    return Outcome(exp.name, preset, path, status, seconds, headline, dict(run.details),
                   stale=plan.stale)  # fmt: skip


def plot_run(exp: Experiment, run_dir: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Draw ``exp``'s figures from one finished run folder into ``out``.

    Raises:
        RunError: the folder is missing, not a run of ``exp``, unfinished, or has missing or
            corrupt content (named in the message); or ``plot`` drew nothing.
    """
    if exp.plot is None:
        return []
    run_dir = Path(run_dir)
    record = read_run(run_dir)
    if record.experiment != exp.name:
        raise RunError(f"{run_dir}: a run of {record.experiment!r}, not of {exp.name!r}")
    if record.summary is None:
        hint = _finish_hint(exp, record)
        raise RunError(f"{run_dir}: unfinished run (no {SUMMARY_FILE}); {hint}")
    check_record(exp, record)
    try:
        figures = [Path(p) for p in exp.plot(run_dir, Path(out))]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        if isinstance(e, RunError):
            raise
        raise RunError(
            f"{run_dir}: cannot draw {exp.name}'s figures from this run "
            f"({type(e).__name__}: {e}); was it made by another version of geomopt?"
        ) from e
    if not figures:
        raise RunError(f"{run_dir}: {exp.name} drew no figure from this run")
    return figures


def rerun_command(exp: Experiment, record: RunRecord, *extra: str) -> str:
    """The command that reruns the run in ``record``: its recorded command line when that was
    the experiment's own script, else the script with the recorded preset, run name and
    ``--out``; ``extra`` options are appended unless already there."""
    argv = [str(a) for a in (record.config.get("provenance") or {}).get("argv") or []]
    script = f"experiments/{exp.name}.py"
    if argv and argv[0].endswith(script):
        args = argv[1:]
    else:
        args = [record.preset or "quick"]
        if record.path.name != record.preset:
            args += ["--name", record.path.name]
        args += ["--out", str(record.path.parents[2])]
    args += [e for e in extra if e not in args]
    return shlex.join(["uv", "run", script, *args])


def _finish_hint(exp: Experiment, record: RunRecord) -> str:
    if exp.resumable:
        return f"resume it with: {rerun_command(exp, record)}"
    cmd = rerun_command(exp, record, "--overwrite")
    return f"{exp.name} cannot resume; run it again with: {cmd}"


def figure_path(run_dir: str | os.PathLike, out: str | os.PathLike, stem: str) -> Path:
    """``<out>/<stem>.png`` for a quick-preset run, ``<out>/<stem>_<run name>.png`` otherwise.

    So figures of the paper preset never replace the committed quick-preset figures.
    """
    run_name = Path(run_dir).name
    suffix = "" if run_name == "quick" else f"_{run_name}"
    return Path(out) / f"{stem}{suffix}.png"


def report_entry(exp: Experiment, outcome: Outcome, figures: Sequence[Path] = ()) -> ReportEntry:
    """The final report's view of one finished run."""
    return ReportEntry(
        name=exp.name,
        preset=outcome.preset,
        status={"existing": "reused"}.get(outcome.status, outcome.status),
        seconds=outcome.seconds,
        headline=outcome.headline,
        key_numbers=exp.key_numbers,
        paper=exp.paper,
        paper_source=exp.paper_source,
        nan_reasons=outcome.details.get("nan_reasons", {}),
        path=outcome.path,
        figures=list(figures),
    )
