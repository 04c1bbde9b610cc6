"""The experiment registry behind ``experiments/reproduce.py``.

Each experiment folder may hold a ``registry.py`` that defines ``EXPERIMENTS``, a list of
:class:`Experiment`. :func:`discover` imports every such file; :func:`run_all` runs the chosen
preset of each, makes its figures from the saved run folders, and writes a summary table
(``results/summary.md`` and ``results/summary.json``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from geomopt.runs import atomic_write_bytes, atomic_write_json

__all__ = ["Experiment", "Outcome", "discover", "run_all", "format_table"]

Preset = Literal["quick", "paper"]
PRESETS: tuple[str, ...] = ("quick", "paper")


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One reproducible experiment.

    Attributes:
        name: unique id, ``<family>/<experiment>`` (e.g. ``"signsgd/toy"``).
        description: one line saying what it shows.
        run: ``run(preset, root, overwrite)`` runs the experiment through the library and
            writes its run folder(s) under ``root``.
        plot: ``plot(root, figures_dir)`` makes figures from the saved runs only and returns
            the paths of the files it wrote.
        command: the shell command that rebuilds it with the quick preset (for the README).
    """

    name: str
    description: str
    run: Callable[[str, Path, bool], None]
    plot: Callable[[Path, Path], Sequence[Path]]
    command: str = ""


@dataclasses.dataclass
class Outcome:
    name: str
    status: str
    seconds: float
    figures: list[str]
    error: str = ""


def discover(experiments_dir: str | Path) -> list[Experiment]:
    """Import ``<experiments_dir>/*/registry.py`` and collect their ``EXPERIMENTS`` lists."""
    found: list[Experiment] = []
    for reg in sorted(Path(experiments_dir).glob("*/registry*.py")):
        mod_name = f"_geomopt_registry_{reg.parent.name}_{reg.stem}"
        spec = importlib.util.spec_from_file_location(mod_name, reg)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import experiment registry {reg}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        exps = getattr(module, "EXPERIMENTS", None)
        if not isinstance(exps, (list, tuple)) or not all(isinstance(e, Experiment) for e in exps):
            raise TypeError(f"{reg}: EXPERIMENTS must be a list of geomopt.reproduce.Experiment")
        found.extend(exps)
    names = [e.name for e in found]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"experiment names registered twice: {sorted(dupes)}")
    return found


def run_all(
    experiments: Sequence[Experiment],
    *,
    preset: str,
    root: str | Path = "results",
    only: Sequence[str] = (),
    overwrite: bool = True,
    keep_going: bool = True,
    log: Callable[[str], None] = print,
) -> list[Outcome]:
    """Run and plot each experiment; return one :class:`Outcome` per experiment.

    ``only`` keeps experiments whose name starts with one of its entries. With ``keep_going``
    a failing experiment is recorded (with its traceback in the summary) and the rest still run.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset {preset!r}: expected one of {PRESETS}")
    root = Path(root)
    chosen = [e for e in experiments if not only or any(e.name.startswith(o) for o in only)]
    if only and not chosen:
        known = ", ".join(e.name for e in experiments)
        raise ValueError(f"--only {list(only)} matches no experiment; known: {known}")
    outcomes = []
    for exp in chosen:
        log(f"[reproduce] {exp.name} ({preset}): {exp.description}")
        t0 = time.perf_counter()
        figures_dir = root / "figures"
        try:
            exp.run(preset, root, overwrite)
            figs = [str(p) for p in exp.plot(root, figures_dir)]
            outcomes.append(Outcome(exp.name, "ok", time.perf_counter() - t0, figs))
        except Exception:
            if not keep_going:
                raise
            err = traceback.format_exc()
            log(err)
            outcomes.append(Outcome(exp.name, "FAILED", time.perf_counter() - t0, [], err))
        log(f"[reproduce] {exp.name}: {outcomes[-1].status} in {outcomes[-1].seconds:.1f}s")
    atomic_write_json(root / "summary.json", [dataclasses.asdict(o) for o in outcomes])
    atomic_write_bytes(root / "summary.md", format_table(outcomes, preset).encode())
    return outcomes


def format_table(outcomes: Sequence[Outcome], preset: str) -> str:
    """A Markdown table: experiment, status, runtime, figures."""
    lines = [
        f"# geomopt reproduction ({preset} preset)",
        "",
        "| experiment | status | runtime (s) | figures |",
        "|---|---|---:|---|",
    ]
    for o in outcomes:
        figs = "<br>".join(o.figures) if o.figures else "-"
        lines.append(f"| {o.name} | {o.status} | {o.seconds:.1f} | {figs} |")
    total = sum(o.seconds for o in outcomes)
    lines += ["", f"Total: {total:.1f} s"]
    return "\n".join(lines) + "\n"
