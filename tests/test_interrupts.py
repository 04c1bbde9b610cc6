"""Ctrl-C stops a run every time: a lost KeyboardInterrupt is raised again at the next progress
update, a run stuck in a long call is ended by the watchdog, a second Ctrl-C exits at once.

The first Ctrl-C is lost the way it is in a JAX program: raised inside a garbage-collection
callback, whose exceptions Python only prints ("Exception ignored in ...").
"""

import dataclasses
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from geomopt.experiment import Experiment, Run, main

LOSE_A_CTRL_C = """
def lose_a_ctrl_c():
    fired = []

    def callback(phase, info):
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the callback

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
"""
exec(LOSE_A_CTRL_C)  # defines lose_a_ctrl_c() for the in-process test


@dataclasses.dataclass(frozen=True)
class Cfg:
    n: int = 20
    """Steps."""


def _run(cfg: Cfg, run: Run) -> dict[str, float]:
    for i in run.progress(range(cfg.n), desc="steps"):
        if i == 2:
            lose_a_ctrl_c()  # noqa: F821 (defined by exec above)
        run.log(i, value=float(i))
    return {"steps": float(len(run.metrics()))}


EXP = Experiment(
    name="test/ctrl_c", description="t", presets={"smoke": Cfg(), "quick": Cfg()}, run=_run
)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_lost_in_a_gc_callback_still_stops_the_run(tmp_path, capsys):
    code = main(EXP, ["smoke", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 130, err
    assert "interrupted: nothing was written" in err
    assert not (tmp_path / "test" / "ctrl_c" / "smoke").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


SCRIPT = (
    textwrap.dedent("""
    import dataclasses, gc, signal, sys, time
    from geomopt.experiment import Experiment, main
    """)
    + LOSE_A_CTRL_C
    + textwrap.dedent('''

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        stall: float = 60.0
        """Seconds the step after the lost Ctrl-C blocks without any progress update."""

    def run(cfg, run):
        bar = run.progress(total=3, desc="steps")
        bar.update(1)
        lose_a_ctrl_c()
        print("lost", file=sys.stderr, flush=True)
        time.sleep(cfg.stall)  # one long call: no progress update in it
        bar.update(2)
        return {"done": 1.0}

    EXP = Experiment(name="test/stuck", description="t", presets={"smoke": Cfg(), "quick": Cfg()},
                     run=run)
    sys.exit(main(EXP))
    ''')
)


def _start(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(SCRIPT)
    return subprocess.Popen(
        [sys.executable, str(script), "smoke", "--out", str(tmp_path / "r")],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _wait_for(proc, text: str) -> None:
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"{text!r} never printed; exit {proc.wait()}")


def test_the_watchdog_ends_a_run_stuck_after_a_lost_ctrl_c(tmp_path):
    proc = _start(tmp_path)
    _wait_for(proc, "lost")
    t0 = time.monotonic()
    try:
        err = proc.communicate(timeout=30)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 20  # the grace period is 5 s; the step would take 60 s
    assert "still running 5 s after Ctrl-C" in err
    assert "interrupted: nothing was written" in err and "start again with: uv run" in err


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    proc = _start(tmp_path)
    _wait_for(proc, "lost")
    time.sleep(1.5)  # past the window in which a second SIGINT counts as the same Ctrl-C
    proc.send_signal(signal.SIGINT)
    try:
        err = proc.communicate(timeout=30)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "second Ctrl-C; exiting now" in err and "still running" not in err


def test_a_duplicate_sigint_counts_once(tmp_path):
    """`uv run` without a terminal forwards SIGINT to its child on top of the process group's
    copy: two SIGINTs within a second are one Ctrl-C, handled gracefully."""
    script = tmp_path / "dup.py"
    script.write_text(
        textwrap.dedent("""
        import os, signal, sys, time
        from geomopt.interrupts import interrupt_guard
        with interrupt_guard():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                os.kill(os.getpid(), signal.SIGINT)  # the duplicate, while cleaning up
                time.sleep(0.2)
                print("graceful")
        """)
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "graceful", out.stderr


def test_collecting_garbage_outside_a_guard_is_untouched():
    gc.collect()  # no handler installed at import: nothing to raise
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
