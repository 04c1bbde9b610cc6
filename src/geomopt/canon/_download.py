"""Get the ModelNet HDF5 data: download the 2048-point ModelNet40 archive with resume, check it,
unpack it atomically, and derive ModelNet10 from it as the official code does.

The download is :func:`geomopt.fetch.fetch` (pooch, with its resuming downloader: a cut
connection or a Ctrl-C keeps ``<archive>.part`` and the same command continues it). What stays
here is what pooch does not do: the content checks of an archive with no published hash, an
unpacking that appears under its final name only once verified (``pooch.Unzip`` extracts in
place and checks nothing), the ModelNet10 derivation, and a lock on the cache folder.

The archive is the PointNet release ``modelnet40_ply_hdf5_2048.zip``: a folder
``modelnet40_ply_hdf5_2048/`` with ``ply_data_train{0..4}.h5`` and ``ply_data_test{0,1}.h5``
(keys ``data`` N x 2048 x 3 float32 and ``label`` N x 1), ``shape_names.txt``,
``train_files.txt`` and ``test_files.txt``; 9840 training and 2468 test clouds of 40 classes.
Its original host (``STANFORD_URL``) has been unreachable for long stretches since 2023; the
default URL is the Hugging Face mirror that public point-cloud code now uses.

What the official code (github.com/yonatansverdlov/Canonization) does:

- ModelNet40 for training (``ModelNet/training/utils/data.py``, README "Training Experiments"):
  these HDF5 shards, fetched by hand from Kaggle (datasets/leiting0/modelnet40, a login is
  needed) into ``ModelNet/training/data/modelnet40_ply_hdf5_2048/``. No URL, no checksum.
- ModelNet10 for training (``ModelNet/training/utils/create_h5_modelnet10_from_raw.py``): the
  raw ModelNet40 *meshes* of the ten ModelNet10 classes (bathtub, bed, chair, desk, dresser,
  monitor, night_stand, sofa, table, toilet; labels 0..9 in that order), 2048 points each
  sampled on the surface (PyG ``SamplePoints``), centred and scaled to the unit sphere, written
  as ``modelnet10_ply_hdf5_2048/ply_data_{train,test}0.h5`` (``data`` float32, ``label`` int64
  N x 1) and ``shape_names.txt``. :func:`derive_modelnet10` does the same selection and
  relabelling on the HDF5 clouds of those classes, whose points are the PointNet release's own
  surface samples of the same meshes, normalised to the unit sphere: 3991 training and 908 test
  clouds (all of ModelNet40's clouds of those classes; the three clouds the HDF5 release lacks
  against the 9843 meshes are an airplane, a curtain and a plant).

Checks: no checksum of the archive is published in the official repository, so none is
enforced; the archive is verified by content instead: zip CRCs (checked while unpacking), the
expected files, the HDF5 keys, shapes, dtypes and label range, and the cloud counts
(:func:`verify_folder`, in :mod:`geomopt.canon._modelnet_folder` with the folder layouts). The
MD5s of the seven shards as public loaders list them (``STANFORD_MD5`` there; torchvision-style
``check_integrity`` tables) are compared and reported, not enforced: a mirror that re-packed
valid data would otherwise be refused.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from geomopt.canon._modelnet_folder import (
    MODELNET10,
    MODELNET10_CLASSES,
    MODELNET40,
    ArchiveSpec,
    DataCheckError,
    _md5,
    _read_lines,
    verify_folder,
)
from geomopt.fetch import cache_dir as _cache_folder
from geomopt.fetch import fetch

__all__ = [
    "MODELNET40_URL",
    "STANFORD_URL",
    "ArchiveSpec",
    "MODELNET40",
    "MODELNET10",
    "MODELNET10_CLASSES",
    "DownloadError",
    "DataCheckError",
    "default_cache_dir",
    "unpack_archive",
    "verify_folder",
    "derive_modelnet10",
    "prepare_modelnet",
    "next_commands",
]

MODELNET40_URL = (
    "https://huggingface.co/datasets/Msun/modelnet40/resolve/main/modelnet40_ply_hdf5_2048.zip"
)
"""Default source: the Hugging Face mirror of the PointNet release."""
STANFORD_URL = "https://shapenet.cs.stanford.edu/media/modelnet40_ply_hdf5_2048.zip"
"""The original host of the release (often unreachable)."""

ZIP_MAGIC = b"PK\x03\x04"


class DownloadError(OSError):
    """The cache folder is in use by another run; the message says which and what to do.
    (A failed download is a :class:`geomopt.fetch.FetchError`.)"""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/geomopt/modelnet`` (``XDG_CACHE_HOME`` defaults to ``~/.cache``)."""
    return _cache_folder("modelnet")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- unpacking


