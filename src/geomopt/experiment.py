"""One experiment type and one runner for every experiment of geomopt.

An experiment is a value of :class:`Experiment`: a name, frozen-dataclass presets (``smoke``,
``quick``, ``paper`` ...), ``run(cfg, run) -> headline`` and ``plot(run_dir, out) -> figures``.
Each lives in one file next to the code it drives (``geomopt/<family>/exp_<name>.py``), and
:data:`geomopt.registry.EXPERIMENTS` lists them all.

The runner (:func:`execute`) owns the run folder ``<out>/<family>/<name>/<run name>/``:

- the folder is created only after the config validated;
- ``config.json`` holds the config and its provenance (git commit and dirty flag, package
  versions, devices, command line, start time);
- ``metrics.jsonl`` gets one JSON object per :meth:`Run.log`;
- ``summary.json`` is written last, with a flat ``headline`` object (name -> number); its
  presence marks the run finished;
- a finished run is never replaced without ``overwrite``; an unfinished one is resumed when the
  experiment supports it (``resumable=True``) and otherwise refused with a message saying what
  to do;
- every file is written atomically with normal permissions (0644 under a 022 umask);
- the headline numbers are printed as a table at the end.

Entry points are ``main(EXPERIMENT)`` (see :func:`main`): ``[PRESET] [--field value ...]
[--out DIR] [--name NAME] [--overwrite] [--no-plot]``. This module imports JAX only once a run
starts, so ``--help`` answers without it; experiment files follow the same rule (JAX-using code
is imported inside ``run`` / ``plot``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

from geomopt.checks import check_ints, check_positive
from geomopt.code import changed_modules, code_fingerprint
from geomopt.interrupts import (
    EXIT_INTERRUPTED,
    check_interrupt,
    exit_interrupted,
    interrupt_guard,
    interrupt_requested,
)
from geomopt.report import ReportEntry, render_table
from geomopt.runs import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    RunBusyError,
    RunError,
    RunExistsError,
    RunRecord,
    atomic_write_json,
    load_metrics,
    read_json,
    read_run,
    to_jsonable,
)

__all__ = [
    "Experiment",
    "Run",
    "Progress",
    "Outcome",
    "execute",
    "plot_run",
    "main",
    "plot_main",
    "tool_main",
    "OverallProgress",
    "provenance",
    "RESERVED_FIELDS",
    "check_ints",
    "check_positive",
    "figure_path",
    "stale_reason",
]

C = TypeVar("C")

RESERVED_FIELDS = frozenset({"out", "name", "overwrite", "plot", "debug"})
"""Command-line options of the runner; a config may not have fields with these names."""

DEFAULT_OUT = Path("results")
REQUIRED_PRESETS = ("smoke", "quick")
PACKAGES = ("jax", "jaxlib", "optax", "flax", "equinox", "diffrax", "optimistix", "numpy", "tyro")


@dataclasses.dataclass(frozen=True)
class Experiment(Generic[C]):
    """One reproducible experiment.

    Attributes:
        name: ``"<family>/<name>"``, e.g. ``"gfm/paths"``; runs go to ``<out>/<name>/<run>``.
        description: one line saying what it shows.
        presets: frozen dataclass configs by preset name; ``smoke`` (seconds on a CPU) and
            ``quick`` (the CPU default) are required, ``paper`` holds the paper's settings.
        run: ``run(cfg, run) -> headline``; logs through ``run`` and returns the flat mapping
            of the numbers the READMEs quote (name -> number).
        plot: ``plot(run_dir, out) -> figures``; reads only the run folder, writes figures into
            ``out`` and returns their paths. ``None`` for experiments without figures.
        notes: a one-line description per preset for ``--help``.
        validate: optional ``validate(cfg)`` raising ``ValueError`` naming a bad field; called
            before the run folder is created.
        resumable: ``run`` continues an unfinished run (``run.resumed`` tells it so).
        figures_dir: repository folder of the committed figures (``experiments/<family>/
            figures``), written by ``plot`` only with ``--update-committed``.
        key_numbers: the few headline keys the final table shows (all headline keys stay in
            ``summary.json``); empty: the first four.
        paper: headline key -> the paper's (or its theory's) value, shown beside ours in the
            final table; ``paper_source`` says where it comes from (figure, table, theorem).
        seconds: preset -> measured runtime in seconds on a quiet 2-core CPU;
            ``reproduce.py`` uses it for its overall ETA.
    """

    name: str
    description: str
    presets: Mapping[str, C]
    run: Callable[[C, Run], Mapping[str, float]]
    plot: Callable[[Path, Path], Sequence[Path]] | None = None
    notes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    validate: Callable[[C], None] | None = None
    resumable: bool = False
    figures_dir: str | None = None
    key_numbers: tuple[str, ...] = ()
    paper: Mapping[str, float] = dataclasses.field(default_factory=dict)
    paper_source: str = ""
    seconds: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        parts = self.name.split("/")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"experiment name {self.name!r}: expected '<family>/<name>'")
        missing = [p for p in REQUIRED_PRESETS if p not in self.presets]
        if missing:
            raise ValueError(f"experiment {self.name}: presets {missing} missing")
        types = {type(c) for c in self.presets.values()}
        if len(types) != 1:
            raise TypeError(f"experiment {self.name}: presets of several types {types}")
        (cls,) = types
        if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):
            raise TypeError(f"experiment {self.name}: presets must be frozen dataclasses")
        clash = RESERVED_FIELDS & {f.name for f in dataclasses.fields(cls)}
        if clash:
            raise TypeError(
                f"experiment {self.name}: config fields {sorted(clash)} clash with runner options"
            )

    @property
    def family(self) -> str:
        return self.name.split("/")[0]

    @property
    def config_type(self) -> type:
        return type(self.presets["quick"])

    def preset(self, name: str) -> C:
        if name not in self.presets:
            raise ValueError(
                f"{self.name}: unknown preset {name!r}; expected one of {sorted(self.presets)}"
            )
        return self.presets[name]


# ---------------------------------------------------------------------------------------------
# Progress


def _tqdm():
    from tqdm.auto import tqdm

    return tqdm


def _with_compiling(desc: str) -> str:
    return f"{desc} (compiling)" if desc else "compiling"


class Progress:
    """A tqdm progress bar whose rate and ETA exclude the first ``warmup`` updates.

    The first update of a jitted loop includes XLA compilation; until it arrives the bar says
    "compiling", and afterwards the rate and ETA are measured from that point on. ``update``
    takes ``n`` and optional numbers shown after the bar (pass host numbers, not device arrays,
    to avoid a sync). Writes to stderr; on a terminal it redraws in place, elsewhere it prints a
    line every few seconds.
    """

    def __init__(
        self,
        total: int | None = None,
        desc: str = "",
        *,
        warmup: int = 1,
        unit: str = "it",
        enabled: bool = True,
        leave: bool = True,
    ):
        tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.desc = desc
        self._warm = warmup
        if _overall and _overall[-1].tty:
            leave = None  # under reproduce's bar: vanish when done
        self.bar = _tqdm()(
            total=total,
            desc=_with_compiling(desc) if warmup > 0 else desc,
            unit=unit,
            file=sys.stderr,
            dynamic_ncols=True,
            mininterval=0.2 if tty else 5.0,
            disable=not enabled,
            leave=leave,
        )

    def update(self, n: int = 1, **postfix: Any) -> None:
        check_interrupt()
        bar = self.bar
        if bar.disable:
            return
        if postfix:
            bar.set_postfix(
                {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in postfix.items()},
                refresh=False,
            )
        if 0 < self._warm <= n:
            # Compilation is behind us: count these steps without timing them, then measure the
            # rate and ETA from here on (tqdm's smoothed rate would otherwise remember them).
            self._warm = 0
            done = bar.n + n
            bar.reset(total=bar.total)  # restarts the clock and the smoothed rate
            bar.n = bar.initial = bar.last_print_n = done
            bar.set_description(self.desc)
        else:
            self._warm = max(0, self._warm - n)
            bar.update(n)
        _tick_overall()

    def set_description(self, desc: str) -> None:
        self.desc = desc
        if self._warm <= 0:
            self.bar.set_description(desc, refresh=False)
        else:
            self.bar.set_description(_with_compiling(desc), refresh=False)

    def write(self, msg: str) -> None:
        self.bar.write(msg, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wrap(self, iterable: Iterable) -> Iterator:
        try:
            for item in iterable:
                yield item
                self.update(1)
        finally:
            self.close()


class OverallProgress:
    """``reproduce.py``'s bar above each experiment's own: experiment i of N, elapsed time, and
    an ETA from the experiments' measured runtimes (``Experiment.seconds``), rescaled by how
    fast this machine ran the experiments finished so far (reused runs do not count).

    On a terminal it is a tqdm bar at the top (the experiments' bars appear under it and vanish
    when done); elsewhere (CI logs) one line per experiment.
    """

    DEFAULT_ESTIMATE = 60.0
    """Seconds assumed for an experiment with no measured runtime for the preset."""

    def __init__(self, estimates: Sequence[float | None], *, desc: str, enabled: bool = True):
        self.estimates = [float(e) if e else self.DEFAULT_ESTIMATE for e in estimates]
        self.unknown = sum(not e for e in estimates)
        self.tty = enabled and bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.enabled = enabled
        self.desc = desc
        self.t0 = self.t_exp = time.monotonic()
        self.i = 0
        self.done: list[tuple[float, float]] = []  # (estimate, seconds) of runs made here
        self._last = 0.0
        self.bar = _tqdm()(
            total=len(self.estimates), desc=desc, position=0, leave=True, file=sys.stderr,
            dynamic_ncols=True, disable=not self.tty,
            bar_format="{desc} {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}",
        )  # fmt: skip

    def scale(self) -> float:
        """Measured / estimated time of the experiments run so far, within [1/4, 4]."""
        if not self.done:
            return 1.0
        ratio = sum(s for _, s in self.done) / sum(e for e, _ in self.done)
        return min(max(ratio, 0.25), 4.0)

    def eta(self) -> float:
        """Seconds left: the current experiment's estimate minus its elapsed time, plus the
        estimates of those after it, all rescaled."""
        if self.i >= len(self.estimates):
            return 0.0
        k = self.scale()
        current = max(k * self.estimates[self.i] - (time.monotonic() - self.t_exp), 0.0)
        return current + k * sum(self.estimates[self.i + 1 :])

    def _eta_text(self) -> str:
        from geomopt.report import format_seconds

        more = f" + {self.unknown} unmeasured" if self.unknown else ""
        return f"ETA ~{format_seconds(self.eta())}{more}"

    def start(self, i: int, name: str) -> None:
        self.i, self.t_exp = i, time.monotonic()
        label = f"[{i + 1}/{len(self.estimates)}] {name}"
        if self.tty:
            self.bar.set_description(f"{self.desc}: {name}", refresh=False)
            self.bar.set_postfix_str(self._eta_text())
        elif self.enabled:
            from geomopt.report import format_seconds

            elapsed = format_seconds(time.monotonic() - self.t0)
            print(f"{label}: elapsed {elapsed}, {self._eta_text()}", file=sys.stderr, flush=True)

    def finish(self, seconds: float | None, *, ran: bool) -> None:
        if ran and seconds:
            self.done.append((self.estimates[self.i], float(seconds)))
        self.i += 1
        self.t_exp = time.monotonic()
        if self.tty:
            self.bar.set_postfix_str(self._eta_text(), refresh=False)
            self.bar.update(1)

    def tick(self) -> None:
        now = time.monotonic()
        if self.tty and now - self._last > 1.0:
            self._last = now
            self.bar.set_postfix_str(self._eta_text())

    def __enter__(self) -> OverallProgress:
        _overall.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _overall.remove(self)
        self.bar.close()


_overall: list[OverallProgress] = []


def _tick_overall() -> None:
    if _overall:
        _overall[-1].tick()


# ---------------------------------------------------------------------------------------------
# The run handle


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

        from geomopt.runs import atomic_write_bytes

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


# ---------------------------------------------------------------------------------------------
# Provenance


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
    root = Path(__file__).resolve().parents[2]
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


# ---------------------------------------------------------------------------------------------
# Executing a run


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
                atomic_write_json(work / SUMMARY_FILE, {
                    "experiment": exp.name,
                    "preset": preset,
                    "run_name": path.name,
                    "headline": headline,
                    "seconds": seconds,
                    "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                    "details": run.details,
                })  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
# Command lines


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
        target = Path(__file__).resolve().parents[2] / exp.figures_dir
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
