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

import dataclasses
import datetime as _dt
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

from geomopt.runs import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    RunError,
    RunExistsError,
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
    "headline_table",
    "provenance",
    "RESERVED_FIELDS",
    "check_ints",
    "check_positive",
]

C = TypeVar("C")

RESERVED_FIELDS = frozenset({"out", "name", "overwrite", "plot"})
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


def check_ints(cfg: Any, *names: str, minimum: int = 1) -> None:
    """Raise ``ValueError`` naming the field unless each field (or tuple entry) is an int >= min."""
    for n in names:
        v = getattr(cfg, n)
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
                raise ValueError(f"{n}={v!r}: expected integers >= {minimum}")


def check_positive(cfg: Any, *names: str) -> None:
    """Raise ``ValueError`` naming the field unless each value (or tuple entry) is finite > 0."""
    for n in names:
        v = getattr(cfg, n)
        for x in v if isinstance(v, tuple) else (v,):
            ok = isinstance(x, (int, float)) and not isinstance(x, bool)
            if not (ok and math.isfinite(x) and x > 0):
                raise ValueError(f"{n}={v!r}: expected finite values > 0")


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
        bar = self.bar
        if bar.disable:
            return
        warm_done = 0 < self._warm <= n
        if warm_done:
            bar.set_description(self.desc, refresh=False)
        bar.update(n)
        if self._warm > 0:
            self._warm -= n
            if warm_done:  # measure rate and ETA from here on: compilation is behind us
                now = bar._time()
                bar.initial = bar.n
                bar.start_t = bar.last_print_t = now
                bar.last_print_n = bar.n
        if postfix:
            bar.set_postfix(
                {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in postfix.items()},
                refresh=False,
            )

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
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"run name {name!r}: expected a non-empty folder name")
    return Path(out) / exp.name / name


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

    Args:
        preset: the preset ``cfg`` came from (recorded; also the default run name).
        overwrite: replace a finished or unfinished run of the same name.
        reuse: return a finished run's headline instead of refusing (``reproduce.py`` does this).
        argv: the command line recorded in the provenance (``sys.argv`` by default).

    Raises:
        ValueError: the config is invalid (no folder is created).
        RunExistsError: a finished run is there and neither ``overwrite`` nor ``reuse``; or an
            unfinished one that cannot be resumed, or was started with another config.
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
    resumed = False
    primary = _process_index() == 0  # in multi-host runs only process 0 touches the folder
    if path.exists() and not overwrite:
        if (path / SUMMARY_FILE).exists():
            if reuse:
                record = read_run(path)
                return Outcome(
                    exp.name,
                    preset,
                    path,
                    "existing",
                    0.0,
                    dict(record.summary.get("headline", {})),
                )
            raise RunExistsError(
                f"{path} holds a finished run; pass --overwrite to replace it, or --name NAME "
                "to run beside it"
            )
        if (path / CONFIG_FILE).exists():
            old = read_json(path / CONFIG_FILE).get("config", {})
            diff = _config_diff(old, cfg_json)
            if diff:
                raise RunExistsError(
                    f"{path} holds an unfinished run started with other settings "
                    f"({', '.join(diff[:6])} differ); pass --overwrite to start it again, or "
                    "--name NAME to run beside it"
                )
        if not exp.resumable:
            raise RunExistsError(
                f"{path} holds an unfinished run and {exp.name} cannot resume; pass --overwrite "
                "to start it again"
            )
        resumed = (path / CONFIG_FILE).exists()
        if primary:
            load_metrics(path / METRICS_FILE, repair=True)
    elif path.exists() and primary:
        import shutil

        shutil.rmtree(path)
    if primary:
        path.mkdir(parents=True, exist_ok=True)
    if primary and not resumed:
        (path / METRICS_FILE).unlink(missing_ok=True)
        atomic_write_json(
            path / CONFIG_FILE,
            {
                "experiment": exp.name,
                "preset": preset,
                "run_name": path.name,
                "config": cfg_json,
                "provenance": provenance(argv),
            },
        )
    if primary:
        (path / METRICS_FILE).touch()
    _sync_processes(f"geomopt run folder {path}")
    run = Run(path, experiment=exp, config=cfg, preset=preset, out=out, resumed=resumed,
              quiet=quiet or not primary, primary=primary)  # fmt: skip
    t0 = time.perf_counter()
    headline = _check_headline(exp.name, exp.run(cfg, run))
    seconds = time.perf_counter() - t0
    if not primary:
        return Outcome(exp.name, preset, path, "resumed" if resumed else "ran", seconds, headline)
    atomic_write_json(
        path / SUMMARY_FILE,
        {
            "experiment": exp.name,
            "preset": preset,
            "run_name": path.name,
            "headline": headline,
            "seconds": seconds,
            "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "details": run.details,
        },
    )
    return Outcome(exp.name, preset, path, "resumed" if resumed else "ran", seconds, headline)


