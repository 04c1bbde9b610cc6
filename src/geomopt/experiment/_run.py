"""The handle a running experiment writes through (:class:`Run`), and the provenance recorded
with its config."""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from geomopt.experiment._progress import Progress, _tqdm
from geomopt.experiment._runfiles import (
    METRICS_FILE,
    atomic_write_json,
    load_metrics,
    to_jsonable,
)
from geomopt.experiment._types import PACKAGES, Experiment
from geomopt.interrupts import (
    check_interrupt,
)


class Run:
    """What an experiment's ``run`` function gets: its folder, logging, progress and caches."""

    def __init__(
        self,
        path: Path,
        *,
        experiment: Experiment,
        config: Any,
        preset: str,
        out: Path,
        resumed: bool,
        quiet: bool = False,
        primary: bool = True,
    ):
        self.path = path
        self.primary = primary
        """False on the other hosts of a multi-host run: they log and save nothing."""
        self.experiment = experiment
        self.config = config
        self.preset = preset
        self.out = out
        self.resumed = resumed
        self.quiet = quiet
        self.details: dict[str, Any] = {}
        """Extra content for ``summary.json`` (under ``details``), beside the headline."""

    # -- logging -------------------------------------------------------------------------------
    def log(self, step: int | None = None, /, **metrics: Any) -> None:
        """Append one row ``{"step": step, **metrics}`` to ``metrics.jsonl``."""
        row = {"step": step} if step is not None else {}
        row.update(metrics)
        self.log_rows([row])

    def log_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append many rows at once (one open, one flush)."""
        check_interrupt()
        text = "".join(json.dumps(to_jsonable(r)) + "\n" for r in rows)
        if not text or not self.primary:
            return
        with open(self.path / METRICS_FILE, "a") as f:
            f.write(text)
            f.flush()

    def explain_nan(self, key: str, reason: str) -> None:
        """Say why headline ``key`` is NaN (e.g. "one d: no slope to fit"); the final table
        and ``summary.md`` print the reason instead of a bare ``nan``."""
        self.details.setdefault("nan_reasons", {})[key] = reason

    def metrics(self) -> list[dict[str, Any]]:
        """The rows logged so far (on resume: those of the interrupted run)."""
        return load_metrics(self.path / METRICS_FILE)

    # -- console -------------------------------------------------------------------------------
    def progress(
        self,
        iterable: Iterable | None = None,
        *,
        total: int | None = None,
        desc: str = "",
        warmup: int = 1,
        unit: str = "it",
    ):
        """A :class:`Progress` bar; with ``iterable``, an iterator over it that updates the bar."""
        if iterable is not None and total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        bar = Progress(total, desc, warmup=warmup, unit=unit, enabled=not self.quiet)
        return bar.wrap(iterable) if iterable is not None else bar

    def print(self, msg: str) -> None:
        """Print a line without breaking an active progress bar."""
        if not self.quiet:
            _tqdm().write(msg, file=sys.stderr)

    # -- files ---------------------------------------------------------------------------------
    def file(self, name: str) -> Path:
        """A path inside the run folder (the caller writes it, atomically where it matters)."""
        return self.path / name

    def save_arrays(self, name: str, **arrays: Any) -> Path:
        """Save arrays as one ``.npz`` atomically (read back with ``numpy.load``)."""
        import io

        import numpy as np

        from geomopt.experiment._runfiles import atomic_write_bytes

        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
        path = self.path / name
        if self.primary:
            atomic_write_bytes(path, buf.getvalue())
        return path

    def cache_dir(self, kind: str, key: Any) -> Path:
        """A folder under ``<out>/_cache/<kind>/`` keyed by ``key`` (e.g. a training config).

        Runs with equal keys share it, so a model trained by one run is reused by the next.
        ``key.json`` inside records the key.
        """
        text = json.dumps(to_jsonable(key), sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = self.out / "_cache" / kind / digest
        path.mkdir(parents=True, exist_ok=True)
        if not (path / "key.json").exists():
            atomic_write_json(path / "key.json", json.loads(text))
        return path


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Where a run came from: git commit and dirty flag, versions, devices, command, time."""
    root = Path(__file__).resolve().parents[3]
    commit = _git(root, "rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        dirty = bool(status) if status is not None else None
    versions = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    try:
        import jax

        devices = [str(d) for d in jax.devices()]
        backend = jax.default_backend()
    except Exception as e:  # a run without a working JAX still records why
        devices, backend = [f"unavailable: {e}"], None
    argv = list(sys.argv if argv is None else argv)
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": versions,
        "backend": backend,
        "devices": devices,
        "command": shlex.join(argv),
        "cwd": os.getcwd(),
        "host": platform.node(),
        "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
