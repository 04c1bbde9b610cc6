"""The run folder's bookkeeping: where a run lives (final and staging folders), the lock that
keeps two processes out of one folder, what makes a finished run valid or stale, the swap of a
finished run into place, and the multi-host rule that only process 0 touches the folder."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geomopt.code import changed_modules
from geomopt.experiment._runfiles import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    RunBusyError,
    RunError,
    RunRecord,
    read_json,
    read_run,
)
from geomopt.experiment._types import Experiment


def _config_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in _config_diff(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]


def _process_index() -> int:
    """JAX's process index where JAX is already in use (multi-host runs), else 0."""
    jax = sys.modules.get("jax")
    return int(jax.process_index()) if jax is not None else 0


def _sync_processes(tag: str) -> None:
    """A barrier across hosts in a multi-process JAX run (nothing to do in one process)."""
    jax = sys.modules.get("jax")
    if jax is not None and jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(tag)


def run_folder(exp: Experiment, out: Path, name: str) -> Path:
    if not name or "/" in name or name in (".", "..") or name.startswith("."):
        raise ValueError(f"run name {name!r}: expected a folder name not starting with '.'")
    return Path(out) / exp.name / name


def staging_folder(path: Path) -> Path:
    """Where a run is written until it finishes: ``<parent>/.<name>.partial`` beside ``path``.

    A finished run is renamed onto ``path`` (replacing the old run only then), so an interrupted
    or failed run never touches what ``path`` held. An unfinished run of a resumable experiment
    stays here and is resumed by the same command; other unfinished runs are removed.
    """
    return path.parent / f".{path.name}.partial"


def check_out_dir(out: str | os.PathLike) -> Path:
    """Create ``out`` if needed and check that runs can be written there.

    Raises:
        RunError: one line naming ``--out`` and what is wrong (a file, not creatable, read-only).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out}: is a file, expected a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(
            f"--out {out}: cannot create this folder ({e.strerror or e}); choose a writable one"
        ) from e
    try:
        fd, probe = tempfile.mkstemp(dir=out, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise RunError(
            f"--out {out}: cannot write there ({e.strerror or e}); choose a writable folder"
        ) from e
    return out


@contextlib.contextmanager
def _run_lock(path: Path, enabled: bool):
    """Hold ``<parent>/.<name>.lock`` while a run writes ``path``; a second process is refused.

    An OS file lock (``flock``): it is released when the process ends, however it ends, so a
    crashed run never leaves a stale lock behind. Not available on Windows (no lock there).
    """
    try:
        import fcntl
    except ImportError:
        fcntl = None
    if not enabled or fcntl is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            raise RunBusyError(
                f"{path} is being written by another process ({holder}); wait for it to "
                "finish, or run beside it with --name NAME"
            ) from None
        os.ftruncate(fd, 0)
        stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        os.pwrite(fd, f"pid {os.getpid()} on {platform.node()} since {stamp}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _finished_problem(exp: Experiment, path: Path) -> str | None:
    """Why the finished run at ``path`` cannot be used (``None``: it can)."""
    try:
        record = read_run(path)
        check_record(exp, record)
    except RunError as e:
        return str(e)
    return None


def check_record(exp: Experiment, record: RunRecord) -> None:
    """Check a run folder's content against ``exp``: its experiment, every config field of the
    config type (a run of another geomopt version may lack some), a finished summary with a
    flat numeric headline, and at least one metrics row.

    Raises:
        RunError: naming the file and what is missing.
    """
    path = record.path
    if record.experiment != exp.name:
        raise RunError(f"{path / CONFIG_FILE}: a run of {record.experiment!r}, not of {exp.name!r}")
    missing = _missing_fields(exp.config_type, record.config.get("config"))
    if missing:
        raise RunError(
            f"{path / CONFIG_FILE}: config lacks {', '.join(missing[:6])} (made by another "
            f"version of geomopt)"
        )
    if record.summary is not None:
        headline = record.summary.get("headline") if isinstance(record.summary, dict) else None
        if not isinstance(headline, dict) or not headline:
            raise RunError(f"{path / SUMMARY_FILE}: no headline numbers")
        for k, v in headline.items():
            if isinstance(v, bool) or not (isinstance(v, (int, float)) or v in _NONFINITE):
                raise RunError(f"{path / SUMMARY_FILE}: headline[{k!r}] = {v!r} is not a number")
        if not record.metrics:
            raise RunError(f"{path / METRICS_FILE}: no rows (the run logged nothing)")


_NONFINITE = ("nan", "inf", "-inf")


def _missing_fields(cls: type, values: Any, prefix: str = "") -> list[str]:
    if not isinstance(values, dict):
        return [prefix.rstrip(".") or "config"]
    missing = []
    for f in dataclasses.fields(cls):
        if f.name not in values:
            missing.append(prefix + f.name)
        elif dataclasses.is_dataclass(f.type) and isinstance(f.type, type):
            missing += _missing_fields(f.type, values[f.name], f"{prefix}{f.name}.")
    return missing


def _headline_from_json(headline: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) if isinstance(v, str) else v for k, v in headline.items()}


def _swap_in(stage: Path, path: Path) -> None:
    """Rename the finished run ``stage`` onto ``path``; the old run is removed only after."""
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.replaced-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old)
        os.replace(path, old)
    os.replace(stage, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def stale_reason(exp: Experiment, record: RunRecord, cfg_json: Any) -> str:
    """Why the finished run in ``record`` no longer stands for ``exp`` run with ``cfg_json``
    (``""``: it does): its recorded config differs, it records no code fingerprint, or the
    source of a module the experiment uses changed since (:mod:`geomopt.code`)."""
    diff = _config_diff(record.config.get("config"), cfg_json)
    if diff:
        more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
        return f"its config differs from the requested one ({', '.join(diff[:6])}{more})"
    code = record.config.get("code")
    if not isinstance(code, dict) or not code:
        return "it records no code fingerprint (made by an older geomopt)"
    changed = changed_modules(code, exp)
    if changed:
        more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
        return f"the experiment's code changed since it ran ({', '.join(changed[:6])}{more})"
    return ""


def _read_config(path: Path) -> Any:
    try:
        return read_json(path / CONFIG_FILE).get("config")
    except (RunError, AttributeError):
        return None
