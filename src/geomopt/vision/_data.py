"""Image data sets of the vision experiments, as float32 arrays ``(N, H, W, C)`` in [0, 1] with
int32 labels: scikit-learn's digits (offline, shipped with scikit-learn), MNIST (IDX files),
the official rotated MNIST (MNIST-rot, ``.amat`` text files in a zip) and CIFAR-10 (the python
pickle batches in a tar.gz).

Downloads go through :func:`geomopt.fetch.fetch` (hash-checked cache under
``$XDG_CACHE_HOME/geomopt/<data set>``, mirrors in order); every reader checks what it got (IDX
magic numbers and sizes, ``.amat`` columns, CIFAR-10 batch shapes) and names the file and the
problem in one line (:class:`DataError`). A file placed in the cache folder by hand is used as
it is once it verifies.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import pickle
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from geomopt.fetch import cache_dir, fetch

__all__ = [
    "CIFAR10_URLS",
    "DataError",
    "ImageSet",
    "MNIST_FILES",
    "MNIST_MIRRORS",
    "MNIST_ROT_URLS",
    "fetch_cifar10",
    "fetch_mnist",
    "fetch_mnist_rot",
    "read_amat",
    "read_cifar10",
    "read_idx",
    "rotate",
    "sklearn_digits",
]


class DataError(ValueError):
    """A data file that is not what its format says; the message names the file."""


@dataclasses.dataclass(frozen=True)
class ImageSet:
    """Images ``x`` ``(N, H, W, C)`` float32 in [0, 1] and labels ``y`` ``(N,)`` int32."""

    x: np.ndarray
    y: np.ndarray
    name: str

    def __post_init__(self):
        if self.x.ndim != 4 or len(self.x) != len(self.y):
            raise DataError(f"{self.name}: images {self.x.shape} and labels {self.y.shape}: "
                            "expected (N, H, W, C) and (N,)")  # fmt: skip

    def __len__(self) -> int:
        return len(self.y)

    def take(self, idx) -> ImageSet:
        return ImageSet(self.x[idx], self.y[idx], self.name)


# ------------------------------------------------------------------------------ offline digits
def sklearn_digits(*, canvas: int = 28, box: int = 20) -> ImageSet:
    """scikit-learn's 1,797 handwritten digits (8 x 8, 16 grey levels; UCI optdigits test set),
    resized bilinearly to ``box x box`` and centred on a ``canvas x canvas`` black canvas, as
    MNIST centres its 20 x 20 digits in 28 x 28 (room to rotate without clipping)."""
    from skimage.transform import resize
    from sklearn.datasets import load_digits

    if not (1 <= box <= canvas):
        raise ValueError(f"box={box}, canvas={canvas}: expected 1 <= box <= canvas")
    d = load_digits()
    imgs = d.images.astype(np.float32) / 16.0
    big = np.stack([resize(im, (box, box), order=1, anti_aliasing=False) for im in imgs])
    out = np.zeros((len(imgs), canvas, canvas), np.float32)
    o = (canvas - box) // 2
    out[:, o : o + box, o : o + box] = np.clip(big, 0.0, 1.0)
    return ImageSet(out[..., None], d.target.astype(np.int32), "sklearn digits")


def rotate(x: np.ndarray, angles_deg: Sequence[float]) -> np.ndarray:
    """Each image of ``x`` ``(N, H, W, C)`` rotated counter-clockwise by its angle (degrees)
    about its centre, bilinear, same size (corners outside the canvas are lost, new ones black).
    Multiples of 90 degrees are exact (``np.rot90``)."""
    from scipy.ndimage import rotate as nd_rotate

    angles = np.asarray(angles_deg, float)
    if angles.shape != (len(x),):
        raise ValueError(f"angles {angles.shape}: expected one angle per image ({len(x)})")
    out = np.empty_like(x)
    for i, (im, a) in enumerate(zip(x, angles, strict=True)):
        k = a / 90.0
        if np.isclose(k, np.round(k)):
            out[i] = np.rot90(im, int(np.round(k)) % 4, axes=(0, 1))
        else:
            out[i] = np.clip(nd_rotate(im, a, axes=(1, 0), reshape=False, order=1), 0, 1)
    return out


# ------------------------------------------------------------------------------------- MNIST
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "md5:f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "md5:d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "md5:9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "md5:ec29112dd5afa0611ce80d1b7f02629c",
}
"""The four MNIST IDX files and their MD5 (the hashes torchvision verifies)."""

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (``.gz`` or raw): magic ``0 0 type ndim``, ``ndim`` big-endian uint32 sizes,
    then the data. Raises :class:`DataError` on a bad magic number or a size that disagrees
    with the header."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DataError(f"{path}: not a complete gzip file ({err})") from err
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise DataError(f"{path}: not an IDX file (magic {raw[:4].hex()!r}, expected "
                        "00 00 <type> <ndim>)")  # fmt: skip
    ndim = raw[3]
    dims = np.frombuffer(raw[4 : 4 + 4 * ndim], ">u4").astype(int)
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    want = int(np.prod(dims)) * dtype.itemsize
    body = raw[4 + 4 * ndim :]
    if len(dims) != ndim or len(body) != want:
        raise DataError(f"{path}: header says {tuple(dims)} x {dtype.itemsize} bytes = {want} "
                        f"bytes of data, the file has {len(body)}")  # fmt: skip
    return np.frombuffer(body, dtype).reshape(tuple(dims))


def fetch_mnist(
    folder: str | Path | None = None,
    *,
    mirrors: Sequence[str] = MNIST_MIRRORS,
    hashes: dict[str, str] | None = None,
) -> dict[str, ImageSet]:
    """MNIST's ``train`` (60,000) and ``test`` (10,000) sets: the four IDX files fetched into
    ``folder`` (default ``cache_dir("mnist")``) and verified (``hashes``, default
    :data:`MNIST_FILES`' MD5s, then the IDX structure)."""
    folder = cache_dir("mnist") if folder is None else Path(folder)
    hashes = MNIST_FILES if hashes is None else hashes
    path = {f: fetch([m + f for m in mirrors], known_hash=hashes[f], cache_dir=folder)
            for f in MNIST_FILES}  # fmt: skip
    out = {}
    for split, stem in (("train", "train"), ("test", "t10k")):
        x = read_idx(path[f"{stem}-images-idx3-ubyte.gz"])
        y = read_idx(path[f"{stem}-labels-idx1-ubyte.gz"])
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(f"MNIST {split}: images {x.shape}, labels {y.shape}: expected "
                            "(N, 28, 28) and (N,)")  # fmt: skip
        out[split] = ImageSet((x.astype(np.float32) / 255.0)[..., None], y.astype(np.int32),
                              f"MNIST {split}")  # fmt: skip
    return out


# --------------------------------------------------------------------- rotated MNIST (official)
MNIST_ROT_URLS = ("http://www.iro.umontreal.ca/~lisa/icml2007data/mnist_rotation_new.zip",)
"""The official rotated MNIST (Larochelle et al. 2007): MNIST digits rotated by angles drawn
uniformly in [0, 2 pi); 12,000 training images (the official split: 10,000 train, 2,000 valid)
and 50,000 test images."""
MNIST_ROT_MEMBERS = {
    "train": "mnist_all_rotation_normalized_float_train_valid.amat",
    "test": "mnist_all_rotation_normalized_float_test.amat",
}
MNIST_ROT_SIZES = {"train": 12_000, "test": 50_000}


def read_amat(data: bytes | str | Path, *, name: str = "amat", side: int = 28) -> ImageSet:
    """An ``.amat`` text file: one image per line, ``side * side`` floats in [0, 1] then the
    label. Raises :class:`DataError` on a line with another number of columns or values out of
    range."""
    raw = Path(data).read_bytes() if isinstance(data, (str, Path)) else data
    try:
        arr = np.loadtxt(io.BytesIO(raw), dtype=np.float32, ndmin=2)
    except ValueError as err:
        raise DataError(f"{name}: not a table of numbers ({err})") from err
    if arr.shape[1] != side * side + 1:
        raise DataError(f"{name}: {arr.shape[1]} columns, expected {side * side} pixels + 1 "
                        "label")  # fmt: skip
    x, y = arr[:, :-1], arr[:, -1]
    if x.min(initial=0) < 0 or x.max(initial=0) > 1 or np.any(y != np.round(y)):
        raise DataError(f"{name}: pixels outside [0, 1] or non-integer labels")
    imgs = x.reshape(-1, side, side)[..., None]  # as the official loader reads them
    return ImageSet(np.ascontiguousarray(imgs), y.astype(np.int32), name)


def fetch_mnist_rot(
    folder: str | Path | None = None, *, urls: Sequence[str] = MNIST_ROT_URLS
) -> dict[str, ImageSet]:
    """The official rotated MNIST ``train`` (12,000) and ``test`` (50,000) sets from its zip,
    fetched into ``folder`` (default ``cache_dir("mnist_rot")``). No hash of the zip is
    published, so what is verified is its content: both members present, 785 columns, the
    official sizes."""
    folder = cache_dir("mnist_rot") if folder is None else Path(folder)
    path = fetch(list(urls), known_hash=None, cache_dir=folder, fname="mnist_rotation_new.zip",
                 resume=True, starts_with=b"PK\x03\x04", expected="a zip archive")  # fmt: skip
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        raise DataError(f"{path}: not a zip file ({err}); delete it and fetch again") from err
    out = {}
    with zf:
        names = {Path(n).name: n for n in zf.namelist()}
        for split, member in MNIST_ROT_MEMBERS.items():
            if member not in names:
                raise DataError(f"{path}: no {member} inside (has {sorted(names)})")
            s = read_amat(zf.read(names[member]), name=f"{path.name}:{member}")
            if len(s) != MNIST_ROT_SIZES[split]:
                raise DataError(f"{path.name}:{member}: {len(s)} images, expected "
                                f"{MNIST_ROT_SIZES[split]}")  # fmt: skip
            out[split] = ImageSet(s.x, s.y, f"MNIST-rot {split}")
    return out


# ----------------------------------------------------------------------------------- CIFAR-10
CIFAR10_URLS = ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",)
CIFAR10_MD5 = "md5:c58f30108f718f92721af3b95e74349a"
_CIFAR_BATCHES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}


