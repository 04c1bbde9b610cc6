"""Checkpoints of a pretraining run that survive damage and failed writes (multi-host safe).

Orbax writes each checkpoint into a temporary folder and renames it when complete, so a run
killed mid-save keeps its previous checkpoints. Orbax does not check what it reads back: a file
cut short or with flipped bytes can restore as garbage or fail deep inside tensorstore. So after
orbax finishes a save, process 0 writes ``geomopt_manifest.json`` into the checkpoint's folder:
the size and SHA-256 of every file in it. On resume each checkpoint is checked against its
manifest, newest first; a damaged one (a file missing, cut or changed, the manifest unreadable,
or orbax failing to restore it) is named in one line, moved to ``<run>/checkpoints.damaged/``
(kept, not deleted) and the next older one is tried. A checkpoint without a manifest (written by
an older geomopt, or a save cut between orbax's commit and the manifest) is not refused for that
alone: it is used if orbax restores it.

A save that fails (a full disk: ``ENOSPC``; any error of the writer) stops the run with one line
(:class:`CheckpointWriteError`); the half-written checkpoint is removed, the previous ones are
left as they were, and the same command resumes from the newest of them.

Cost: hashing reads every checkpoint once after it is written and once before it is restored
(GPT-2 124M with AdamW: 1.5 GB, a few seconds at disk speed).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from geomopt.experiment import atomic_write_bytes

__all__ = [
    "MANIFEST",
    "CheckpointMismatchError",
    "CheckpointWriteError",
    "Checkpoints",
    "check_manifest",
    "check_restored_step",
    "clear_checkpoint_dir",
    "write_manifest",
]

MANIFEST = "geomopt_manifest.json"
"""Name of the file, inside each checkpoint's folder, that lists its files' sizes and hashes."""


class CheckpointWriteError(OSError):
    """A checkpoint could not be written; the message names it, the cause, and the checkpoint
    the run can resume from."""


class CheckpointMismatchError(RuntimeError):
    """The hosts of a multi-host run restored different checkpoints."""


def _barrier(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _allgather_int(value: int) -> np.ndarray:
    if jax.process_count() == 1:
        return np.array([value])
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(np.int64(value))).reshape(-1)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _files(folder: Path) -> Iterable[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(folder: str | Path) -> Path:
    """Write ``folder/geomopt_manifest.json``: ``{relative path: {"bytes", "sha256"}}`` for
    every file under ``folder`` (atomically: a cut write leaves no manifest, never half of
    one). Returns the manifest's path."""
    folder = Path(folder)
    files = {
        p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in _files(folder)
    }
    path = folder / MANIFEST
    atomic_write_bytes(path, json.dumps({"version": 1, "files": files}, indent=1).encode())
    return path


