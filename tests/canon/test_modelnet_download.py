"""The ModelNet download tool against a local HTTP server: a fresh download read by the loader,
resume after a cut connection (in the same run and in a later one), a server that ignores Range,
Ctrl-C, wrong files refused without leaving a folder, and reuse of what is already there."""

import dataclasses
import hashlib
import http.server
import importlib.util
import io
import re
import signal
import threading
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from geomopt.canon._data import load_modelnet
from geomopt.canon._download import (
    MODELNET10,
    MODELNET10_CLASSES,
    MODELNET40,
    ZIP_MAGIC,
    DataCheckError,
    DownloadError,
    next_commands,
    prepare_modelnet,
)
from geomopt.fetch import FetchError, fetch

NAMES40 = (
    "airplane bathtub bed bench bookshelf bottle bowl car chair cone cup curtain desk door dresser "
    "flower_pot glass_box guitar keyboard lamp laptop mantel monitor night_stand person piano "
    "plant radio range_hood sink sofa stairs stool table tent toilet tv_stand vase wardrobe xbox"
).split()
N_POINTS = 32
SHARD_SIZES = {"train": (3, 3, 3, 3, 2), "test": (3, 2)}


class Server:
    """``http.server`` on 127.0.0.1 in a thread serving one payload, with Range support that
    can be switched off, a connection cut after ``cut_after`` bytes (next response only), and a
    stall after ``stall_after`` bytes until ``release`` is set. ``requests`` records the Range
    header of every request (None when absent)."""

    def __init__(self, payload: bytes, content_type: str = "application/zip"):
        self.payload, self.content_type = payload, content_type
        self.ignore_range = False
        self.cut_after: int | None = None
        self.stall_after: int | None = None
        self.stalled, self.release = threading.Event(), threading.Event()
        self.requests: list[str | None] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                server.requests.append(rng)
                data, start = server.payload, 0
                if rng and not server.ignore_range:
                    start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Type", server.content_type)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                cut, server.cut_after = server.cut_after, None
                if cut is not None:
                    self.wfile.write(body[:cut])
                    return  # HTTP/1.0: the connection closes here, short of Content-Length
                if server.stall_after is not None:
                    self.wfile.write(body[: server.stall_after])
                    self.wfile.flush()
                    server.stalled.set()
                    server.release.wait(10)
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/modelnet40_ply_hdf5_2048.zip"

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _h5_bytes(x, y, data_dtype=np.float32) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f["data"] = x.astype(data_dtype)
        f["label"] = y
    return buf.getvalue()


def make_archive(*, data_dtype=np.float32, prefix="modelnet40_ply_hdf5_2048/"):
    """A small zip with the release's layout; returns ``(bytes, {split: (x, y)}, md5s)``."""
    rng = np.random.default_rng(0)
    members, arrays, md5 = {}, {}, {}
    for split, sizes in SHARD_SIZES.items():
        xs, ys = [], []
        for i, n in enumerate(sizes):
            x = rng.standard_normal((n, N_POINTS, 3)).astype(np.float32)
            y = rng.integers(0, 40, size=(n, 1)).astype(np.uint8)
            y[0] = NAMES40.index(MODELNET10_CLASSES[i % 10])  # every shard has a ModelNet10 cloud
            members[f"ply_data_{split}{i}.h5"] = _h5_bytes(x, y, data_dtype)
            md5[f"ply_data_{split}{i}.h5"] = hashlib.md5(
                members[f"ply_data_{split}{i}.h5"]
            ).hexdigest()
            xs.append(x)
            ys.append(y.reshape(-1))
        arrays[split] = (np.concatenate(xs), np.concatenate(ys))
        members[f"{split}_files.txt"] = "".join(
            f"data/modelnet40_ply_hdf5_2048/ply_data_{split}{i}.h5\n" for i in range(len(sizes))
        ).encode()
    members["shape_names.txt"] = "".join(f"{n}\n" for n in NAMES40).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in members.items():
            z.writestr(prefix + name, blob)
    return buf.getvalue(), arrays, md5


