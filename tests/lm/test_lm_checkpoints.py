"""Damaged checkpoints and failed writes: a cut, changed or incomplete checkpoint is named and
set aside and the newest good one restored; a write that fails (a full disk) stops with one line
and leaves the earlier checkpoints intact."""

import errno
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.lm import _checkpoints
from geomopt.lm._checkpoints import (
    MANIFEST,
    Checkpoints,
    CheckpointWriteError,
    check_manifest,
    write_manifest,
)

PARAMS = {"w": jnp.arange(4000.0, dtype=jnp.float32).reshape(40, 100)}
OPT = {"m": jnp.ones(3000, dtype=jnp.float32)}


def state(step):
    """A distinct state per step, so a restore from the wrong step is seen."""
    return jax.tree.map(lambda x: x * step, PARAMS), jax.tree.map(lambda x: x + step, OPT)


def saved(path, steps, keep=3):
    lines = []
    store = Checkpoints(path, keep, fresh=True, say=lines.append)
    for s in steps:
        store.save(s, *state(s))
    store.close()
    return lines


def largest_file(folder):
    return max((f for f in folder.rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)


def cut(folder):
    f = largest_file(folder)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def flip(folder):
    f = largest_file(folder)
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    f.write_bytes(bytes(raw))


def drop_metadata(folder):
    (folder / "default" / "_METADATA").unlink()


def garble_manifest(folder):
    (folder / MANIFEST).write_text('{"files": ')


@pytest.mark.parametrize(
    "damage, reason",
    [
        (cut, r"is \d+ bytes, \d+ were written"),
        (flip, "changed since it was written"),
        (drop_metadata, "default/_METADATA missing"),
        (garble_manifest, f"{MANIFEST} unreadable"),
    ],
)
def test_damaged_latest_is_named_set_aside_and_the_one_before_restored(tmp_path, damage, reason):
    path = tmp_path / "checkpoints"
    saved(path, [1, 2, 3])
    assert all(check_manifest(path / str(s)) is None for s in (1, 2, 3))
    damage(path / "3")
    assert check_manifest(path / "3") is not None
    lines = []
    store = Checkpoints(path, 3, fresh=False, say=lines.append)
    step, params, opt = store.restore_latest(PARAMS, OPT)
    assert step == 2
    want_params, want_opt = state(2)
    np.testing.assert_array_equal(params["w"], want_params["w"])
    np.testing.assert_array_equal(opt["m"], want_opt["m"])
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith(f"checkpoint step 3 in {path} is damaged (")
    assert re.search(reason, lines[0]), lines[0]
    # kept for the user, out of orbax's way: the run saves step 3 again
    assert (tmp_path / "checkpoints.damaged" / "3" / MANIFEST).exists()
    assert sorted(p.name for p in path.iterdir()) == ["1", "2"]
    store.save(3, *state(3))
    assert check_manifest(path / "3") is None
    store.close()


def test_every_checkpoint_damaged_restores_nothing(tmp_path):
    path = tmp_path / "checkpoints"
    saved(path, [1, 2])
    flip(path / "1")
    cut(path / "2")
    lines = []
    store = Checkpoints(path, 3, fresh=False, say=lines.append)
    step, params, opt = store.restore_latest(PARAMS, OPT)
    store.close()
    assert step is None and params is PARAMS and opt is OPT
    assert [line.split(" is damaged")[0] for line in lines] == [
        f"checkpoint step 2 in {path}",
        f"checkpoint step 1 in {path}",
    ]


def test_manifest_lists_every_file_with_size_and_hash(tmp_path):
    folder = tmp_path / "7"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "x.bin").write_bytes(b"abc")
    (folder / "y").write_bytes(b"")
    files = json.loads(write_manifest(folder).read_text())["files"]
    assert files == {
        "a/x.bin": {
            "bytes": 3,
            "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        },
        "y": {
            "bytes": 0,
            "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        },
    }
    assert check_manifest(folder) is None
    (folder / "y").write_bytes(b"!")
    assert check_manifest(folder) == "y is 1 bytes, 0 were written"
    assert check_manifest(tmp_path) == "no manifest"


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


async def _no_space_async(*args, **kwargs):
    _no_space()


@pytest.mark.parametrize("where", ["orbax", "manifest"])
def test_full_disk_stops_with_one_line_and_keeps_the_previous_checkpoint(
    tmp_path, monkeypatch, where
):
    from orbax.checkpoint._src.path import atomicity

    path = tmp_path / "checkpoints"
    store = Checkpoints(path, 3, fresh=True, say=print)
    store.save(1, *state(1))
    if where == "orbax":  # the writer's final rename of its temporary folder
        monkeypatch.setattr(atomicity.async_path, "rename", _no_space_async)
    else:  # orbax committed, our manifest write fails
        monkeypatch.setattr(_checkpoints, "atomic_write_bytes", _no_space)
    with pytest.raises(CheckpointWriteError) as err:
        store.save(2, *state(2))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"could not write checkpoint step 2 to {path}: [Errno 28] No space")
    assert "checkpoint 1 is intact and the same command resumes from it" in msg
    monkeypatch.undo()
    store.close()
    assert [p.name for p in path.iterdir()] == ["1"]  # nothing half-written is left
    assert check_manifest(path / "1") is None
    again = Checkpoints(path, 3, fresh=False, say=print)
    step, params, _ = again.restore_latest(PARAMS, OPT)
    assert step == 1
    np.testing.assert_array_equal(params["w"], state(1)[0]["w"])
    again.close()


def test_full_disk_on_the_first_checkpoint_says_the_run_starts_over(tmp_path, monkeypatch):
    monkeypatch.setattr(_checkpoints, "atomic_write_bytes", _no_space)
    store = Checkpoints(tmp_path / "checkpoints", 3, fresh=True, say=print)
    with pytest.raises(CheckpointWriteError, match="no earlier checkpoint exists, so the same"):
        store.save(1, *state(1))
    store.close()


def test_a_fresh_start_clears_through_the_barriers_even_without_a_folder(tmp_path, monkeypatch):
    """Every host must run the same collectives: one that does not see the folder yet (a
    shared file system lags) still takes part in the clearing barriers."""
    calls = []
    monkeypatch.setattr(_checkpoints, "clear_checkpoint_dir", lambda path: calls.append(path))
    store = Checkpoints(tmp_path / "not_there_yet", 2, fresh=True, say=print)
    store.close()
    assert calls == [(tmp_path / "not_there_yet").resolve()]