def plot_run(exp: Experiment, run_dir: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Draw ``exp``'s figures from one finished run folder into ``out``.

    Raises:
        RunError: the folder is missing, not a run of ``exp``, unfinished, or has corrupt files
            (named in the message); or ``plot`` drew nothing.
    """
    if exp.plot is None:
        return []
    record = read_run(run_dir)
    if record.experiment != exp.name:
        raise RunError(f"{run_dir}: a run of {record.experiment!r}, not of {exp.name!r}")
    if record.summary is None:
        raise RunError(
            f"{run_dir}: unfinished run (no {SUMMARY_FILE}); finish it first by running the "
            "same command again"
        )
    figures = [Path(p) for p in exp.plot(Path(run_dir), Path(out))]
    if not figures:
        raise RunError(f"{run_dir}: {exp.name} drew no figure from this run")
    return figures


def figure_path(run_dir: str | os.PathLike, out: str | os.PathLike, stem: str) -> Path:
    """``<out>/<stem>.png`` for a quick-preset run, ``<out>/<stem>_<run name>.png`` otherwise.

    So figures of the paper preset never replace the committed quick-preset figures.
    """
    run_name = Path(run_dir).name
    suffix = "" if run_name == "quick" else f"_{run_name}"
    return Path(out) / f"{stem}{suffix}.png"


def headline_table(outcomes: Sequence[Outcome], *, width: int = 100) -> str:
    """A plain-text table: experiment, preset, status, seconds, then its headline numbers."""
    lines = []
    for o in outcomes:
        lines.append(f"{o.experiment} ({o.preset}, {o.status}, {o.seconds:.1f} s)  {o.path}")
        items = [f"{k} = {_fmt(v)}" for k, v in o.headline.items()]
        row = "   "
        for item in items:
            if len(row) + len(item) + 3 > width and row.strip():
                lines.append(row.rstrip())
                row = "   "
            row += item + "   "
        if row.strip():
            lines.append(row.rstrip())
    return "\n".join(lines)


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    return f"{v:.4g}"


# ---------------------------------------------------------------------------------------------
# Command lines


@dataclasses.dataclass(frozen=True)
class RunOptions:
    out: Path = DEFAULT_OUT
    """Results folder; the run goes to <out>/<family>/<experiment>/<name>."""
    name: str | None = None
    """Run folder name (default: the preset's name)."""
    overwrite: bool = False
    """Replace a finished or unfinished run of the same name."""
    plot: bool = True
    """Draw the figures into <out>/figures/<family>/ when the run finishes."""


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

    # name="" drops only the top-level prefix: `--seeds 32`, and nested fields keep theirs
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


def _interrupted(exp: Experiment, path: Path, argv: Sequence[str]) -> None:
    cmd = shlex.join(["uv", "run", *argv]) if argv else "the same command"
    if exp.resumable:
        hint = f"resume with: {cmd}"
    else:
        hint = f"{exp.name} cannot resume; start again with: {cmd} --overwrite"
    print(f"\ninterrupted: {path} kept unfinished; {hint}", file=sys.stderr)


def main(exp: Experiment, argv: Sequence[str] | None = None, *, default: str = "quick") -> int:
    """The command line of one experiment: parse, run, plot, print the headline table.

    Returns the process exit code (0 on success, 1 on a refused or failed run, 130 on Ctrl-C).
    """
    argv_full = list(sys.argv if argv is None else [sys.argv[0], *argv])
    prog = Path(argv_full[0]).name if argv_full else None
    preset, cfg, opts = parse(exp, argv_full[1:], default=default, prog=prog)
    path = run_folder(exp, opts.out, opts.name or preset)
    try:
        outcome = execute(
            exp,
            cfg,
            preset=preset,
            out=opts.out,
            name=opts.name,
            overwrite=opts.overwrite,
            argv=argv_full,
        )
    except KeyboardInterrupt:
        _interrupted(exp, path, argv_full)
        return 130
    except (RunExistsError, ValueError) as e:
        print(f"{exp.name}: {e}", file=sys.stderr)
        return 1
    print(headline_table([outcome]))
    if opts.plot and exp.plot is not None:
        figures_out = Path(opts.out) / "figures" / exp.family
        try:
            for fig in plot_run(exp, outcome.path, figures_out):
                print(f"figure: {fig}")
        except RunError as e:
            print(f"{exp.name}: {e}", file=sys.stderr)
            return 1
    return 0


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
    args = parser.parse_args(argv)
    if args.experiment not in by_name:
        print(
            f"unknown experiment {args.experiment!r}; known: {', '.join(by_name)}", file=sys.stderr
        )
        return 2
    exp = by_name[args.experiment]
    runs = args.runs or [run_folder(exp, args.out, args.preset)]
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
            for fig in plot_run(exp, run_dir, target):
                print(f"figure: {fig}")
        except RunError as e:
            print(f"plot {exp.name}: {e}", file=sys.stderr)
            status = 1
    return status