ARCHIVE, ARRAYS, MD5 = make_archive()
SPEC40 = dataclasses.replace(MODELNET40, n_points=N_POINTS, n_train=14, n_test=5, md5=MD5)
IS10 = {s: np.isin(ARRAYS[s][1], [NAMES40.index(c) for c in MODELNET10_CLASSES]) for s in ARRAYS}
SPEC10 = dataclasses.replace(MODELNET10, n_points=N_POINTS, n_train=int(IS10["train"].sum()),
                             n_test=int(IS10["test"].sum()))  # fmt: skip


@pytest.fixture
def server():
    s = Server(ARCHIVE)
    yield s
    s.close()


def prepare(server, cache, dataset="modelnet40", messages=None, **kw):
    return prepare_modelnet(
        dataset, cache, server.url, spec40=kw.pop("spec40", SPEC40), spec10=SPEC10,
        retry_wait=0.0, timeout=5.0, progress=False,
        say=(messages.append if messages is not None else lambda m: None), **kw,
    )  # fmt: skip


def test_fresh_download_is_verified_and_read_by_the_loader(server, tmp_path):
    messages = []
    root = prepare(server, tmp_path / "cache", messages=messages)
    assert root == (tmp_path / "cache").resolve()
    assert [p.name for p in root.iterdir()] == ["modelnet40_ply_hdf5_2048"]  # no zip, part, tmp
    assert server.requests == [None]
    xtr, ytr, xte, yte = load_modelnet(root, "modelnet40", n_points=N_POINTS // 2)
    np.testing.assert_array_equal(xtr, ARRAYS["train"][0][:, ::2])
    np.testing.assert_array_equal(ytr, ARRAYS["train"][1])
    np.testing.assert_array_equal(xte, ARRAYS["test"][0][:, ::2])
    np.testing.assert_array_equal(yte, ARRAYS["test"][1])
    assert any("verified" in m and "14 train / 5 test" in m for m in messages)
    assert any("MD5s match" in m for m in messages)


def test_modelnet10_is_the_ten_classes_relabelled_in_official_order(server, tmp_path):
    root = prepare(server, tmp_path / "cache", dataset="modelnet10")
    xtr, ytr, xte, yte = load_modelnet(root, "modelnet10", n_points=N_POINTS)
    for split, (x, y) in {"train": (xtr, ytr), "test": (xte, yte)}.items():
        x40, y40 = ARRAYS[split]
        keep = IS10[split]
        np.testing.assert_array_equal(x, x40[keep])
        expected = [MODELNET10_CLASSES.index(NAMES40[k]) for k in y40[keep]]
        assert y.tolist() == expected and set(expected) <= set(range(10))
    folder = root / "modelnet10_ply_hdf5_2048"
    assert (folder / "shape_names.txt").read_text().split() == list(MODELNET10_CLASSES)
    with h5py.File(folder / "ply_data_train0.h5") as f:
        assert f["label"].shape == (len(ytr), 1) and f["label"].dtype == np.int64
    assert next_commands("modelnet10", root)[0] == (
        f"uv run experiments/canon/modelnet.py paper --data-root {root}"
    )


def download(url, dest, *, retries=5, retry_wait=0.0, progress=False, say=lambda m: None):
    """The archive download as :func:`prepare_modelnet` makes it (pooch, resuming)."""
    return fetch(url, known_hash=None, cache_dir=dest.parent, fname=dest.name, resume=True,
                 starts_with=ZIP_MAGIC, retries=retries, retry_wait=retry_wait, timeout=5.0,
                 progress=progress, say=say)  # fmt: skip


def test_a_cut_connection_is_retried_from_where_it_stopped(server, tmp_path):
    cut = len(ARCHIVE) // 3
    server.cut_after = cut
    dest = download(server.url, tmp_path / "a.zip", retries=2, retry_wait=0.0, progress=False,
                    say=lambda m: None)  # fmt: skip
    assert server.requests == [None, f"bytes={cut}-"]
    assert dest.read_bytes() == ARCHIVE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip"]


def test_a_later_run_resumes_the_kept_part(server, tmp_path):
    cut = len(ARCHIVE) // 2
    server.cut_after = cut
    with pytest.raises(FetchError, match="rerun the same command to resume") as err:
        download(server.url, tmp_path / "a.zip", retries=0, progress=False, say=lambda m: None)
    assert "\n" not in str(err.value)
    part = tmp_path / "a.zip.part"
    assert part.read_bytes() == ARCHIVE[:cut]
    dest = download(server.url, tmp_path / "a.zip", progress=False, say=lambda m: None)
    assert server.requests == [None, f"bytes={cut}-"]
    assert dest.read_bytes() == ARCHIVE and not part.exists()


def test_a_server_that_ignores_range_restarts_cleanly(server, tmp_path):
    messages = []
    server.cut_after = 1000
    with pytest.raises(FetchError):
        download(server.url, tmp_path / "a.zip", retries=0, progress=False, say=messages.append)
    server.ignore_range = True
    dest = download(server.url, tmp_path / "a.zip", progress=False, say=messages.append)
    assert server.requests == [None, "bytes=1000-"]
    assert dest.read_bytes() == ARCHIVE  # not the first 1000 bytes twice
    assert any("ignored the Range request" in m for m in messages)


def test_ctrl_c_keeps_the_part_for_the_next_run(server, tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    server.stall_after = len(ARCHIVE) // 4
    main = threading.main_thread().ident

    def press_ctrl_c():
        server.stalled.wait(10)
        threading.Event().wait(0.3)  # let the client write what arrived
        signal.pthread_kill(main, signal.SIGINT)

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    messages = []
    try:
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            download(server.url, tmp_path / "a.zip", progress=False, say=messages.append)
    finally:
        signal.signal(signal.SIGINT, old)
    server.release.set()
    part = (tmp_path / "a.zip.part").read_bytes()
    assert 0 < len(part) and ARCHIVE.startswith(part)
    assert any("kept" in m and "rerun the same command" in m for m in messages)
    server.stall_after = None
    assert download(server.url, tmp_path / "a.zip", progress=False).read_bytes() == ARCHIVE
    assert server.requests[-1] == f"bytes={len(part)}-"


def _load_tool():
    path = Path(__file__).parents[2] / "experiments" / "canon" / "prepare_modelnet.py"
    spec = importlib.util.spec_from_file_location("prepare_modelnet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_html_page_is_refused_in_one_line_and_leaves_no_folder(tmp_path, capsys):
    from geomopt.experiment import tool_main

    page = b"<!DOCTYPE html><html><body>Service Unavailable</body></html>"
    server = Server(page, content_type="text/html")
    tool = _load_tool()
    cache = tmp_path / "cache"
    try:
        argv = ["--cache-dir", str(cache), "--url", server.url, "--retries", "0"]
        status = tool_main("prepare_modelnet.py", tool.main, lambda a: tool.tyro.cli(
            tool.Config, args=a), argv=argv)  # fmt: skip
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert err[-1].startswith("prepare_modelnet.py: error: ") and server.url in err[-1]
    assert "text/html" in err[-1] and "modelnet40_ply_hdf5_2048.zip" in err[-1]
    assert not cache.exists()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return buf.getvalue()


def _corrupt_member(archive: bytes) -> bytes:
    """Flip one byte inside the stored data of ply_data_train0.h5 (its CRC no longer matches)."""
    z = zipfile.ZipFile(io.BytesIO(archive))
    info = z.getinfo("modelnet40_ply_hdf5_2048/ply_data_train0.h5")
    offset = info.header_offset + 30 + len(info.filename) + len(info.extra) + 100
    data = bytearray(archive)
    data[offset] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    ("payload", "spec", "message"),
    [
        (ARCHIVE[: len(ARCHIVE) // 2], SPEC40, "not a complete zip archive"),
        (_corrupt_member(ARCHIVE), SPEC40, "ply_data_train0.h5 is damaged|not a complete zip"),
        (_zip({"readme.txt": b"hello"}), SPEC40, "0 copies of ply_data_train0.h5"),
        (
            make_archive(data_dtype=np.float64)[0],
            SPEC40,
            r"zip: member modelnet40_ply_hdf5_2048/ply_data_train0.h5: data \(3, 32, 3\) float64",
        ),
        (ARCHIVE, dataclasses.replace(SPEC40, n_train=9840), "14 train clouds .* expected 9840"),
    ],
    ids=["truncated", "bad-crc", "wrong-layout", "wrong-dtype", "wrong-count"],
)
def test_wrong_archives_are_refused_and_leave_nothing(tmp_path, payload, spec, message):
    server = Server(payload)
    cache = tmp_path / "new" / "cache"
    try:
        with pytest.raises(DataCheckError, match=message) as err:
            prepare(server, cache, spec40=spec)
    finally:
        server.close()
    assert "\n" not in str(err.value) and "modelnet40_ply_hdf5_2048.zip" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no folder made, no temporary folder, no archive


def test_a_verified_cache_is_reused_without_any_request(server, tmp_path):
    cache = tmp_path / "cache"
    prepare(server, cache)
    messages = []
    prepare(server, cache, messages=messages)
    prepare(server, cache, dataset="modelnet10", messages=messages)  # derived from the cache
    prepare(server, cache, dataset="modelnet10", messages=messages)
    assert server.requests == [None]
    assert sum("reusing the verified cache" in m for m in messages) == 3


def test_what_the_user_had_is_kept(server, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "modelnet40_ply_hdf5_2048.zip").write_bytes(ARCHIVE)  # put there by hand
    prepare(server, cache)
    assert server.requests == []  # unpacked without downloading
    assert (cache / "modelnet40_ply_hdf5_2048.zip").read_bytes() == ARCHIVE  # and kept
    other = tmp_path / "other"
    (other / "modelnet40_ply_hdf5_2048").mkdir(parents=True)
    (other / "modelnet40_ply_hdf5_2048" / "notes.txt").write_text("mine")
    with pytest.raises(DataCheckError, match="left as it is"):
        prepare(server, other)
    assert (other / "modelnet40_ply_hdf5_2048" / "notes.txt").read_text() == "mine"
    assert server.requests == []


def test_the_folder_appears_only_once_verified(server, tmp_path, monkeypatch):
    """A run killed while unpacking (no cleanup) leaves no folder under the final name."""
    from geomopt.canon import _download

    seen = []
    verify = _download.verify_folder

    def spy(folder, spec):
        seen.append((Path(folder).name, (tmp_path / "cache" / spec.folder).exists()))
        return verify(folder, spec)

    monkeypatch.setattr(_download, "verify_folder", spy)
    prepare(server, tmp_path / "cache")
    name, final_exists = seen[0]
    assert name.startswith(".modelnet40_ply_hdf5_2048.tmp-") and not final_exists


def test_a_live_lock_refuses_and_a_stale_one_is_taken_over(server, tmp_path):
    import fcntl

    cache = tmp_path / "cache"
    cache.mkdir()
    with open(cache / ".prepare.lock", "w") as held:  # another run holds the lock
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DownloadError, match="in use by another prepare_modelnet.py"):
            prepare(server, cache)
    assert server.requests == []
    (cache / ".prepare.lock").write_text("12345")  # left by a killed run: no lock held
    (cache / ".modelnet40_ply_hdf5_2048.tmp-x1").mkdir()  # and its unfinished unpacking
    prepare(server, cache)
    assert sorted(p.name for p in cache.iterdir()) == ["modelnet40_ply_hdf5_2048"]
