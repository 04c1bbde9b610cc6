"""Starting ``jax.distributed`` for a multi-process run, and stopping cleanly when a peer is lost.

Where the launch settings come from (``--distributed``):

- ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0; read by JAX itself),
  ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``: given explicitly, by any launcher or by hand;
- otherwise JAX's own detection of the cluster: SLURM (``SLURM_JOB_ID``, ``SLURM_NTASKS``,
  ``SLURM_PROCID``, ``SLURM_STEP_NODELIST``, ...), Open MPI, Kubernetes, TPU pods.

They stay out of the run's config, so every process of a launch (and the relaunch that
resumes it) has the same config.

Timeouts (seconds, environment variables):

- ``GEOMOPT_INIT_TIMEOUT`` (default 300): a process that cannot reach the coordinator within
  this time stops with one line (:class:`DistributedError`).
- ``GEOMOPT_PEER_TIMEOUT`` (default 60): every process posts a counter to the coordinator's
  key-value store once a second from a background thread and watches the others'. A process not
  heard from for this long is declared lost: the others print one line naming it and exit with
  status 1, instead of waiting forever in a collective. The same launch then resumes from the
  last complete checkpoint. The coordinator going away (process 0 killed) is seen the same way.
  JAX's own heartbeat timeout is set to twice this, as the backstop (it aborts the process with
  a stack trace).

The liveness thread watches processes, not progress: a long compilation or a slow step is not
a lost peer.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping

__all__ = ["DistributedError", "PeerWatch", "start_distributed", "stop_watch"]

INIT_TIMEOUT = 300
PEER_TIMEOUT = 60
_WATCH = None  # the running PeerWatch of this process


class DistributedError(ConnectionError):
    """``jax.distributed`` could not start; the message says why and what to check."""


def _seconds(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: expected a whole number of seconds > 0")
    return value


def _launch(env: Mapping[str, str]) -> dict:
    """The explicit ``jax.distributed.initialize`` arguments given in ``env`` (may be empty)."""
    out: dict = {}
    names = {"JAX_NUM_PROCESSES": "num_processes", "JAX_PROCESS_ID": "process_id"}
    for var, arg in names.items():
        raw = env.get(var, "")
        if raw:
            if not raw.isdigit():
                raise ValueError(f"{var}={raw!r}: expected a whole number")
            out[arg] = int(raw)
    if "num_processes" in out and out["num_processes"] < 1:
        raise ValueError(f"JAX_NUM_PROCESSES={out['num_processes']}: expected at least 1")
    if "process_id" in out and out.get("num_processes", 1 << 30) <= out["process_id"]:
        raise ValueError(
            f"JAX_PROCESS_ID={out['process_id']}: expected less than JAX_NUM_PROCESSES="
            f"{out['num_processes']}"
        )
    if env.get("JAX_COORDINATOR_ADDRESS"):
        out["coordinator_address"] = env["JAX_COORDINATOR_ADDRESS"]
    return out


def start_distributed(env: Mapping[str, str] | None = None) -> "PeerWatch | None":
    """Call ``jax.distributed.initialize`` with the launch settings of ``env`` (default: the
    environment) and start the liveness watch; returns it (None with a single process).

    Raises:
        ValueError: a malformed setting, named.
        DistributedError: the coordinator could not be reached in time, or no launch settings
            were found (one line).
    """
    import jax

    env = os.environ if env is None else env
    init_timeout = _seconds(env, "GEOMOPT_INIT_TIMEOUT", INIT_TIMEOUT)
    peer_timeout = _seconds(env, "GEOMOPT_PEER_TIMEOUT", PEER_TIMEOUT)
    kwargs = _launch(env)
    if not jax.distributed.is_initialized():
        where = kwargs.get("coordinator_address", "the address JAX detects")
        who = (f"process {kwargs['process_id']} of {kwargs['num_processes']}"
               if {"process_id", "num_processes"} <= kwargs.keys() else "this process")  # fmt: skip
        if kwargs.get("process_id", _detected_id(kwargs)) not in (0, None):
            _wait_for_coordinator(kwargs.get("coordinator_address"), init_timeout, who)
        try:
            jax.distributed.initialize(
                **kwargs,
                initialization_timeout=init_timeout,
                heartbeat_timeout_seconds=2 * peer_timeout,
            )
        except ValueError as e:  # JAX: no cluster detected and nothing given
            raise DistributedError(
                f"--distributed: {e} (set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and "
                "JAX_PROCESS_ID, or launch under SLURM / Open MPI / a TPU pod)"
            ) from None
        except Exception as e:  # the client's connect: DEADLINE_EXCEEDED and friends
            first = " ".join(str(e).split())[:200]
            raise DistributedError(
                f"--distributed: {who} could not reach the coordinator at {where} within "
                f"{init_timeout} s (GEOMOPT_INIT_TIMEOUT): {first}; start process 0 there, "
                "or check JAX_COORDINATOR_ADDRESS"
            ) from None
    global _WATCH
    if jax.process_count() == 1 or _WATCH is not None:
        return _WATCH
    _WATCH = PeerWatch(timeout=peer_timeout)
    _WATCH.start()
    return _WATCH


def stop_watch() -> None:
    """Stop the liveness watch (at the end of training: processes then finish at their own
    pace, and one that exits first is not a lost peer)."""
    global _WATCH
    if _WATCH is not None:
        _WATCH.stop()
        _WATCH = None


def _detected_id(kwargs: dict) -> int | None:
    """This process's id as JAX's cluster detection finds it (SLURM_PROCID, ...), else None."""
    try:
        from jax._src import clusters

        addr, _, pid, _ = clusters.ClusterEnv.auto_detect_unset_distributed_params(
            kwargs.get("coordinator_address"), kwargs.get("num_processes"), None, None, None, 1
        )
        kwargs.setdefault("coordinator_address", addr)
        return pid
    except Exception:  # no cluster, or a JAX without this (private) helper: no pre-check
        return None


def _wait_for_coordinator(address: str | None, timeout: float, who: str) -> None:
    """Wait until the coordinator at ``host:port`` accepts a TCP connection; raise
    :class:`DistributedError` after ``timeout`` seconds. (JAX itself aborts the process with a
    stack trace when it cannot register with the coordinator.)"""
    import socket

    if not address or ":" not in address:
        return
    host, port = address.rsplit(":", 1)
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except (OSError, ValueError) as e:
            if time.monotonic() > deadline:
                reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                raise DistributedError(
                    f"--distributed: {who} could not reach the coordinator at {address} within "
                    f"{timeout:g} s (GEOMOPT_INIT_TIMEOUT): {reason}; start process 0 there, "
                    "or check JAX_COORDINATOR_ADDRESS"
                ) from None
        time.sleep(0.25)


def _client():
    from jax._src import distributed

    return distributed.global_state.client


class PeerWatch(threading.Thread):
    """A daemon thread that posts this process's heartbeat counter to the coordinator's
    key-value store every ``period`` seconds and calls ``on_lost(message)`` once when another
    process's counter has not moved for ``timeout`` seconds, or the store itself has not
    answered for that long (the coordinator, process 0, is gone). By default ``on_lost``
    prints the message as one line and ends the process with status 1."""

    def __init__(self, *, timeout: float, period: float = 1.0,
                 on_lost: Callable[[str], None] | None = None, client=None,
                 me: int | None = None, n: int | None = None):  # fmt: skip
        import jax

        super().__init__(name="geomopt-peer-watch", daemon=True)
        self.timeout, self.period = float(timeout), float(period)
        self.me = jax.process_index() if me is None else me
        self.n = jax.process_count() if n is None else n
        self.client = client if client is not None else _client()
        self.on_lost = on_lost or _exit_with_line
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        beat = 0
        now = time.monotonic()
        seen = {p: (None, now) for p in range(self.n) if p != self.me}
        store_ok = now
        while not self.stopped.wait(self.period):
            now = time.monotonic()
            beat += 1
            try:
                self.client.key_value_set(f"geomopt/alive/{self.me}", str(beat), True)
                store_ok = now
            except Exception:
                if now - store_ok > self.timeout:
                    return self._lost(0, now - store_ok, "the coordinator")
                continue
            for p in seen:
                try:
                    value = self.client.key_value_try_get(f"geomopt/alive/{p}")
                except Exception:  # not posted yet
                    value = None
                last, since = seen[p]
                if value != last:
                    seen[p] = (value, now)
                elif now - since > self.timeout:
                    return self._lost(p, now - since, "")

    def _lost(self, p: int, quiet: float, what: str) -> None:
        if self.stopped.is_set():
            return
        name = f"process {p} of {self.n}" + (f" ({what})" if what else "")
        self.on_lost(
            f"lost {name}: no sign of life for {quiet:.0f} s (GEOMOPT_PEER_TIMEOUT "
            f"{self.timeout:g} s); process {self.me} stops. Relaunch the same command on every "
            "process to resume from the last complete checkpoint"
        )


def _exit_with_line(message: str) -> None:
    print(f"\npretrain: error: {message}", file=sys.stderr, flush=True)
    os._exit(1)
