"""The files of a run folder, now in :mod:`geomopt.experiment` (the code lives in
``geomopt/experiment/_runfiles.py``, with the rest of the runner's bookkeeping).

This module only re-exports those names so that ``from geomopt.runs import read_run`` keeps
working; new code imports them from :mod:`geomopt.experiment`.
"""

from geomopt.experiment import (
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

__all__ = [
    "CONFIG_FILE",
    "METRICS_FILE",
    "SUMMARY_FILE",
    "RunBusyError",
    "RunError",
    "RunExistsError",
    "RunRecord",
    "atomic_write_bytes",
    "atomic_write_json",
    "load_metrics",
    "read_json",
    "read_run",
    "to_jsonable",
]