def _new_temp_dir(parent: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent))


def unpack_archive(
    archive: str | Path, cache_dir: str | Path, spec: ArchiveSpec = MODELNET40, *,
    progress: bool = True,
) -> Path:  # fmt: skip
    """Unpack ``archive`` into ``cache_dir/spec.folder`` and verify it; returns that folder.

    The members under the folder holding ``spec.train_files[0]`` are written (with their CRCs
    checked) into a temporary sibling, verified by :func:`verify_folder`, and only then renamed
    to ``spec.folder``: a failure leaves no folder that looks valid. Raises
    :class:`DataCheckError` naming the archive when it is not a zip of that layout.
    """
    from tqdm.auto import tqdm

    archive, cache_dir = Path(archive), Path(cache_dir)
    target = cache_dir / spec.folder
    if target.exists():
        raise FileExistsError(f"{target}: already exists; move it away to unpack {archive}")
    tmp = _new_temp_dir(cache_dir, spec.folder)
    try:
        try:
            z = zipfile.ZipFile(archive)
        except zipfile.BadZipFile as e:
            raise DataCheckError(
                f"{archive}: not a complete zip archive ({e}); expected {spec.folder}.zip"
            ) from None
        with z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            marker = spec.train_files[0]
            prefixes = [i.filename[: -len(marker)] for i in infos
                        if i.filename.rsplit("/", 1)[-1] == marker]  # fmt: skip
            if len(prefixes) != 1:
                raise DataCheckError(
                    f"{archive}: {len(prefixes)} copies of {marker}, expected one in a folder "
                    f"{spec.folder}/ with {', '.join(spec.train_files + spec.test_files)}"
                )
            prefix = prefixes[0]
            members = [i for i in infos if i.filename.startswith(prefix)
                       and "__MACOSX" not in i.filename]  # fmt: skip
            size = sum(i.file_size for i in members)
            with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024,
                      desc="unpacking", disable=not progress, leave=False) as bar:  # fmt: skip
                for info in members:
                    rel = Path(info.filename[len(prefix) :])
                    if rel.is_absolute() or ".." in rel.parts:
                        raise DataCheckError(f"{archive}: unsafe member path {info.filename!r}")
                    out = tmp / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        with z.open(info) as src, open(out, "wb") as dst:
                            while block := src.read(1 << 22):
                                dst.write(block)
                                bar.update(len(block))
                    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
                        raise DataCheckError(
                            f"{archive}: member {info.filename} is damaged ({e}); expected "
                            f"an intact {spec.folder}.zip (delete it and download again)"
                        ) from None
        try:
            verify_folder(tmp, spec)
        except DataCheckError as e:  # name the archive's member, not the temporary copy
            where = f"{archive}: member {prefix}"
            msg = str(e).replace(f"{tmp}{os.sep}", where).replace(str(tmp), where.rstrip("/"))
            raise DataCheckError(msg) from None
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def derive_modelnet10(
    src: str | Path, cache_dir: str | Path, spec: ArchiveSpec = MODELNET10,
    src_spec: ArchiveSpec = MODELNET40,
) -> Path:  # fmt: skip
    """``cache_dir/modelnet10_ply_hdf5_2048`` from the ModelNet40 folder ``src``: the clouds of
    :data:`MODELNET10_CLASSES` (found by name in ``shape_names.txt``), relabelled 0..9 in that
    order, in one shard per split (``data`` float32, ``label`` int64 N x 1, as the official
    ``create_h5_modelnet10_from_raw.py`` writes), with ``shape_names.txt`` and the file lists.
    Written into a temporary sibling, verified, then renamed."""
    import h5py

    src, cache_dir = Path(src), Path(cache_dir)
    names40 = _read_lines(src / "shape_names.txt")
    missing = [c for c in MODELNET10_CLASSES if c not in names40]
    if missing:
        raise DataCheckError(f"{src / 'shape_names.txt'}: no class {missing}; expected ModelNet40")
    relabel = np.full(len(names40), -1, np.int64)
    relabel[[names40.index(c) for c in MODELNET10_CLASSES]] = np.arange(len(MODELNET10_CLASSES))
    target = cache_dir / spec.folder
    if target.exists():
        raise FileExistsError(f"{target}: already exists; move it away to rebuild it")
    tmp = _new_temp_dir(cache_dir, spec.folder)
    try:
        for split, (files, _) in spec.splits.items():
            xs, ys = [], []
            for name in src_spec.splits[split][0]:
                with h5py.File(src / name, "r") as f:
                    y = relabel[np.asarray(f["label"]).reshape(-1)]
                    keep = np.flatnonzero(y >= 0)
                    xs.append(np.asarray(f["data"], np.float32)[keep])
                    ys.append(y[keep])
            with h5py.File(tmp / files[0], "w") as f:
                f.create_dataset("data", data=np.concatenate(xs))
                f.create_dataset("label", data=np.concatenate(ys)[:, None])
            (tmp / f"{split}_files.txt").write_text("".join(f"{n}\n" for n in files))
        (tmp / "shape_names.txt").write_text("".join(f"{c}\n" for c in MODELNET10_CLASSES))
        verify_folder(tmp, spec)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# --------------------------------------------------------------------------- front


