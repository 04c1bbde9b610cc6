"""Image loaders: IDX / amat / CIFAR-10 readers on files the tests write, the fetches against a
127.0.0.1 server (hash-verified, damaged files named), scikit-learn digits offline, rotation."""

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import zipfile

import numpy as np
import pytest

from geomopt import vision
from geomopt.fetch import FetchError


def idx_bytes(arr: np.ndarray) -> bytes:
    head = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def md5(b: bytes) -> str:
    return "md5:" + hashlib.md5(b).hexdigest()


def test_read_idx_round_trips_and_names_a_cut_file(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    (tmp_path / "a.gz").write_bytes(gzip.compress(idx_bytes(arr)))
    np.testing.assert_array_equal(vision.read_idx(tmp_path / "a.gz"), arr)
    (tmp_path / "cut").write_bytes(idx_bytes(arr)[:-5])
    with pytest.raises(vision.DataError, match="cut.*header says"):
        vision.read_idx(tmp_path / "cut")
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04" + bytes(10))
    with pytest.raises(vision.DataError, match="not an IDX file"):
        vision.read_idx(tmp_path / "bad")


def mnist_files(n_train=5, n_test=3):
    rng = np.random.default_rng(0)
    files = {}
    for stem, n in (("train", n_train), ("t10k", n_test)):
        files[f"{stem}-images-idx3-ubyte.gz"] = gzip.compress(
            idx_bytes(rng.integers(0, 256, (n, 28, 28))))
        files[f"{stem}-labels-idx1-ubyte.gz"] = gzip.compress(idx_bytes(rng.integers(0, 10, n)))
    return files


def test_fetch_mnist_from_a_local_server(file_server, tmp_path):
    files = mnist_files()
    srv = file_server({f"m/{k}": v for k, v in files.items()})
    hashes = {k: md5(v) for k, v in files.items()}
    data = vision.fetch_mnist(tmp_path, mirrors=[srv.url("m/")], hashes=hashes)
    assert data["train"].x.shape == (5, 28, 28, 1) and len(data["test"]) == 3
    assert 0 <= data["train"].x.min() and data["train"].x.max() <= 1
    again = vision.fetch_mnist(tmp_path, mirrors=[srv.url("m/")], hashes=hashes)
    np.testing.assert_array_equal(again["train"].y, data["train"].y)
    assert srv.requests[f"m/{next(iter(files))}"] == 1  # cached, not fetched again


def test_fetch_mnist_refuses_a_file_with_the_wrong_hash(file_server, tmp_path):
    files = mnist_files()
    srv = file_server({f"m/{k}": v for k, v in files.items()})
    hashes = {k: md5(v + b"x") for k, v in files.items()}
    with pytest.raises(FetchError, match="does not match"):
        vision.fetch_mnist(tmp_path, mirrors=[srv.url("m/")], hashes=hashes)


def amat(n, rng):
    x = rng.random((n, 784))
    y = rng.integers(0, 10, n)
    return "\n".join(" ".join(f"{v:.6f}" for v in row) + f" {lab}" for row, lab in
                     zip(x, y, strict=True)).encode() + b"\n"  # fmt: skip


def test_read_amat_checks_columns_and_range():
    rng = np.random.default_rng(1)
    s = vision.read_amat(amat(4, rng), name="t")
    assert s.x.shape == (4, 28, 28, 1) and s.y.dtype == np.int32
    with pytest.raises(vision.DataError, match="columns"):
        vision.read_amat(b"0.1 0.2 3\n", name="t")
    with pytest.raises(vision.DataError, match="outside"):
        vision.read_amat(b" ".join([b"2.0"] * 784) + b" 1\n", name="t")


def test_fetch_mnist_rot_verifies_the_official_sizes(file_server, tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mnist_all_rotation_normalized_float_train_valid.amat", amat(6, rng))
        zf.writestr("mnist_all_rotation_normalized_float_test.amat", amat(4, rng))
    srv = file_server({"rot.zip": buf.getvalue()})
    monkeypatch.setattr(vision._data, "MNIST_ROT_SIZES", {"train": 6, "test": 4})
    data = vision.fetch_mnist_rot(tmp_path / "a", urls=[srv.url("rot.zip")])
    assert len(data["train"]) == 6 and len(data["test"]) == 4
    monkeypatch.setattr(vision._data, "MNIST_ROT_SIZES", {"train": 12_000, "test": 50_000})
    with pytest.raises(vision.DataError, match="6 images, expected 12000"):
        vision.fetch_mnist_rot(tmp_path / "a", urls=[srv.url("rot.zip")])
    srv2 = file_server({"rot.zip": b"not a zip"})  # refused before anything is cached
    with pytest.raises(FetchError, match=r"sent a file starting b'not a zip', expected a zip"):
        vision.fetch_mnist_rot(tmp_path / "b", urls=[srv2.url("rot.zip")])
    assert list((tmp_path / "b").iterdir()) == []
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "mnist_rotation_new.zip").write_bytes(b"not a zip")  # put there by hand
    with pytest.raises(vision.DataError, match="not a zip"):
        vision.fetch_mnist_rot(tmp_path / "c", urls=[srv2.url("rot.zip")])


def cifar_tar(n=4, labels=None):
    rng = np.random.default_rng(3)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            y = [int(v) for v in rng.integers(0, 10, n)] if labels is None else labels
            d = {b"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), b"labels": y}
            raw = pickle.dumps(d)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def test_fetch_cifar10_from_a_local_server(file_server, tmp_path):
    raw = cifar_tar()
    srv = file_server({"c.tar.gz": raw})
    data = vision.fetch_cifar10(tmp_path, urls=[srv.url("c.tar.gz")], known_hash=md5(raw))
    assert data["train"].x.shape == (20, 32, 32, 3) and data["test"].x.shape == (4, 32, 32, 3)
    # channels-last from the row-major (3, 32, 32) layout: pixel (0, 0) of the first image
    d = pickle.loads(tarfile.open(fileobj=io.BytesIO(raw)).extractfile(
        "cifar-10-batches-py/data_batch_1").read())  # fmt: skip
    np.testing.assert_allclose(data["train"].x[0, 0, 0], d[b"data"][0, [0, 1024, 2048]] / 255)


def test_read_cifar10_names_a_missing_batch_a_cut_archive_and_bad_labels(tmp_path):
    raw = cifar_tar()
    (tmp_path / "cut.tar.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(vision.DataError, match="cut.tar.gz"):
        vision.read_cifar10(tmp_path / "cut.tar.gz")
    (tmp_path / "bad.tar.gz").write_bytes(cifar_tar(labels=[0, 1, 2, 11]))
    with pytest.raises(vision.DataError, match="labels outside"):
        vision.read_cifar10(tmp_path / "bad.tar.gz")
    folder = tmp_path / "batches"
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
        (folder / "test_batch").write_bytes(tf.extractfile("cifar-10-batches-py/test_batch").read())
    with pytest.raises(vision.DataError, match="missing data_batch_1"):
        vision.read_cifar10(folder)


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    folder = tmp_path / "evil"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(pickle.dumps({b"data": Evil(), b"labels": []}))
    with pytest.raises(vision.DataError, match="not allowed"):
        vision.read_cifar10(folder)


def test_sklearn_digits_on_a_mnist_canvas_and_exact_quarter_turns():
    d = vision.sklearn_digits()
    assert d.x.shape == (1797, 28, 28, 1) and set(np.unique(d.y)) == set(range(10))
    assert d.x[:, :4].max() == 0 and d.x[:, -4:].max() == 0  # the 4-pixel border is black
    r = vision.rotate(d.x[:3], [90.0, 180.0, -90.0])
    np.testing.assert_array_equal(r[0], np.rot90(d.x[0], 1))
    np.testing.assert_array_equal(r[2], np.rot90(d.x[2], 3))
    r45 = vision.rotate(d.x[:2], [45.0, 30.0])
    assert r45.shape == (2, 28, 28, 1) and 0 <= r45.min() and r45.max() <= 1
    assert abs(r45[0].sum() - d.x[0].sum()) / d.x[0].sum() < 0.05  # nothing clipped off


def test_prepare_images_tool_fetches_verifies_and_names_a_failure(file_server, tmp_path,
                                                                  monkeypatch, capsys):  # fmt: skip
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "prepare_images", Path(__file__).parents[2] / "experiments" / "prepare_images.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    rng = np.random.default_rng(5)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mnist_all_rotation_normalized_float_train_valid.amat", amat(3, rng))
        zf.writestr("mnist_all_rotation_normalized_float_test.amat", amat(2, rng))
    srv = file_server({"r.zip": buf.getvalue()})
    monkeypatch.setattr(vision._data, "MNIST_ROT_SIZES", {"train": 3, "test": 2})
    argv = ["mnist_rot", "--folder", str(tmp_path / "a"), "--url", srv.url("r.zip")]
    assert tool.tool_main("prepare_images.py", tool.main, lambda a: tool.tyro.cli(
        tool.Config, args=a), argv) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "ready and verified: train 3 images" in out and "rotated_digits.py paper" in out
    argv = ["mnist_rot", "--folder", str(tmp_path / "b"), "--url", srv.url("missing.zip")]
    assert tool.tool_main("prepare_images.py", tool.main, lambda a: tool.tyro.cli(
        tool.Config, args=a), argv) != 0  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "404" in err[0]
