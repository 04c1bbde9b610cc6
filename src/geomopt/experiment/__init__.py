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

The files of a run folder are read back with :func:`read_run` (a :class:`RunRecord`; a missing
or corrupt file raises :class:`RunError` naming it) and :func:`load_metrics`; any other file is
written like the runner's with :func:`atomic_write_bytes` / :func:`atomic_write_json` (JSON
values from :func:`to_jsonable`).

The package, one module per concern: the type (:mod:`._types`), progress bars
(:mod:`._progress`), the run files (:mod:`._runfiles`: atomic writes, JSON conversion, reading
a run back), the run handle and provenance (:mod:`._run`), the run folder's bookkeeping
(:mod:`._folder`), executing a run (:mod:`._execute`), the command lines (:mod:`._cli`).
"""

from geomopt.experiment._cli import (
    EXPECTED_ERRORS,
    debug_wanted,
    main,
    parse,
    plot_main,
    report_error,
    tool_main,
)
from geomopt.experiment._execute import (
    Outcome,
    execute,
    figure_path,
    plot_run,
    report_entry,
    rerun_command,
)
from geomopt.experiment._folder import check_out_dir, run_folder, staging_folder, stale_reason
from geomopt.experiment._progress import OverallProgress, Progress
from geomopt.experiment._run import Run, provenance
from geomopt.experiment._runfiles import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
    RunBusyError,
    RunError,
    RunExistsError,
    RunRecord,
    atomic_write_bytes,
    atomic_write_json,
    load_metrics,
    read_json,
    read_run,
    to_jsonable,
)
from geomopt.experiment._types import DEFAULT_OUT, RESERVED_FIELDS, Experiment

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_OUT",
    "EXPECTED_ERRORS",
    "METRICS_FILE",
    "RESERVED_FIELDS",
    "SUMMARY_FILE",
    "Experiment",
    "Outcome",
    "OverallProgress",
    "Progress",
    "Run",
    "RunBusyError",
    "RunError",
    "RunExistsError",
    "RunRecord",
    "atomic_write_bytes",
    "atomic_write_json",
    "check_out_dir",
    "debug_wanted",
    "execute",
    "figure_path",
    "load_metrics",
    "main",
    "parse",
    "plot_main",
    "plot_run",
    "provenance",
    "read_json",
    "read_run",
    "report_entry",
    "report_error",
    "rerun_command",
    "run_folder",
    "stale_reason",
    "staging_folder",
    "to_jsonable",
    "tool_main",
]
