"""Pretraining in several processes through ``jax.distributed`` on 127.0.0.1, launched as the
README launches it (``pretrain.py ... --distributed`` with the coordinator address, process
count and id in the environment, or the SLURM variables): the losses equal the one-process
run's, only process 0 writes run files, the checkpoints restore in one process, a process
killed with SIGKILL stops the others within a bounded time and the same launch resumes to the
uninterrupted losses, and a process that cannot reach the coordinator stops with one line.

Each process has its own CPU devices (``JAX_NUM_CPU_DEVICES``); the one-process reference runs
in this process on the suite's 4 devices, so both see 4 devices on the data axis.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from geomopt.experiment import execute, load_metrics
from geomopt.lm._checkpoints import Checkpoints, check_manifest
from geomopt.lm._config import DataConfig
from geomopt.lm.exp_pretrain import EXPERIMENT, PRESETS

ROOT = Path(__file__).resolve().parents[2]
PRETRAIN = ROOT / "experiments" / "signsgd" / "pretrain.py"
STEPS, CKPT_EVERY = 8, 2
PEER_TIMEOUT = 5

# The CLI of pretrain.py, with process KILL_PROCESS killing itself (SIGKILL) right after it
# wrote checkpoint KILL_AFTER: a deterministic point mid-run.
KILLER = """
import os, signal, sys
import jax
from geomopt.experiment import main
from geomopt.lm import _checkpoints
from geomopt.lm.exp_pretrain import EXPERIMENT

save = _checkpoints.Checkpoints.save

def save_then_die(self, step, params, opt_state):
    save(self, step, params, opt_state)
    if step == int(os.environ["KILL_AFTER"]) and jax.process_index() == int(
        os.environ["KILL_PROCESS"]
    ):
        os.kill(os.getpid(), signal.SIGKILL)

_checkpoints.Checkpoints.save = save_then_die
sys.exit(main(EXPERIMENT, sys.argv[1:]))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAX_", "SLURM_", "XLA_", "GEOMOPT_"))}  # fmt: skip
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(devices), PYTHONUNBUFFERED="1",
               GEOMOPT_PEER_TIMEOUT=str(PEER_TIMEOUT), GEOMOPT_INIT_TIMEOUT="120")  # fmt: skip
    return env


def explicit(n: int, port: int):
    """The launch settings given explicitly, per process."""
    return [dict(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES=str(n),
                 JAX_PROCESS_ID=str(i)) for i in range(n)]  # fmt: skip


def slurm(n: int, port: int):
    """The SLURM variables JAX's cluster detection reads (its port is derived from the job
    id: 61440 + id % 4096)."""
    job = (port - 61440) % 4096 if port >= 61440 else port % 4096
    return [dict(SLURM_JOB_ID=str(job), SLURM_STEP_NODELIST="127.0.0.1", SLURM_NTASKS=str(n),
                 SLURM_PROCID=str(i), SLURM_LOCALID=str(i), SLURM_STEP_NUM_NODES="1")
            for i in range(n)]  # fmt: skip


def slurm_port() -> int:
    for _ in range(50):
        port = 61440 + np.random.default_rng().integers(4096)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", int(port)))
            except OSError:
                continue
        return int(port)
    raise RuntimeError("no free port in 61440..65535")


@dataclasses.dataclass
class Proc:
    rc: int
    out: str
    err: str
    ended: float


def launch(out: Path, settings, devices: int, *extra: str, script=None, env_extra=None):
    """Start one process per ``settings`` entry and wait for all; returns their
    :class:`Proc` (return code, stdout, stderr, monotonic end time)."""
    argv = ["smoke", "--distributed", "--out", str(out), "--steps", str(STEPS),
            "--ckpt-every", str(CKPT_EVERY), "--ckpt-keep", "4",
            "--data.offline-dir", str(out.parent / "corpus"), *extra]  # fmt: skip
    cmd = [sys.executable, *(["-c", script] if script else [str(PRETRAIN)]), *argv]
    procs = []
    for s in settings:
        env = {**base_env(devices), **s, **(env_extra or {})}
        procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))  # fmt: skip
    ended = {}
    deadline = time.monotonic() + 400
    while len(ended) < len(procs) and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if i not in ended and p.poll() is not None:
                ended[i] = time.monotonic()
        time.sleep(0.05)
    results = []
    for i, p in enumerate(procs):
        if i not in ended:
            p.kill()
            ended[i] = time.monotonic()
        o, e = p.communicate(timeout=30)
        results.append(Proc(p.returncode, o, e, ended[i]))
    return results


