"""What a pretraining run reports: peak FLOP/s for MFU, the metric sinks (metrics.jsonl,
TensorBoard, Weights & Biases) and the console helpers (durations, SI units, the step clock)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from geomopt.experiment import METRICS_FILE, atomic_write_bytes, load_metrics
from geomopt.lm._config import TrainConfig

__all__ = ["MetricSinks", "device_peak_flops", "measured_matmul_flops", "peak_flops_per_device"]

_PEAK_BF16 = {
    "b200": 2250e12,
    "h200": 989e12,
    "h100": 989e12,
    "a100": 312e12,
    "l40s": 362e12,
    "l4": 121e12,
    "a10": 125e12,
    "v6": 918e12,
    "v5p": 459e12,
    "v5": 197e12,
    "v4": 275e12,
}
"""Dense bf16 peak FLOP/s per device by device-kind substring (vendor data sheets, no sparsity);
checked in order, so ``v5p`` is matched before ``v5`` (TPU v5e reports ``TPU v5 lite``)."""


def peak_flops_per_device(device=None) -> float:
    """Dense bf16 peak FLOP/s of a known accelerator (from its device kind); NaN otherwise."""
    device = device or jax.devices()[0]
    kind = getattr(device, "device_kind", "").lower().replace(" ", "")
    for name, flops in _PEAK_BF16.items():
        if name in kind:
            return flops
    return math.nan


@functools.cache
def measured_matmul_flops(n: int = 1024, repeats: int = 5, dtype: str = "float32") -> float:
    """FLOP/s of a jitted ``n x n`` matmul on the default device, median of ``repeats`` timed
    calls after one warm-up (measured once per process). Not used for MFU (it moves with the
    machine's load: 28 %-102 % MFU for one speed); benchmarks report it next to MFU."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.dtype(dtype))
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(a).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2.0 * n**3 / statistics.median(times)


def device_peak_flops(override: float = 0.0, device=None) -> tuple[float, str]:
    """``(peak FLOP/s per device, where it comes from)`` for MFU.

    ``override`` > 0 wins; a known GPU/TPU gets its dense bf16 peak from :data:`_PEAK_BF16`
    (a fixed data-sheet number, so MFU cannot exceed 100 % and does not move with a rate
    re-measured each run); anything else (a CPU, an unknown accelerator) gets NaN, and MFU is
    shown as n/a: a CPU has no one documented peak (it depends on the cores, vector units and
    clock), so pass ``--peak-flops`` to get one there.
    """
    if override > 0:
        return float(override), "given by --peak-flops"
    device = device or jax.devices()[0]
    table = peak_flops_per_device(device)
    kind = getattr(device, "device_kind", device.platform)
    if math.isfinite(table):
        return table, f"dense bf16 peak of {kind} (data sheet)"
    return math.nan, f"no known peak for {kind}: MFU n/a (set --peak-flops)"


def _mfu_text(mfu: float, peak: float) -> str:
    if not math.isfinite(mfu):
        return "MFU n/a"
    if mfu > 1.0:  # only with a --peak-flops below the device's real peak
        return f"MFU {100 * mfu:.1f}% (above 100 %: --peak-flops {peak:.3g} is below the peak)"
    return f"MFU {100 * mfu:.1f}%"


class MetricSinks:
    """Where metric rows go: the run's ``metrics.jsonl``, TensorBoard event files in
    ``<run>/tensorboard[/<tag>]`` (``tensorboardX``), and Weights & Biases when enabled (the
    ``wandb`` package is imported only then). Only process 0 writes; ``tag`` (a dict) is added
    to every row, and its values name the TensorBoard subfolder and W&B prefix."""

    def __init__(self, run, cfg: TrainConfig, *, tag: Mapping[str, Any] | None = None):
        self.run = run
        self.tag = dict(tag or {})
        self.main = jax.process_index() == 0
        self.prefix = "_".join(f"{v}" for v in self.tag.values())
        self.tb = None
        self.wandb = None
        if not self.main:
            return
        if cfg.tensorboard:
            from tensorboardX import SummaryWriter

            logdir = run.path / "tensorboard"
            self.tb = SummaryWriter(str(logdir / self.prefix if self.prefix else logdir))
        if cfg.wandb:
            try:
                import wandb
            except ImportError as e:
                raise ValueError(
                    "wandb=True but the wandb package is not installed (geomopt does not "
                    "depend on it): `uv pip install wandb`, or drop --wandb"
                ) from e
            self.wandb = wandb.init(
                project=cfg.wandb_project,
                name=f"{run.path.name}{'-' + self.prefix if self.prefix else ''}",
                dir=str(run.path),
                mode=cfg.wandb_mode,
                config=json.loads(json.dumps(dataclasses.asdict(cfg), default=str)),
                resume="allow",
                id=f"{run.path.name}-{self.prefix}".strip("-").replace("/", "_"),
            )

    def write(self, rows: list[dict[str, Any]]) -> None:
        if not (self.main and rows):
            return
        self.run.log_rows([{**r, **self.tag} for r in rows])
        for r in rows:
            step = int(r["step"])
            scalars = {
                k: float(v)
                for k, v in r.items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            if self.tb is not None:
                for k, v in scalars.items():
                    self.tb.add_scalar(k, v, step)
            if self.wandb is not None:
                self.wandb.log(scalars, step=step)
        if self.tb is not None:
            self.tb.flush()

    def text(self, name: str, value: str) -> None:
        if self.tb is not None:
            self.tb.add_text(name, value, 0)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _truncate_metrics(path: Path, last_step: int, tag: Mapping[str, Any]) -> None:
    """Drop this run's (``tag``) metric rows after ``last_step`` (written by the interrupted
    part of a run after its last checkpoint); ``last_step < 0`` drops all of them."""
    rows = load_metrics(path / METRICS_FILE)
    mine = [all(r.get(k) == v for k, v in tag.items()) for r in rows]
    keep = [r for r, m in zip(rows, mine, strict=True) if not m or r.get("step", 0) <= last_step]
    if len(keep) != len(rows):
        text = "".join(json.dumps(r) + "\n" for r in keep)
        atomic_write_bytes(path / METRICS_FILE, text.encode())


# ---------------------------------------------------------------------------------------------
# Console


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    h, m = divmod(s, 3600)
    m, s = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


class _Clock:
    """Training time only: the first step of a (resumed) run, which compiles, and everything
    between :meth:`pause` and :meth:`resume` (evaluation, noise, checkpoints) are excluded."""

    def __init__(self):
        self.t0: float | None = None
        self.steps = 0
        self.paused = 0.0
        self._pause_t: float | None = None

    def start(self) -> None:
        self.t0, self.steps, self.paused = time.perf_counter(), 0, 0.0

    def pause(self) -> None:
        self._pause_t = time.perf_counter()

    def resume(self) -> None:
        if self._pause_t is not None:
            self.paused += time.perf_counter() - self._pause_t
            self._pause_t = None

    def window(self) -> tuple[int, float]:
        """``(steps, seconds)`` since the last window, then start a new one."""
        steps, secs = self.steps, time.perf_counter() - self.t0 - self.paused
        self.start()
        return steps, secs
