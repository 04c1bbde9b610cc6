"""Config checks of the canon experiments' nested training config and ModelNet files (no JAX,
no NumPy: imported at ``--help`` time), built from the shared ones in :mod:`geomopt.checks`.
"""

from __future__ import annotations

from typing import Any

from geomopt.checks import (
    check_ints,
    check_nonnegative,
    check_positive,
    check_range,
    check_tuples,
    nested,
)

__all__ = ["check_train", "check_modelnet"]


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
            files = modelnet_files(root, dataset, split, flag=f"--{root_field.replace('_', '-')}")
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