def losses(path: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in load_metrics(path) if "loss" in r}


def run_folder(out: Path) -> Path:
    return out / "signsgd" / "pretrain" / "smoke"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("multiprocess")


@pytest.fixture(scope="module")
def cfg(root):
    return dataclasses.replace(
        PRESETS["smoke"], steps=STEPS, ckpt_every=CKPT_EVERY, ckpt_keep=4,
        data=dataclasses.replace(PRESETS["smoke"].data, offline_dir=str(root / "corpus")),
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(cfg, root):
    """The one-process run (4 devices in this process): its losses and run folder."""
    assert isinstance(cfg.data, DataConfig)
    outcome = execute(EXPERIMENT, cfg, preset="smoke", out=root / "one", quiet=True)
    return outcome.path, losses(outcome.path)


def restored(cfg, path: Path):
    """The newest checkpoint in ``path`` restored by this (one) process."""
    from geomopt.lm._train import Trainer

    trainer = Trainer.build(cfg)
    params, opt_state = trainer.init()
    store = Checkpoints(path, 4, fresh=False, say=lambda m: None)
    try:
        step, params, opt_state = store.restore_latest(params, opt_state)
    finally:
        store.close()
    return step, params


def assert_losses_equal(got, want):
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    np.testing.assert_allclose([got[s] for s in sorted(got)], [want[s] for s in sorted(want)],
                               rtol=2e-5)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, n, devices, settings, extra",
    [
        ("dp", 2, 2, explicit, ()),
        ("fsdp", 2, 2, explicit, ("--fsdp",)),
        ("slurm", 2, 2, slurm, ()),
        ("four", 4, 1, explicit, ()),
    ],
)
def test_processes_train_like_one_and_only_process_zero_writes(
    root, cfg, reference, name, n, devices, settings, extra
):
    out = root / name
    port = slurm_port() if settings is slurm else free_port()
    procs = launch(out, settings(n, port), devices, *extra)
    assert [p.rc for p in procs] == [0] * n, procs[0].err[-3000:] + procs[-1].err[-3000:]
    path = run_folder(out)
    assert_losses_equal(losses(path), reference[1])
    rows = load_metrics(path)
    assert len([r for r in rows if "loss" in r]) == STEPS  # one writer: no doubled rows
    assert len(list((path / "tensorboard").rglob("events.out.tfevents.*"))) == 1
    assert f"run: {path}" in procs[0].out
    assert all("run:" not in p.out and "figure:" not in p.out for p in procs[1:])
    assert (out / "figures" / "signsgd" / "pretrain_loss_smoke.png").exists()
    steps = sorted(int(p.name) for p in (path / "checkpoints").iterdir())
    assert steps == [2, 4, 6, 8]
    assert all(check_manifest(path / "checkpoints" / str(s)) is None for s in steps)
    if name in ("dp", "fsdp"):  # restorable by one process, equal to the one-process run's
        one_cfg = dataclasses.replace(cfg, fsdp=bool(extra))
        step, params = restored(one_cfg, path / "checkpoints")
        step1, params1 = restored(one_cfg, reference[0] / "checkpoints")
        assert step == step1 == STEPS
        import jax

        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params1), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("victim", [1, 0], ids=["worker", "coordinator"])
def test_sigkill_stops_the_others_and_the_same_launch_resumes(root, reference, victim):
    out = root / f"kill{victim}"
    settings = explicit(2, free_port())
    procs = launch(out, settings, 2, script=KILLER,
                   env_extra={"KILL_AFTER": "4", "KILL_PROCESS": str(victim)})  # fmt: skip
    dead, alive = procs[victim], procs[1 - victim]
    assert dead.rc == -signal.SIGKILL
    assert alive.rc != 0
    # a bounded wait: the survivor stopped within the peer timeout (plus slack for 2 cores)
    assert alive.ended - dead.ended < PEER_TIMEOUT + 30
    if victim == 1:  # ours: one line naming the lost process
        last = [line for line in alive.err.splitlines() if line.strip()][-1]
        assert last.startswith("pretrain: error: lost process 1 of 2: no sign of life for")
        assert "Relaunch the same command on every process to resume" in last
    else:  # the coordinator's loss: JAX aborts the worker at once, naming the cause
        assert "another task died" in alive.err
    stage = run_folder(out).parent / ".smoke.partial"
    assert check_manifest(stage / "checkpoints" / "4") is None
    again = launch(out, explicit(2, free_port()), 2)
    assert [p.rc for p in again] == [0, 0], again[0].err[-3000:]
    assert "from the checkpoint of step 4" in again[0].err
    assert_losses_equal(losses(run_folder(out)), reference[1])


