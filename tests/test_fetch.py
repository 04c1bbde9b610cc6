import hashlib
import socket

import pytest

from geomopt.fetch import FetchError, cache_dir, fetch

BODY = b"geomopt test payload\n" * 100
MD5 = "md5:" + hashlib.md5(BODY).hexdigest()


def test_a_fresh_file_is_verified_and_a_cached_one_is_not_requested_again(file_server, tmp_path):
    srv = file_server({"data.bin": BODY})
    path = fetch(srv.url("data.bin"), known_hash=MD5, cache_dir=tmp_path, progress=False)
    assert path == tmp_path / "data.bin" and path.read_bytes() == BODY
    again = fetch(srv.url("data.bin"), known_hash=MD5, cache_dir=tmp_path, progress=False)
    assert again == path and srv.requests == {"data.bin": 1}


def test_a_wrong_hash_is_refused_in_one_line_and_leaves_no_file(file_server, tmp_path):
    srv = file_server({"data.bin": BODY})
    with pytest.raises(FetchError, match="does not match md5:0{32}") as err:
        fetch(srv.url("data.bin"), known_hash="md5:" + "0" * 32, cache_dir=tmp_path,
              progress=False)  # fmt: skip
    assert "\n" not in str(err.value)
    assert not any(p.name == "data.bin" for p in tmp_path.iterdir())


def test_a_damaged_cached_file_is_fetched_again(file_server, tmp_path):
    srv = file_server({"data.bin": BODY})
    (tmp_path / "data.bin").write_bytes(BODY[:-5])
    path = fetch(srv.url("data.bin"), known_hash=MD5, cache_dir=tmp_path, progress=False)
    assert path.read_bytes() == BODY and srv.requests == {"data.bin": 1}


def test_mirrors_are_tried_in_order(file_server, tmp_path):
    srv = file_server({"b/data.bin": BODY})
    path = fetch([srv.url("a/data.bin"), srv.url("b/data.bin")], known_hash=MD5,
                 cache_dir=tmp_path, retries=1, retry_wait=0.01, progress=False)  # fmt: skip
    assert path.read_bytes() == BODY
    assert srv.requests == {"a/data.bin": 1, "b/data.bin": 1}  # a 404 is not retried


def test_an_unreachable_host_fails_in_one_line_naming_it(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x.bin"
    with pytest.raises(FetchError, match=f"could not fetch x.bin.*127.0.0.1:{port}") as err:
        fetch(url, known_hash=None, cache_dir=tmp_path, retries=0, timeout=5, progress=False)
    assert "\n" not in str(err.value)


def test_bad_arguments_name_the_value(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="urls='nope'"):
        fetch("nope", known_hash=None, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="retries=-1"):
        fetch("http://x/y", known_hash=None, cache_dir=tmp_path, retries=-1)
    with pytest.raises(ValueError, match="dataset='a/b'"):
        cache_dir("a/b")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir("mnist") == tmp_path / "geomopt" / "mnist"