def next_commands(dataset: str, cache_dir: str | Path) -> list[str]:
    """The commands that read the prepared data (classification, then the covering proxies)."""
    root = shlex.quote(str(cache_dir))
    preset = "paper" if dataset == "modelnet10" else "paper40"
    return [
        f"uv run experiments/canon/modelnet.py {preset} --data-root {root}",
        f"uv run experiments/canon/covering.py paper --modelnet-dir {root} "
        f"--modelnet-dataset {dataset}",
    ]


def _summary(spec: ArchiveSpec, counts: dict[str, int]) -> str:
    return f"{counts['train']} train / {counts['test']} test clouds, {spec.n_classes} classes"


def _ready(folder: Path, spec: ArchiveSpec, what: str) -> dict[str, int] | None:
    """The counts of an existing verified ``folder`` (None if absent); an existing folder that
    fails the checks is kept and reported."""
    if not folder.exists():
        return None
    try:
        return verify_folder(folder, spec)
    except DataCheckError as e:
        raise DataCheckError(
            f"{e} -- {folder} exists but is not a valid {what} folder; it was left as it is: "
            "move it away and rerun"
        ) from None


@contextlib.contextmanager
def _lock(cache_dir: Path):
    """Hold an exclusive ``flock`` on ``cache_dir/.prepare.lock`` while the block runs. The
    system drops the lock when its process dies, so a lock file left by a killed run is
    simply taken over."""
    import fcntl

    path = cache_dir / ".prepare.lock"
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DownloadError(
                f"{cache_dir}: in use by another prepare_modelnet.py; wait for it to finish"
            ) from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def prepare_modelnet(
    dataset: str = "modelnet40",
    cache_dir: str | Path | None = None,
    url: str = MODELNET40_URL,
    *,
    spec40: ArchiveSpec = MODELNET40,
    spec10: ArchiveSpec = MODELNET10,
    retries: int = 5,
    retry_wait: float = 2.0,
    timeout: float = 60.0,
    progress: bool = True,
    say: Callable[[str], None] = _say,
) -> Path:
    """Make ``cache_dir/modelnet40_ply_hdf5_2048`` (and for ``dataset="modelnet10"`` also
    ``cache_dir/modelnet10_ply_hdf5_2048``) exist and pass :func:`verify_folder`; returns
    ``cache_dir``, the ``--data-root`` / ``--modelnet-dir`` of the experiments.

    An existing verified folder is reused without any request; an archive already in
    ``cache_dir`` (downloaded before, or put there by hand) is unpacked without downloading;
    otherwise the archive is downloaded with resume (:func:`geomopt.fetch.fetch`). An archive
    this call downloaded is deleted once its folder is verified, or when it fails the checks; a
    file the user had is never deleted. Creates ``cache_dir`` if needed and removes it again if the
    call fails and leaves it empty. A lock file (``.prepare.lock``) keeps two runs from sharing
    one ``cache_dir``; temporary folders of an interrupted run are removed.
    """
    if dataset not in ("modelnet40", "modelnet10"):
        raise ValueError(f"dataset {dataset!r}: expected 'modelnet40' or 'modelnet10'")
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    if cache_dir.exists() and not cache_dir.is_dir():
        raise NotADirectoryError(f"cache_dir {cache_dir}: exists and is not a folder")
    cache_dir = cache_dir.absolute()
    created = [d for d in (cache_dir, *cache_dir.parents) if not d.exists()]  # deepest first
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = cache_dir.resolve()
    try:
        with _lock(cache_dir):
            for spec in (spec40, spec10):
                for stale in cache_dir.glob(f".{spec.folder}.tmp-*"):
                    say(f"removing {stale}, an unfinished unpacking left by an interrupted run")
                    shutil.rmtree(stale, ignore_errors=True)
            _prepare(dataset, cache_dir, url, spec40, spec10, retries, retry_wait, timeout,
                     progress, say)  # fmt: skip
    except BaseException:
        for folder in created:  # the folders this call made, while they are empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    return cache_dir