class _ArraysOnly(pickle.Unpickler):
    """Unpickles only what CIFAR-10's batches hold (dicts, lists, numpy arrays): a crafted
    file cannot run code."""

    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype")} | {
        (m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray")
        for n in ("_reconstruct", "scalar")
    }  # fmt: skip

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR-10 batch")


def _read_batch(raw: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        d = _ArraysOnly(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"{name}: not a CIFAR-10 python batch ({err})") from err
    if not isinstance(d, dict) or b"data" not in d or b"labels" not in d:
        raise DataError(f"{name}: expected a dict with b'data' and b'labels'")
    x, y = np.asarray(d[b"data"]), np.asarray(d[b"labels"])
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072 or len(y) != len(x):
        raise DataError(f"{name}: data {x.shape} {x.dtype}, labels {y.shape}: expected "
                        "(N, 3072) uint8 and N labels")  # fmt: skip
    if y.size and (y.min() < 0 or y.max() > 9):
        raise DataError(f"{name}: labels outside 0..9")
    return x, y


def read_cifar10(archive: str | Path) -> dict[str, ImageSet]:
    """``train`` (five batches) and ``test`` from CIFAR-10's python tar.gz (or a folder holding
    the batch files), as ``(N, 32, 32, 3)`` images."""
    archive = Path(archive)
    raw: dict[str, bytes] = {}
    wanted = {b for bs in _CIFAR_BATCHES.values() for b in bs}
    if archive.is_dir():
        for b in wanted:
            if (archive / b).exists():
                raw[b] = (archive / b).read_bytes()
    else:
        try:
            with tarfile.open(archive, "r:gz") as tf:
                for m in tf.getmembers():
                    if m.isfile() and Path(m.name).name in wanted:
                        raw[Path(m.name).name] = tf.extractfile(m).read()
        except (tarfile.TarError, OSError, EOFError) as err:
            raise DataError(f"{archive}: not a complete tar.gz ({err}); delete it and fetch "
                            "again") from err  # fmt: skip
    out = {}
    for split, names in _CIFAR_BATCHES.items():
        missing = [b for b in names if b not in raw]
        if missing:
            raise DataError(f"{archive}: missing {', '.join(missing)}")
        parts = [_read_batch(raw[b], f"{archive.name}:{b}") for b in names]
        x = np.concatenate([p[0] for p in parts]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        y = np.concatenate([p[1] for p in parts]).astype(np.int32)
        out[split] = ImageSet(x.astype(np.float32) / 255.0, y, f"CIFAR-10 {split}")
    return out


def fetch_cifar10(
    folder: str | Path | None = None,
    *,
    urls: Sequence[str] = CIFAR10_URLS,
    known_hash: str = CIFAR10_MD5,
) -> dict[str, ImageSet]:
    """CIFAR-10's ``train`` (50,000) and ``test`` (10,000): the python tar.gz fetched into
    ``folder`` (default ``cache_dir("cifar10")``), hash-verified (the published MD5), batches
    checked."""
    folder = cache_dir("cifar10") if folder is None else Path(folder)
    path = fetch(list(urls), known_hash=known_hash, cache_dir=folder,
                 fname="cifar-10-python.tar.gz", resume=True)  # 170 MB: resumable  # fmt: skip
    return read_cifar10(path)