def check_manifest(folder: str | Path) -> str | None:
    """Why the checkpoint in ``folder`` does not match its manifest, in a few words (the first
    file that differs), or None when it matches. ``"no manifest"`` when there is none."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.exists():
        return "no manifest"
    try:
        files = json.loads(path.read_text())["files"]
        expected = {str(k): (int(v["bytes"]), str(v["sha256"])) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return f"{MANIFEST} unreadable ({type(e).__name__})"
    for name, (size, digest) in expected.items():
        f = folder / name
        if not f.is_file():
            return f"{name} missing"
        if f.stat().st_size != size:
            return f"{name} is {f.stat().st_size} bytes, {size} were written"
        if _sha256(f) != digest:
            return f"{name} changed since it was written (SHA-256 differs)"
    return None


def clear_checkpoint_dir(
    path: Path,
    *,
    process_index: Callable[[], int] = jax.process_index,
    barrier: Callable[[str], None] = _barrier,
) -> None:
    """Delete a stale checkpoint folder on a fresh start: every host waits at a barrier, only
    process 0 deletes, and every host waits again before anyone writes into it."""
    barrier("geomopt_ckpt_clear_start")
    if process_index() == 0 and Path(path).exists():
        shutil.rmtree(path)
    barrier("geomopt_ckpt_clear_done")


def check_restored_step(step: int, *, allgather: Callable[[int], Any] = _allgather_int) -> None:
    """Raise :class:`CheckpointMismatchError` unless every host restored checkpoint ``step``."""
    steps = np.asarray(allgather(int(step))).reshape(-1)
    if (steps != step).any():
        raise CheckpointMismatchError(
            f"hosts restored different checkpoint steps {steps.tolist()} (this host: {step}); "
            "every host must see the same checkpoint folder (a shared file system)"
        )


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


class Checkpoints:
    """Orbax checkpoints of ``(params, opt_state)`` in ``path``, each with a manifest.

    On a fresh (not resumed) run a leftover folder is cleared by :func:`clear_checkpoint_dir`
    (process 0 only, between barriers); :meth:`restore_latest` finds the newest undamaged
    checkpoint, and every host checks that all restored the same step
    (:func:`check_restored_step`). ``say`` prints a line (process 0's console).
    """

    def __init__(self, path: Path, keep: int, *, fresh: bool, say: Callable[[str], None] = print):
        import orbax.checkpoint as ocp

        self.path = Path(path).resolve()
        self.damaged = self.path.with_name(self.path.name + ".damaged")
        self.say = say
        if fresh:  # every host takes part in the barriers, whether or not it sees the folder
            clear_checkpoint_dir(self.path)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=True,  # a save cut mid-write leaves a temporary folder
        )
        self.manager = ocp.CheckpointManager(self.path, options=options)

    def latest(self) -> int | None:
        step = self.manager.latest_step()
        return None if step is None else int(step)

    def save(self, step: int, params, opt_state) -> None:
        """Write checkpoint ``step`` and its manifest. On one process the arrays are fetched to
        host first, which avoids compiling a per-device slicing program for every parameter
        shape.

        Raises:
            CheckpointWriteError: the write failed; the half-written checkpoint is removed and
                the older ones are untouched.
        """
        import orbax.checkpoint as ocp

        state = {"params": jax.tree.leaves(params), "opt_state": jax.tree.leaves(opt_state)}
        if jax.process_count() == 1:
            state = jax.device_get(state)
        previous = self.latest()
        try:
            self.manager.save(step, args=ocp.args.StandardSave(state))
            self.manager.wait_until_finished()
            _barrier("geomopt_ckpt_saved")
            if jax.process_index() == 0:
                write_manifest(self.path / str(step))
            _barrier("geomopt_ckpt_manifest")
        except Exception as e:
            self._discard(step)
            kept = (
                f"checkpoint {previous} is intact and the same command resumes from it"
                if previous is not None
                else "no earlier checkpoint exists, so the same command starts again from step 0"
            )
            raise CheckpointWriteError(
                f"could not write checkpoint step {step} to {self.path}: {_short(e)}; the run "
                f"stopped; {kept} once the cause is fixed"
            ) from e

    def _discard(self, step: int) -> None:
        """Remove what a failed save of ``step`` left (its folder, orbax's temporary folder)."""
        if jax.process_index() == 0:
            for p in self.path.glob(f"{step}*"):
                if p.name == str(step) or p.name.startswith(f"{step}.orbax-checkpoint-tmp"):
                    shutil.rmtree(p, ignore_errors=True)
        try:
            self.manager.reload()
        except Exception:  # the manager is rebuilt on the next start anyway
            pass

    def restore(self, step: int, params, opt_state):
        """``(params, opt_state)`` of checkpoint ``step``, laid out like the given ones."""
        import orbax.checkpoint as ocp

        def abstract(tree):
            return [
                jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                for x in jax.tree.leaves(tree)
            ]

        target = {"params": abstract(params), "opt_state": abstract(opt_state)}
        restored = self.manager.restore(step, args=ocp.args.StandardRestore(target))
        return (
            jax.tree.unflatten(jax.tree.structure(params), restored["params"]),
            jax.tree.unflatten(jax.tree.structure(opt_state), restored["opt_state"]),
        )

    def restore_latest(self, params, opt_state):
        """``(step, params, opt_state)`` of the newest undamaged checkpoint, or ``(None, params,
        opt_state)`` (the given ones) when there is none. Each damaged checkpoint is named in
        one line and moved to ``checkpoints.damaged/``."""
        for step in sorted((int(s) for s in self.manager.all_steps()), reverse=True):
            reason = check_manifest(self.path / str(step))
            if reason == "no manifest":
                reason = None  # older geomopt or a cut manifest write: orbax decides
            # every host must agree before anyone starts the (collective) restore
            good = _allgather_int(int(reason is None))
            if reason is None and not good.all():
                reason = "damaged as another host sees it"
            if reason is None:
                try:
                    restored = self.restore(step, params, opt_state)
                except Exception as e:
                    reason = f"orbax could not restore it: {_short(e)}"
                else:
                    check_restored_step(step)
                    return (step, *restored)
            self._set_aside(step, reason)
        return None, params, opt_state

    def _set_aside(self, step: int, reason: str) -> None:
        dest = self.damaged / str(step)
        n = 1
        while dest.exists():
            n += 1
            dest = self.damaged / f"{step}.{n}"
        _barrier(f"geomopt_ckpt_damaged_{step}")
        if jax.process_index() == 0:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(self.path / str(step)), dest)
        _barrier(f"geomopt_ckpt_moved_{step}")
        self.manager.reload()
        self.say(
            f"checkpoint step {step} in {self.path} is damaged ({reason}); moved it to {dest} "
            "and trying the one before"
        )

    def close(self) -> None:
        self.manager.close()