def _prepare(dataset, cache_dir, url, spec40, spec10, retries, retry_wait, timeout, progress,
             say) -> None:  # fmt: skip
    folder40 = cache_dir / spec40.folder
    if dataset == "modelnet10":
        counts = _ready(cache_dir / spec10.folder, spec10, "ModelNet10")
        if counts is not None:
            say(f"modelnet10: reusing the verified cache {cache_dir / spec10.folder} "
                f"({_summary(spec10, counts)}); nothing downloaded")  # fmt: skip
            return
    counts = _ready(folder40, spec40, "ModelNet40")
    if counts is not None:
        say(f"modelnet40: reusing the verified cache {folder40} ({_summary(spec40, counts)}); "
            "nothing downloaded")  # fmt: skip
    else:
        archive = cache_dir / f"{spec40.folder}.zip"
        ours = not archive.exists()
        if ours:
            say(f"modelnet40: downloading {url} into {cache_dir}")
            fetch(url, known_hash=None, cache_dir=cache_dir, fname=archive.name, resume=True,
                  starts_with=ZIP_MAGIC, expected=f"the zip archive {archive.name}",
                  retries=retries, retry_wait=retry_wait, timeout=timeout, progress=progress,
                  say=say)  # fmt: skip
        else:
            say(f"modelnet40: unpacking the archive already in the cache, {archive}")
        try:
            unpack_archive(archive, cache_dir, spec40, progress=progress)
        except DataCheckError as e:
            if ours:
                archive.unlink(missing_ok=True)
                raise DataCheckError(f"{e} (downloaded from {url}; deleted)") from None
            raise DataCheckError(
                f"{e}; it was left as it is: delete it to download again"
            ) from None
        if ours:
            archive.unlink()
        counts = verify_folder(folder40, spec40)
        say(f"modelnet40: verified {folder40} ({_summary(spec40, counts)})")
        if spec40.md5:
            differ = [n for n, h in spec40.md5.items() if _md5(folder40 / n) != h]
            say("modelnet40: the shards' MD5s match the Stanford release" if not differ else
                f"modelnet40: note: {', '.join(differ)} differ from the Stanford release's MD5 "
                "(content checks passed; a re-packed mirror?)")  # fmt: skip
    if dataset == "modelnet10":
        folder10 = derive_modelnet10(folder40, cache_dir, spec10, spec40)
        counts = verify_folder(folder10, spec10)
        say(f"modelnet10: derived {folder10} from ModelNet40 ({_summary(spec10, counts)})")
