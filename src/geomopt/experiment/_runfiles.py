"""The files of a run folder: atomic writes, JSON conversion, and reading a run back (these
names are exported by :mod:`geomopt.experiment`).

A run folder (made by :func:`geomopt.experiment.execute`) holds

- ``config.json``   the config and its provenance,
- ``metrics.jsonl`` one JSON object per logged row, appended as the run goes,
- ``summary.json``  written last, with the ``headline``; its presence marks the run finished.

Every JSON file is written atomically (temporary file + ``os.replace``, mode 0644 under a 022
umask) so an interrupted run never leaves a half-written file behind. :func:`read_run` names the
file and line of anything missing or corrupt.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CONFIG_FILE",
    "METRICS_FILE",
    "SUMMARY_FILE",
    "RunExistsError",
    "RunBusyError",
    "atomic_write_bytes",
    "atomic_write_json",
    "load_metrics",
    "read_json",
    "read_run",
    "RunRecord",
    "RunError",
    "to_jsonable",
]

CONFIG_FILE = "config.json"
"""The config and its provenance, written when the run starts."""
METRICS_FILE = "metrics.jsonl"
"""One JSON object per logged row, appended as the run goes."""
SUMMARY_FILE = "summary.json"
"""The headline and details, written last; its presence marks the run finished."""


class RunExistsError(FileExistsError):
    """A complete run folder exists and ``overwrite`` was not requested."""


class RunBusyError(RunExistsError):
    """Another process is writing the same run folder (its lock file is held)."""


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
