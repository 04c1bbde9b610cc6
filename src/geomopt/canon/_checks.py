"""Config checks shared by the canon experiments (no JAX, no NumPy: imported at ``--help`` time).

Each check raises one ``ValueError`` whose message starts ``name=value: expected ...``, as
:func:`geomopt.experiment.check_ints` and :func:`~geomopt.experiment.check_positive` (reused
here) do. Fields of nested configs are named with their prefix (``train.model.dropout=...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from geomopt.experiment import check_ints, check_positive

__all__ = [
    "check_ints",
    "check_positive",
    "check_tuples",
    "check_subset",
    "check_range",
    "check_nonnegative",
    "nested",
    "check_train",
]


def check_tuples(cfg: Any, *names: str) -> None:
    """Each tuple field holds at least one value and no value twice."""
    for n in names:
        v = getattr(cfg, n)
        if not v:
            raise ValueError(f"{n}={v!r}: expected at least one value")
        if len(set(v)) != len(v):
            raise ValueError(f"{n}={v!r}: expected distinct values")


def check_subset(cfg: Any, name: str, choices: tuple[str, ...]) -> None:
    """A tuple field of names holds a non-empty subset of ``choices`` without repeats."""
    v = getattr(cfg, name)
    if not v or any(x not in choices for x in v) or len(set(v)) != len(v):
        raise ValueError(f"{name}={v!r}: expected distinct names from {choices}")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_range(
    cfg: Any, name: str, low: float, high: float, *, low_open: bool = False,
    high_open: bool = False,
) -> None:  # fmt: skip
    """A number field (or each tuple entry) is finite and inside ``[low, high]`` (``(`` / ``)``
    where open)."""
    v = getattr(cfg, name)
    for x in v if isinstance(v, tuple) else (v,):
        above = _number(x) and (x > low if low_open else x >= low)
        if not (above and (x < high if high_open else x <= high)):
            lo, hi = "(" if low_open else "[", ")" if high_open else "]"
            raise ValueError(f"{name}={v!r}: expected finite values in {lo}{low:g}, {high:g}{hi}")


def check_nonnegative(cfg: Any, *names: str) -> None:
    """Number fields (or each tuple entry) are finite and >= 0."""
    for n in names:
        v = getattr(cfg, n)
        for x in v if isinstance(v, tuple) else (v,):
            if not (_number(x) and x >= 0):
                raise ValueError(f"{n}={v!r}: expected finite values >= 0")


def nested(prefix: str, check: Callable[..., None], obj: Any, *args: Any, **kw: Any) -> None:
    """Run ``check(obj, *args, **kw)`` on a nested config, naming its fields ``prefix.field``."""
    try:
        check(obj, *args, **kw)
    except ValueError as e:
        raise ValueError(f"{prefix}.{e}") from None


def check_train(train: Any, *, prefix: str = "train") -> None:
    """Every field of a :class:`geomopt.canon._model_config.TrainConfig` and of its ``model``
    (also those the per-order settings replace: a bad value is refused either way)."""
    nested(prefix, check_ints, train, "epochs", "batch")
    m, p = train.model, f"{prefix}.model"
    nested(p, check_tuples, m, "mlp_dims")
    nested(p, check_ints, m, "mlp_dims", "n_bands", "n_perms", "deepsets_width", "tf_dim",
           "tf_depth", "tf_heads", "tf_window")  # fmt: skip
    nested(p, check_ints, m, "deepsets_depth", minimum=0)
    nested(p, check_ints, m, "bits")
    nested(p, check_range, m, "bits", 1, 32)
    nested(p, check_positive, m, "fourier_scale", "lr")
    nested(p, check_nonnegative, m, "weight_decay")
    for n in ("dropout", "point_dropout", "input_dropout", "label_smoothing"):
        nested(p, check_range, m, n, 0, 1, high_open=True)
    if m.tf_dim % m.tf_heads:
        raise ValueError(
            f"{p}.tf_heads={m.tf_heads!r}: expected a divisor of {p}.tf_dim={m.tf_dim}"
        )


def check_modelnet(
    root_field: str, root: str, dataset: str, points_field: str, n_points: int
) -> int:
    """The ModelNet HDF5 shards of ``dataset`` are under ``root`` (train and test) and their
    clouds have at least ``n_points`` points (read from the files' metadata, not their data).

    Returns the number of training clouds.
    """
    import h5py

    from geomopt.canon._data import modelnet_files

    n_train = 0
    for split in ("train", "test"):
        try:
            files = modelnet_files(root, dataset, split)
        except FileNotFoundError as e:
            raise ValueError(
                f"{root_field}={root!r}: expected the {dataset} HDF5 files; {e}"
            ) from None
        for path in files:
            with h5py.File(path, "r") as f:
                shape = f["data"].shape if "data" in f else None
            if shape is None or len(shape) != 3:
                raise ValueError(f"{root_field}={root!r}: {path} has no 'data' of shape (N, P, 3)")
            if n_points > shape[1]:
                raise ValueError(
                    f"{points_field}={n_points!r}: expected at most the {shape[1]} points per "
                    f"cloud of {path}"
                )
            n_train += shape[0] if split == "train" else 0
    return n_train
