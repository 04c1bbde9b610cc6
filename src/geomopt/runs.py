"""Run folders, config capture, JSONL metrics and a progress display.

A run lives in ``<root>/<experiment>/<name>/`` and holds

- ``config.json``   the full (tyro) config that produced it,
- ``metrics.jsonl`` one JSON object per logged step, appended as the run goes,
- ``summary.json``  written last; its presence marks the run as complete.

Every JSON file is written atomically (temporary file + ``os.replace``) so an interrupted run
never leaves a half-written file behind. A complete run is never overwritten unless the caller
passes ``overwrite=True``; an incomplete one (no ``summary.json``) may be resumed or replaced.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "Run",
    "RunExistsError",
    "Progress",
    "atomic_write_bytes",
    "atomic_write_json",
    "load_metrics",
    "load_run",
    "read_run",
    "RunRecord",
    "RunError",
    "to_jsonable",
]

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"


class RunExistsError(FileExistsError):
    """A complete run folder exists and ``overwrite`` was not requested."""


class RunError(ValueError):
    """A run folder is missing, unfinished or holds a corrupt file; the message names it."""


def to_jsonable(obj: Any) -> Any:
    """Convert configs, arrays and scalars into plain JSON values.

    Dataclasses become dicts, enums their value, tuples lists, JAX/NumPy arrays lists or
    Python scalars; non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"`` so the
    files stay valid JSON.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    np = sys.modules.get("numpy")  # only arrays of an imported NumPy can reach here
    if isinstance(obj, bool) or (np is not None and isinstance(obj, np.bool_)):
        return bool(obj)
    if isinstance(obj, int) or (np is not None and isinstance(obj, np.integer)):
        return int(obj)
    if isinstance(obj, float) or (np is not None and isinstance(obj, np.floating)):
        x = float(obj)
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if hasattr(obj, "__array__"):
        import numpy as np

        arr = np.asarray(obj)
        if arr.ndim == 0:
            return to_jsonable(arr.item())
        return [to_jsonable(v) for v in arr.tolist()]
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a crash leaves the old file or the new, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` (converted by :func:`to_jsonable`) as indented JSON, atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n"
    atomic_write_bytes(path, text.encode())


def load_metrics(path: str | os.PathLike, *, repair: bool = False) -> list[dict[str, Any]]:
    """Read a ``metrics.jsonl`` file (or the run folder holding one).

    Every malformed line raises :class:`RunError` naming the file and line. A last line cut
    short by a crash (no final newline) is an error too, unless ``repair`` is set: then it is
    removed from the file (the runner does this when it resumes a run) and a warning says so.
    """
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            last = i == len(lines) - 1  # no newline after it: the write was cut short
            if last and repair:
                good = "\n".join(lines[:i]) + ("\n" if i else "")
                atomic_write_bytes(path, good.encode())
                print(f"warning: {path}: dropped truncated line {i + 1} of an interrupted run",
                      file=sys.stderr)  # fmt: skip
                break
            what = "is truncated (the run was interrupted while writing it)" if last else (
                f"is not valid JSON ({e})")  # fmt: skip
            raise RunError(f"{path}: line {i + 1} {what}") from e
    return rows


def read_json(path: Path) -> Any:
    """Read a JSON file; a missing or corrupt one raises :class:`RunError` naming it."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: corrupt JSON ({e})") from e
    except OSError as e:
        raise RunError(f"{path}: cannot read ({e})") from e


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """A run folder as read back: ``config.json``, ``metrics.jsonl`` and ``summary.json``."""

    path: Path
    config: dict
    metrics: list[dict]
    summary: dict | None

    @property
    def experiment(self) -> str | None:
        return self.config.get("experiment")

    @property
    def preset(self) -> str | None:
        return self.config.get("preset")

    @property
    def config_values(self) -> dict:
        """The experiment's config fields (``config.json["config"]``)."""
        return self.config.get("config", {})

    @property
    def headline(self) -> dict:
        return (self.summary or {}).get("headline", {})

    @property
    def details(self) -> dict:
        return (self.summary or {}).get("details", {})


def read_run(path: str | os.PathLike) -> RunRecord:
    """Read a run folder; every missing or corrupt file raises :class:`RunError` naming it."""
    path = Path(path)
    if not path.is_dir():
        raise RunError(f"{path}: no such run folder")
    if not (path / CONFIG_FILE).exists():
        raise RunError(f"{path}: no {CONFIG_FILE}; not a run folder")
    config = read_json(path / CONFIG_FILE)
    if not isinstance(config, dict):
        raise RunError(f"{path / CONFIG_FILE}: expected a JSON object")
    summary_path = path / SUMMARY_FILE
    summary = read_json(summary_path) if summary_path.exists() else None
    return RunRecord(path, config, load_metrics(path), summary)


def load_run(path: str | os.PathLike) -> tuple[dict, list[dict], dict | None]:
    """Return ``(config, metrics, summary)`` of a run folder; ``summary`` is None if unfinished.

    Superseded by :func:`read_run`; kept while experiments move to :mod:`geomopt.experiment`.
    """
    record = read_run(path)
    return record.config, record.metrics, record.summary


@dataclasses.dataclass
class Run:
    """A run folder. Create with :meth:`Run.create`; log with :meth:`log`; end with :meth:`finish`.

    Example::

        run = Run.create("signsgd", "toy-quick", config)
        run.log(step=10, loss=loss)          # arrays are fetched lazily, at write time
        run.finish({"final_loss": loss})
    """

    path: Path

    @classmethod
    def create(
        cls,
        experiment: str,
        name: str,
        config: Any,
        *,
        root: str | os.PathLike = "results",
        overwrite: bool = False,
        resume: bool = False,
    ) -> Run:
        """Make (or reopen) ``<root>/<experiment>/<name>``.

        Args:
            experiment: experiment family, e.g. ``"signsgd"``.
            name: run name inside the family.
            config: the config object (a dataclass) saved to ``config.json``.
            root: results root folder.
            overwrite: replace an existing run folder, complete or not.
            resume: keep an incomplete run's metrics and append to them.

        Raises:
            RunExistsError: the folder holds a complete run and ``overwrite`` is False.
        """
        for label, value in (("experiment", experiment), ("name", name)):
            if not value or "/" in value or value in (".", ".."):
                raise ValueError(f"run {label} {value!r}: expected a non-empty folder name")
        path = Path(root) / experiment / name
        if path.exists():
            complete = (path / SUMMARY_FILE).exists()
            if overwrite:
                shutil.rmtree(path)
            elif complete:
                raise RunExistsError(
                    f"run folder {path} holds a finished run; pass overwrite=True "
                    "(--overwrite on the command line) to replace it"
                )
            elif not resume:
                (path / METRICS_FILE).unlink(missing_ok=True)
        path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path / CONFIG_FILE, config)
        return cls(path)

    @property
    def is_complete(self) -> bool:
        return (self.path / SUMMARY_FILE).exists()

    def log(self, step: int | None = None, /, **metrics: Any) -> None:
        """Append one JSON line ``{"step": step, **metrics}`` to ``metrics.jsonl``."""
        row = {"step": step} if step is not None else {}
        row.update(metrics)
        self.log_rows([row])

    def log_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append many rows at once (one file open, one flush)."""
        text = "".join(json.dumps(to_jsonable(r)) + "\n" for r in rows)
        with open(self.path / METRICS_FILE, "a") as f:
            f.write(text)
            f.flush()

    def metrics(self) -> list[dict[str, Any]]:
        return load_metrics(self.path)

    def finish(self, summary: Mapping[str, Any]) -> None:
        """Write ``summary.json``; the run is complete from then on."""
        atomic_write_json(self.path / SUMMARY_FILE, dict(summary))


class Progress:
    """A progress display for long loops that never forces a device sync on its own.

    ``update(step, metrics)`` keeps the metrics it is given (possibly unfinished device arrays)
    and only converts them to numbers when it prints, at most every ``min_interval`` seconds, and
    then the metrics of the *previous* printed update, which the device has long finished.
    Printing goes to ``stream`` (stderr by default): one rewritten line on a terminal, plain
    lines otherwise.
    """

    def __init__(
        self,
        total: int,
        desc: str = "",
        *,
        min_interval: float = 2.0,
        stream=None,
        enabled: bool = True,
    ):
        if total < 0:
            raise ValueError(f"Progress total {total}: expected >= 0")
        self.total = total
        self.desc = desc
        self.min_interval = min_interval
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self._start = time.perf_counter()
        self._last_print = -math.inf
        self._pending: tuple[int, Mapping[str, Any]] | None = None
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, step: int, metrics: Mapping[str, Any] | None = None) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self._last_print < self.min_interval:
            if self._pending is None:
                self._pending = (step, metrics or {})
            return
        shown = self._pending if self._pending is not None else (step, metrics or {})
        self._pending = (step, metrics or {})
        self._print(step, shown[1], now)

    def close(self, metrics: Mapping[str, Any] | None = None) -> None:
        if not self.enabled:
            return
        if metrics is None and self._pending is not None:
            metrics = self._pending[1]
        self._print(self.total, metrics or {}, time.perf_counter(), final=True)

    def _print(self, step: int, metrics: Mapping[str, Any], now: float, final: bool = False):
        self._last_print = now
        elapsed = now - self._start
        rate = step / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.desc} {step}/{self.total}", f"{elapsed:6.1f}s", f"{rate:,.1f} it/s"]
        for k, v in metrics.items():
            x = to_jsonable(v)
            parts.append(f"{k}={x:.4g}" if isinstance(x, float) else f"{k}={x}")
        line = "  ".join(parts)
        if self._tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def __iter__(self) -> Iterator[int]:
        for i in range(self.total):
            yield i
            self.update(i + 1)
        self.close()
