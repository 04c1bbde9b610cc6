"""Progress bars of a run and of a whole reproduction (rate, ETA without the compilation)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from geomopt.interrupts import (
    check_interrupt,
)


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