@pytest.mark.slow
def test_a_one_process_checkpoint_resumes_in_two_processes(root, reference):
    """The reverse hand-over: a one-process run (4 devices, ``JAX_NUM_PROCESSES=1``) killed
    after checkpoint 4 is resumed by two processes of 2 devices to the same losses."""
    out = root / "reverse"
    one = launch(out, explicit(1, free_port()), 4, script=KILLER,
                 env_extra={"KILL_AFTER": "4", "KILL_PROCESS": "0"})  # fmt: skip
    assert one[0].rc == -signal.SIGKILL
    two = launch(out, explicit(2, free_port()), 2)
    assert [p.rc for p in two] == [0, 0], two[0].err[-3000:]
    assert "from the checkpoint of step 4" in two[0].err
    assert_losses_equal(losses(run_folder(out)), reference[1])


@pytest.mark.slow
def test_a_worker_that_cannot_reach_the_coordinator_stops_in_one_line(root):
    port = free_port()  # nobody listens there
    t0 = time.monotonic()
    (proc,) = launch(root / "alone", explicit(2, port)[1:], 2,
                     env_extra={"GEOMOPT_INIT_TIMEOUT": "3"})  # fmt: skip
    assert proc.rc == 1
    assert proc.ended - t0 < 3 + 60  # the stated timeout, plus start-up on a loaded machine
    last = [line for line in proc.err.splitlines() if line.strip()][-1]
    assert last == (
        f"signsgd/pretrain: error: --distributed: process 1 of 2 could not reach the "
        f"coordinator at 127.0.0.1:{port} within 3 s (GEOMOPT_INIT_TIMEOUT): Connection "
        "refused; start process 0 there, or check JAX_COORDINATOR_ADDRESS"
    )
    assert not (root / "alone").exists()


def test_malformed_launch_settings_are_named(monkeypatch):
    from geomopt.lm._distributed import _launch, _seconds

    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES='two': expected a whole number"):
        _launch({"JAX_NUM_PROCESSES": "two"})
    with pytest.raises(ValueError, match="JAX_PROCESS_ID=2: expected less than"):
        _launch({"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"})
    with pytest.raises(ValueError, match="GEOMOPT_PEER_TIMEOUT='0'"):
        _seconds({"GEOMOPT_PEER_TIMEOUT": "0"}, "GEOMOPT_PEER_TIMEOUT", 60)
    assert _launch({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2",
                    "JAX_PROCESS_ID": "1"}) == {  # fmt: skip
        "coordinator_address": "h:1", "num_processes": 2, "process_id": 1,
    }  # fmt: skip
    assert json.dumps(_launch({})) == "{}"


class FakeStore:
    """The coordinator's key-value store as :class:`PeerWatch` uses it; ``frozen`` peers stop
    counting, ``down`` makes every call fail (the coordinator is gone)."""

    def __init__(self):
        self.values, self.frozen, self.down = {}, set(), False

    def key_value_set(self, key, value, allow_overwrite):
        if self.down:
            raise RuntimeError("UNAVAILABLE: Socket closed")
        self.values[key] = value
        for p in range(3):  # the other processes count too, unless frozen
            k = f"geomopt/alive/{p}"
            if k != key and p not in self.frozen:
                self.values[k] = str(int(self.values.get(k, "0")) + 1)

    def key_value_try_get(self, key):
        if self.down:
            raise RuntimeError("UNAVAILABLE: Socket closed")
        if key not in self.values:
            raise RuntimeError("NOT_FOUND")
        return self.values[key]


@pytest.mark.parametrize("me, event, lost", [(0, "freeze 2", "process 2 of 3"),
                                             (1, "down", "process 0 of 3 (the coordinator)"),
                                             (0, "none", None)])  # fmt: skip
def test_peer_watch_names_the_lost_process(me, event, lost):
    from geomopt.lm._distributed import PeerWatch

    store, said = FakeStore(), []
    watch = PeerWatch(timeout=0.3, period=0.02, on_lost=said.append, client=store, me=me, n=3)
    watch.start()
    time.sleep(0.2)
    if event == "freeze 2":
        store.frozen.add(2)
    elif event == "down":
        store.down = True
    time.sleep(0.8)
    watch.stop()
    watch.join(2)
    if lost is None:
        assert said == []
    else:
        assert len(said) == 1 and said[0].startswith(f"lost {lost}: no sign of life for")
        assert f"process {me} stops. Relaunch the same command on every process" in said[0]
