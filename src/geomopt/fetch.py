"""Dataset files by URL, through pooch: download once into a cache, verify the hash, reuse.

    path = fetch("https://host/data.tar.gz", known_hash="md5:...", cache_dir=cache_dir("cifar10"))

What pooch does here: the HTTP download (into a temporary file beside the target, renamed only
once the whole body arrived and its hash matched, so an interrupted or corrupted download never
leaves a file that looks finished), the hash check (``md5:`` / ``sha256:`` / ``sha1:``
prefixes), the cache (a file already there with the right hash is not downloaded again; one with
the wrong hash is downloaded again) and a progress bar (tqdm).

What this module adds: mirrors tried in order, retries of a failing mirror, and one-line errors
(:class:`FetchError`) that name the URL, what went wrong and what to do, instead of a requests
or pooch traceback. Not covered: resuming a partial download (pooch starts a failed download
again from byte 0), which matters only for files of hundreds of MB on a bad link.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["FetchError", "cache_dir", "fetch"]


class FetchError(OSError):
    """A file that could not be fetched or did not verify; the message says which and why."""


def cache_dir(dataset: str) -> Path:
    """``$XDG_CACHE_HOME/geomopt/<dataset>`` (``XDG_CACHE_HOME`` defaults to ``~/.cache``)."""
    if not dataset or "/" in dataset or dataset in (".", ".."):
        raise ValueError(f"dataset={dataset!r}: expected a plain folder name such as 'cifar10'")
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "geomopt" / dataset


def fetch(
    urls: str | Sequence[str],
    *,
    known_hash: str | None,
    cache_dir: str | Path,
    fname: str | None = None,
    retries: int = 2,
    retry_wait: float = 1.0,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """The file at ``urls`` (one URL, or mirrors tried in order) as ``cache_dir/fname``.

    ``known_hash`` is ``"md5:<hex>"`` / ``"sha256:<hex>"`` (a bare hex string is SHA-256), or
    None to accept any content (then callers check the content themselves). ``fname`` defaults
    to the URL's last path component. Each mirror is tried ``1 + retries`` times (waiting
    ``retry_wait`` seconds, doubling); a hash mismatch is not retried on the same mirror. Raises
    :class:`FetchError` when no mirror gave a verified file, naming each mirror's failure.
    """
    import pooch
    import requests

    url_list = [urls] if isinstance(urls, str) else list(urls)
    if not url_list or not all(isinstance(u, str) and "://" in u for u in url_list):
        raise ValueError(f"urls={urls!r}: expected a URL or a non-empty list of URLs")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries={retries!r}: expected an integer >= 0")
    name = fname or url_list[0].rstrip("/").rsplit("/", 1)[-1]
    folder = Path(cache_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FetchError(f"cannot create the cache folder {folder}: {err.strerror or err}") from err
    downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout)
    failures = []
    for url in url_list:
        wait = retry_wait
        for attempt in range(retries + 1):
            try:
                path = pooch.retrieve(url, known_hash, name, folder, downloader=downloader)
                return Path(path)
            except ValueError as err:  # pooch: hash mismatch (the temporary file is removed)
                failures.append(f"{url}: content does not match {known_hash} ({_short(err)})")
                break
            except (requests.RequestException, OSError) as err:
                failures.append(f"{url}: {_short(err)}")
                if attempt < retries:
                    time.sleep(wait)
                    wait *= 2
    raise FetchError(
        f"could not fetch {name} into {folder}: " + "; ".join(failures)
        + " (check the network or pass another mirror; a verified file placed at "
        f"{folder / name} is used as it is)"
    )  # fmt: skip


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 200 else text[:197] + "..."
