"""What a prepared ModelNet HDF5 folder holds and its content checks: the two layouts
(:data:`MODELNET40`, :data:`MODELNET10` as :class:`ArchiveSpec`), the ModelNet10 classes, the
Stanford release's shard MD5s, and :func:`verify_folder`, which reads the shards' HDF5 keys,
shapes, dtypes and labels. Downloading, unpacking and deriving are :mod:`geomopt.canon._download`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np

MODELNET10_CLASSES = (
    "bathtub", "bed", "chair", "desk", "dresser",
    "monitor", "night_stand", "sofa", "table", "toilet",
)  # fmt: skip
"""The ModelNet10 classes in the official label order (``create_h5_modelnet10_from_raw.py``)."""

STANFORD_MD5 = {
    "ply_data_train0.h5": "3176385ffc31a7b6b5af22191fd920d1",
    "ply_data_train1.h5": "e3f613fb500559403b34925112754dc4",
    "ply_data_train2.h5": "0c56e233a090ff87c3049d4ce08e7d8b",
    "ply_data_train3.h5": "9d2af465adfa33a3285c369f3ca66c45",
    "ply_data_train4.h5": "dff38de489b2c41bfaeded86c2208984",
    "ply_data_test0.h5": "e9732e6d83b09e79e9a7617df058adee",
    "ply_data_test1.h5": "aba4b12a67c34391cc3c015a6f08ed4b",
}
"""MD5 of each shard of the Stanford release as public loaders list them (reported only)."""


class DataCheckError(ValueError):
    """A file that is not what was expected; the message names it and the expectation."""


@dataclasses.dataclass(frozen=True)
class ArchiveSpec:
    """What a prepared ModelNet folder holds (the counts are settable for tests)."""

    folder: str
    """Folder name under the cache directory (the official layout)."""
    train_files: tuple[str, ...]
    """HDF5 shards of the training split."""
    test_files: tuple[str, ...]
    """HDF5 shards of the test split."""
    n_classes: int
    """Labels lie in 0..n_classes - 1; shape_names.txt has that many lines."""
    n_train: int | None
    """Training clouds in all (None: not checked)."""
    n_test: int | None
    """Test clouds in all (None: not checked)."""
    n_points: int = 2048
    """Points per cloud."""
    md5: dict[str, str] | None = None
    """Reference MD5 per shard, reported (not enforced) after unpacking."""

    @property
    def splits(self) -> dict[str, tuple[tuple[str, ...], int | None]]:
        return {"train": (self.train_files, self.n_train), "test": (self.test_files, self.n_test)}


MODELNET40 = ArchiveSpec(
    folder="modelnet40_ply_hdf5_2048",
    train_files=tuple(f"ply_data_train{i}.h5" for i in range(5)),
    test_files=("ply_data_test0.h5", "ply_data_test1.h5"),
    n_classes=40,
    n_train=9840,
    n_test=2468,
    md5=STANFORD_MD5,
)
MODELNET10 = ArchiveSpec(
    folder="modelnet10_ply_hdf5_2048",
    train_files=("ply_data_train0.h5",),
    test_files=("ply_data_test0.h5",),
    n_classes=10,
    n_train=3991,
    n_test=908,
)


# --------------------------------------------------------------------------- verification


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise DataCheckError(f"{path}: missing; expected a text file in the archive's folder")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def verify_folder(folder: str | Path, spec: ArchiveSpec) -> dict[str, int]:
    """Check a prepared folder against ``spec``; returns ``{"train": n, "test": n}``.

    Checked: ``shape_names.txt`` has ``n_classes`` names; ``train_files.txt`` /
    ``test_files.txt`` name the expected shards; each shard has ``data`` ``(N, n_points, 3)``
    float32 and an integer ``label`` ``(N,)`` or ``(N, 1)`` in ``0..n_classes-1``; the totals
    match ``n_train`` / ``n_test``. Raises :class:`DataCheckError` naming the file.
    """
    import h5py

    folder = Path(folder)
    names = _read_lines(folder / "shape_names.txt")
    if len(names) != spec.n_classes:
        raise DataCheckError(
            f"{folder / 'shape_names.txt'}: {len(names)} class names, expected {spec.n_classes}"
        )
    counts = {}
    for split, (files, n_expected) in spec.splits.items():
        listed = sorted(Path(p).name for p in _read_lines(folder / f"{split}_files.txt"))
        if listed != sorted(files):
            raise DataCheckError(
                f"{folder / f'{split}_files.txt'}: lists {listed}, expected {sorted(files)}"
            )
        total = 0
        for name in files:
            path = folder / name
            if not path.is_file():
                raise DataCheckError(f"{path}: missing; expected the shards {list(files)}")
            try:
                f = h5py.File(path, "r")
            except OSError:
                raise DataCheckError(
                    f"{path}: not an HDF5 file; expected a ModelNet shard"
                ) from None
            with f:
                if "data" not in f or "label" not in f:
                    raise DataCheckError(
                        f"{path}: keys {sorted(f.keys())}, expected 'data' and 'label'"
                    )
                data, label = f["data"], f["label"]
                n = data.shape[0] if data.ndim else -1
                if data.shape != (n, spec.n_points, 3) or data.dtype != np.float32:
                    raise DataCheckError(
                        f"{path}: data {data.shape} {data.dtype}, expected "
                        f"(N, {spec.n_points}, 3) float32"
                    )
                if label.shape not in ((n,), (n, 1)) or label.dtype.kind not in "iu":
                    raise DataCheckError(
                        f"{path}: label {label.shape} {label.dtype}, expected ({n}, 1) integers"
                    )
                y = np.asarray(label).reshape(-1)
            if n and not (y.min() >= 0 and y.max() < spec.n_classes):
                raise DataCheckError(
                    f"{path}: labels {y.min()}..{y.max()}, expected 0..{spec.n_classes - 1}"
                )
            total += n
        if n_expected is not None and total != n_expected:
            raise DataCheckError(
                f"{folder}: {total} {split} clouds in {list(files)}, expected {n_expected}"
            )
        counts[split] = total
    return counts


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()
