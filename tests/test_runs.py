import io
import json

import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.runs import (
    Progress,
    Run,
    RunExistsError,
    atomic_write_json,
    load_metrics,
    load_run,
    to_jsonable,
)


def test_strict_flags_are_on():
    with pytest.raises(ValueError):
        jnp.ones((3,)) + jnp.ones((2, 3))


def test_run_folder_layout_and_roundtrip(tmp_path):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        lr: float = 1e-3
        dims: tuple[int, ...] = (10, 100)

    run = Run.create("exp", "r1", Cfg(), root=tmp_path)
    run.log(0, loss=jnp.float32(2.5), acc=np.float64(0.25))
    run.log_rows([{"step": 1, "loss": jnp.array(1.5)}, {"step": 2, "v": jnp.arange(3)}])
    assert not run.is_complete
    run.finish({"final_loss": jnp.array(1.5), "bad": float("nan")})
    assert run.is_complete
    config, metrics, summary = load_run(tmp_path / "exp" / "r1")
    assert config == {"lr": 1e-3, "dims": [10, 100]}
    assert metrics == [
        {"step": 0, "loss": 2.5, "acc": 0.25},
        {"step": 1, "loss": 1.5},
        {"step": 2, "v": [0, 1, 2]},
    ]
    assert summary == {"final_loss": 1.5, "bad": "nan"}


def test_finished_run_is_not_overwritten(tmp_path):
    run = Run.create("exp", "r", {"a": 1}, root=tmp_path)
    run.log(0, x=1)
    run.finish({"done": True})
    with pytest.raises(RunExistsError, match="overwrite"):
        Run.create("exp", "r", {"a": 2}, root=tmp_path)
    assert load_run(run.path)[0] == {"a": 1}
    run2 = Run.create("exp", "r", {"a": 2}, root=tmp_path, overwrite=True)
    assert not run2.is_complete and run2.metrics() == []


def test_unfinished_run_restarts_or_resumes(tmp_path):
    run = Run.create("exp", "r", {}, root=tmp_path)
    run.log(0, x=1)
    resumed = Run.create("exp", "r", {}, root=tmp_path, resume=True)
    resumed.log(1, x=2)
    assert [m["step"] for m in resumed.metrics()] == [0, 1]
    fresh = Run.create("exp", "r", {}, root=tmp_path)
    assert fresh.metrics() == []


@pytest.mark.parametrize("bad", ["", "a/b", ".."])
def test_bad_run_names(tmp_path, bad):
    with pytest.raises(ValueError, match="expected a non-empty folder name"):
        Run.create("exp", bad, {}, root=tmp_path)


def test_truncated_last_line_is_named_or_repaired_and_corruption_raises(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 0}\n{"step": 1}\n{"ste')
    with pytest.raises(ValueError, match="line 3 is truncated"):
        load_metrics(p)
    assert load_metrics(p, repair=True) == [{"step": 0}, {"step": 1}]
    assert p.read_text() == '{"step": 0}\n{"step": 1}\n'
    p.write_text('{"step": 0}\n{oops\n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        load_metrics(p)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    p = tmp_path / "x.json"
    atomic_write_json(p, {"v": 1})

    class Boom:
        def __iter__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write_json(p, {"v": list(Boom())})
    assert json.loads(p.read_text()) == {"v": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["x.json"]


def test_to_jsonable_handles_nonfinite_and_enums():
    import enum

    class E(enum.Enum):
        A = "a"

    assert to_jsonable({"x": float("inf"), "y": -np.inf, "e": E.A, "t": (1, 2)}) == {
        "x": "inf",
        "y": "-inf",
        "e": "a",
        "t": [1, 2],
    }


class _LazyValue:
    """Counts conversions, standing in for a device array that would force a sync."""

    conversions = 0

    def __init__(self, v):
        self.v = v

    def __array__(self, dtype=None, copy=None):
        _LazyValue.conversions += 1
        return np.asarray(self.v)


def test_progress_converts_only_when_printing():
    stream = io.StringIO()
    _LazyValue.conversions = 0
    prog = Progress(1000, "t", min_interval=3600.0, stream=stream)
    prog.update(1, {"loss": _LazyValue(1.0)})  # first update prints (last print at -inf)
    for i in range(2, 1000):
        prog.update(i, {"loss": _LazyValue(float(i))})
    assert _LazyValue.conversions == 1
    prog.close()
    lines = stream.getvalue().strip().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("t 1000/1000")


def test_progress_rejects_negative_total():
    with pytest.raises(ValueError, match="-1"):
        Progress(-1)
