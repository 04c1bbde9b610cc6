"""Ctrl-C that stops a run every time, within seconds, and a second Ctrl-C that exits at once.

Python turns SIGINT into ``KeyboardInterrupt`` at the next bytecode of the main thread. Two things
lose or delay it in a JAX program:

- the exception can be raised inside a callback whose errors are only printed, e.g. JAX's
  garbage-collection callback (``Exception ignored in: <function _xla_gc_callback ...>``), and
  the run carries on;
- the main thread can sit in one long library call (an XLA compilation, a big jitted step) and
  run no bytecode for a long time.

:func:`interrupt_guard` (used by the command lines around a run) installs a SIGINT handler that
records the request before raising, so :func:`check_interrupt` (called by every progress update
and every logged row) raises again if the first exception was swallowed. A watchdog thread,
woken by the signal itself through ``signal.set_wakeup_fd``, exits the process with status 130
if the program is still running ``grace`` seconds after the first Ctrl-C, and at once on the
second. Exiting there loses nothing: an unfinished run lives in a staging folder that the next
start cleans up or resumes, and a finished run is replaced only by a finished one.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from time import monotonic as _monotonic

__all__ = [
    "interrupt_guard",
    "check_interrupt",
    "interrupt_requested",
    "exit_interrupted",
    "EXIT_INTERRUPTED",
]

EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""

_state = {"requested": False, "count": 0, "active": False, "first": 0.0}


def interrupt_requested() -> bool:
    """True once Ctrl-C was pressed inside the active :func:`interrupt_guard`."""
    return _state["requested"]


def check_interrupt() -> None:
    """Raise ``KeyboardInterrupt`` if Ctrl-C was pressed and its exception got lost."""
    if _state["requested"]:
        raise KeyboardInterrupt


def exit_interrupted() -> None:
    """End a command-line process after Ctrl-C was handled: flush and exit 130 at once.

    Interpreter shutdown would wait for (and can crash in) library threads still busy with
    the interrupted work, e.g. an XLA compilation; everything worth keeping is on disk by now.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)


def _exit_now(reason: str) -> None:
    try:
        sys.stderr.write(f"\n{reason}\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


DUPLICATE_WINDOW = 1.0
"""A SIGINT this soon after the first is the same Ctrl-C delivered twice (``uv run`` forwards
SIGINT to its child when there is no terminal, on top of the process group's copy)."""


def _on_sigint(signum, frame) -> None:
    now = _monotonic()
    if _state["count"] and now - _state["first"] < DUPLICATE_WINDOW:
        return
    _state["count"] += 1
    if _state["count"] >= 2:
        _exit_now("second Ctrl-C; exiting now")
    _state["requested"], _state["first"] = True, now
    raise KeyboardInterrupt


def _watchdog(read_fd: int, grace: float, stop: threading.Event, message) -> None:
    sigint = signal.SIGINT.value
    deadline = first = None
    while not stop.is_set():
        timeout = None if deadline is None else max(0.0, deadline - _monotonic())
        ready, _, _ = select.select([read_fd], [], [], timeout)
        if stop.is_set():
            return
        if not ready:  # the grace period ran out and the program is still going
            extra = ""
            if message is not None:
                try:
                    extra = f"\n{message()}"
                except Exception:  # the exit must not depend on the message
                    pass
            _exit_now(f"still running {grace:g} s after Ctrl-C (inside a library call); "
                      f"exiting now{extra}")  # fmt: skip
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        for byte in data:
            if byte != sigint:
                continue
            now = _monotonic()
            if deadline is None:
                first, deadline = now, now + grace
            elif now - first >= DUPLICATE_WINDOW:  # the main thread may be stuck: exit now
                _exit_now("second Ctrl-C; exiting now")




@contextlib.contextmanager
def interrupt_guard(grace: float = 5.0, message=None) -> Iterator[None]:
    """Handle Ctrl-C as described in the module docstring while the block runs.

    ``message()``, if given, is printed when the watchdog ends the process (what was kept and
    how to continue). A no-op outside the main thread, or when a guard is already active.
    """
    if threading.current_thread() is not threading.main_thread() or _state["active"]:
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    stop = threading.Event()
    old_handler = signal.signal(signal.SIGINT, _on_sigint)
    try:
        old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter, or a wakeup fd that cannot be replaced
        old_wakeup = None
    watchdog = None
    if old_wakeup is not None:
        watchdog = threading.Thread(
            target=_watchdog, args=(read_fd, grace, stop, message), name="ctrl-c watchdog",
            daemon=True,
        )
        watchdog.start()
    _state.update(requested=False, count=0, active=True, first=0.0)
    try:
        yield
    finally:
        _state.update(requested=False, count=0, active=False, first=0.0)
        stop.set()
        if old_wakeup is not None:
            signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGINT, old_handler)
        os.close(write_fd)  # wakes the watchdog (EOF) so it returns
        if watchdog is not None:
            watchdog.join(timeout=1.0)
        os.close(read_fd)
