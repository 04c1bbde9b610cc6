import json

import jax.numpy as jnp
import numpy as np
import pytest

from geomopt.experiment import atomic_write_json, load_metrics, to_jsonable


def test_strict_flags_are_on():
    with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
        jnp.ones((3,)) + jnp.ones((2, 3))


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
