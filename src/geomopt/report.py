"""The final report of a run or a reproduction: a terminal table and ``summary.md``.

Per experiment it shows a few key numbers (``Experiment.key_numbers``; all of them stay in each
run's ``summary.json``) with the paper's value beside ours where the paper gives one
(``Experiment.paper``), and one elapsed time: the run's own, as recorded in its
``summary.json``. Numbers are rounded to 4 significant digits; what is zero to float precision
prints as 0; a NaN prints with the reason its experiment gave (``Run.explain_nan``).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ReportEntry", "format_number", "key_rows", "render_table", "render_markdown"]

ZERO = 1e-12
"""Magnitudes below this print as 0: float round-off of a quantity that is zero (e.g. a slope
fitted to values that do not change), not a measurement."""

N_KEYS = 4
"""Key numbers shown when an experiment names none."""


@dataclass
class ReportEntry:
    """One experiment in a report."""

    name: str
    preset: str
    status: str  # ran / resumed / reused / FAILED
    seconds: float | None  # the run's own time (recorded in summary.json); None if it failed
    headline: Mapping[str, float] = field(default_factory=dict)
    key_numbers: Sequence[str] = ()
    paper: Mapping[str, float] = field(default_factory=dict)
    paper_source: str = ""
    nan_reasons: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None
    figures: Sequence[Path] = ()
    error: str = ""


def format_number(v: Any, reason: str | None = None) -> str:
    """4 significant digits; |v| < ZERO as 0; NaN with its reason; ints as they are."""
    if v is None:
        return ""
    if isinstance(v, bool) or isinstance(v, int):
        return str(int(v))
    v = float(v)
    if math.isnan(v):
        return f"nan ({reason})" if reason else "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) < ZERO:
        return "0"
    return f"{v:.4g}"


def key_rows(entry: ReportEntry, all_keys: bool = False) -> list[tuple[str, str, str]]:
    """``(key, ours, paper)`` for the entry's key numbers present in its headline (and the
    keys with a paper value); with ``all_keys`` every headline number, key numbers first."""
    keys = [k for k in entry.key_numbers if k in entry.headline]
    if not keys:
        keys = list(entry.headline)[:N_KEYS]
    keys += [k for k in entry.paper if k in entry.headline and k not in keys]
    if all_keys:
        keys += [k for k in entry.headline if k not in keys]
    return [
        (
            k,
            format_number(entry.headline[k], entry.nan_reasons.get(k)),
            format_number(entry.paper.get(k)),
        )
        for k in keys
    ]


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    s = float(s)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}:{sec:02d}"
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{sec:02d}"


def render_table(entries: Sequence[ReportEntry], *, all_keys: bool = False, title: str = "",
                 width: int | None = None, file=None) -> None:  # fmt: skip
    """Print the entries as one table that fits the terminal (rich wraps long cells)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    stream = file if file is not None else sys.stdout
    if width is None and not getattr(stream, "isatty", lambda: False)():
        width = 120  # a log file or pipe: no terminal to fit, keep rows on one line
    console = Console(file=file, width=width, soft_wrap=False, highlight=False)
    table = Table(title=title or None, show_lines=False, expand=False)
    table.add_column("experiment", overflow="fold", min_width=8)
    table.add_column("status", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("number", overflow="fold")
    table.add_column("ours", justify="right", overflow="fold")
    all_rows = [key_rows(e, all_keys) if e.status != "FAILED" else [("error", e.error, "")]
                for e in entries]  # fmt: skip
    with_paper = any(p for rows in all_rows for _, _, p in rows)
    if with_paper:
        table.add_column("paper", justify="right", overflow="fold")
    for i, (e, rows) in enumerate(zip(entries, all_rows, strict=True)):
        first = True
        for key, ours, paper in rows or [("", "", "")]:
            cells = [e.name if first else "", e.status if first else "",
                     format_seconds(e.seconds) if first else "", key, ours]  # fmt: skip
            table.add_row(*cells, *([paper] if with_paper else []), end_section=False)
            first = False
        if i < len(entries) - 1:
            table.rows[-1].end_section = True
    console.print(table)
    sources = [(e.name, e.paper_source) for e in entries if e.paper and e.paper_source]
    for name, src in sources:
        console.print(f"paper values, {name}: {src}", soft_wrap=True)


def machine_line() -> str:
    """``host, OS, CPU count, JAX devices`` (JAX only if the program already imported it)."""
    import sys

    parts = [platform.node() or "?", f"{platform.system()} {platform.machine()}",
             f"{os.cpu_count()} CPUs", f"Python {platform.python_version()}"]  # fmt: skip
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            devs = jax.devices()
            parts.append(f"JAX {jax.__version__} on {len(devs)} x {devs[0].device_kind}")
        except Exception:  # a broken backend does not stop the report
            pass
    return ", ".join(parts)


def render_markdown(entries: Sequence[ReportEntry], *, preset: str, root: Path,
                    commit: str | None, total_seconds: float | None = None) -> str:  # fmt: skip
    """``summary.md``: when, where and from which commit; per experiment its status, time,
    key numbers beside the paper's, and relative links (from ``root``) to its run and figures."""
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    lines = [
        f"# geomopt reproduction: {preset} preset",
        "",
        f"- date: {now}",
        f"- commit: {commit or 'unknown (not a git checkout)'}",
        f"- machine: {machine_line()}",
    ]
    if total_seconds is not None:
        lines.append(f"- total time: {format_seconds(total_seconds)}")
    lines += ["", "| experiment | status | time |", "|---|---|---:|"]
    for e in entries:
        link = f"[{e.name}](#{_anchor(e.name)})"
        lines.append(f"| {link} | {e.status} | {format_seconds(e.seconds)} |")
    for e in entries:
        lines += ["", f"## {e.name}", ""]
        if e.status == "FAILED":
            lines += [f"FAILED: {e.error}"]
            continue
        if e.path is not None:
            lines.append(f"{e.status}, {format_seconds(e.seconds)}; run folder: "
                         f"[{_rel(e.path, root)}]({_rel(e.path, root)}/)")  # fmt: skip
        rows = key_rows(e)
        if rows:
            has_paper = any(p for _, _, p in rows)
            lines += ["", "| number | ours | paper |" if has_paper else "| number | ours |",
                      "|---|---:|---:|" if has_paper else "|---|---:|"]  # fmt: skip
            for k, ours, paper in rows:
                lines.append(f"| `{k}` | {ours} |" + (f" {paper} |" if has_paper else ""))
            if has_paper and e.paper_source:
                lines += ["", f"Paper values: {e.paper_source}"]
        if e.figures:
            lines += [""] + [f"- [{Path(f).name}]({_rel(Path(f), root)})" for f in e.figures]
    return "\n".join(lines) + "\n"


def _rel(path: Path, root: Path) -> str:
    try:
        return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()
    except ValueError:  # another drive on Windows
        return Path(path).as_posix()


def _anchor(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")
