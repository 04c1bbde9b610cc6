"""Dataset files by URL, through pooch: download once into a cache, verify the hash, reuse.

    path = fetch("https://host/data.tar.gz", known_hash="md5:...", cache_dir=cache_dir("cifar10"))

What pooch does here: the HTTP download (into a temporary file beside the target, renamed only
once the whole body arrived and its hash matched, so an interrupted or corrupted download never
leaves a file that looks finished), the hash check (``md5:`` / ``sha256:`` / ``sha1:``
prefixes), the cache (a file already there with the right hash is not downloaded again; one with
the wrong hash is downloaded again) and a progress bar (tqdm).

What this module adds: mirrors tried in order, retries of a failing mirror, and one-line errors
(:class:`FetchError`) that name the URL, what went wrong and what to do, instead of a requests
or pooch traceback. With ``resume=True`` it also does what pooch lacks, resuming: pooch starts
a failed download again from byte 0 and deletes what arrived, which matters for files of
hundreds of MB (ModelNet40's 435 MB archive) on a bad link. :class:`ResumingDownloader` is a
pooch downloader that keeps the bytes in ``<file>.part`` across retries, failures and Ctrl-C and
continues them with an HTTP ``Range`` request; pooch still does the cache, the hash check and the
final rename. For files with no published hash, ``starts_with`` refuses a body that does not
begin as the file must (an HTML error page instead of a zip) before anything is kept.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["FetchError", "ResumingDownloader", "cache_dir", "fetch"]


class FetchError(OSError):
    """A file that could not be fetched or did not verify; the message says which and why."""


class _Refused(FetchError):
    """The server sent something that is not the file (not retried on that mirror)."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


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
    resume: bool = False,
    starts_with: bytes | None = None,
    expected: str = "the file",
    say: Callable[[str], None] = _say,
) -> Path:
    """The file at ``urls`` (one URL, or mirrors tried in order) as ``cache_dir/fname``.

    ``known_hash`` is ``"md5:<hex>"`` / ``"sha256:<hex>"`` (a bare hex string is SHA-256), or
    None to accept any content (then callers check the content themselves). ``fname`` defaults
    to the URL's last path component. Each mirror is tried ``1 + retries`` times (waiting
    ``retry_wait`` seconds, doubling); a hash mismatch, a client error (HTTP 4xx) and a body
    refused by ``starts_with`` are not retried on the same mirror. ``resume`` (implied by
    ``starts_with``) keeps what arrived in ``<fname>.part`` and continues it
    (:class:`ResumingDownloader`); ``expected``
    names the file in its messages; ``say`` prints a line. Raises :class:`FetchError` when no
    mirror gave a verified file, naming each mirror's failure (and a kept ``.part``).
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
    part = folder / f"{name}.part"
    if resume or starts_with is not None:
        downloader = ResumingDownloader(
            part, timeout=timeout, progress=progress, starts_with=starts_with,
            expected=expected, say=say,
        )  # fmt: skip
    else:
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
            except _Refused as err:
                failures.append(f"{url}: {err}")
                break
            except (requests.RequestException, OSError) as err:
                failures.append(f"{url}: {_short(err)}")
                status = getattr(getattr(err, "response", None), "status_code", None) or 0
                if 400 <= status < 500 and status != 429:
                    break
                if attempt < retries:
                    time.sleep(wait)
                    wait *= 2
    kept = (
        f"kept {part} ({part.stat().st_size / 2**20:.1f} MiB): rerun the same command to resume; "
        if part.exists() else ""
    )  # fmt: skip
    raise FetchError(
        f"could not fetch {name} into {folder}: " + "; ".join(failures)
        + f" ({kept}check the network or the URL; a verified file placed at "
        f"{folder / name} is used as it is)"
    )  # fmt: skip


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _content_range(value: str | None) -> tuple[int, int | None] | None:
    """``(start, total)`` from ``Content-Range: bytes start-end/total`` (total None for ``*``)."""
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if not m:
        return None
    return int(m.group(1)), None if m.group(3) == "*" else int(m.group(3))


class ResumingDownloader:
    """A pooch downloader that resumes: the body goes to ``part`` (beside it ``part.json``
    records the URL and total size), which is moved to pooch's output file only once every byte
    arrived. A cut connection leaves ``part`` for the next try or the next run, which asks for
    the rest with ``Range: bytes=<size>-``. A ``206`` that starts elsewhere or whose total
    changed, a ``416`` for an incomplete part, a server that ignores ``Range`` (``200``) and a
    part left by another URL start over from byte 0. ``starts_with`` refuses a fresh body that
    does not start with those bytes.
    """

    def __init__(
        self,
        part: str | Path,
        *,
        timeout: float = 60.0,
        progress: bool = True,
        starts_with: bytes | None = None,
        expected: str = "the file",
        say: Callable[[str], None] = _say,
    ):
        self.part, self.meta = Path(part), Path(f"{part}.json")
        self.timeout, self.progress, self.say = timeout, progress, say
        self.starts_with, self.expected = starts_with, expected

    def __call__(self, url: str, output_file, pooch_instance=None, check_only: bool = False):
        try:
            self._download(url)
        except KeyboardInterrupt:
            if self.part.exists():
                size = self.part.stat().st_size / 2**20
                self.say(f"interrupted: kept {self.part} ({size:.1f} MiB); rerun the same "
                         "command to resume")  # fmt: skip
            raise
        os.replace(self.part, output_file)
        self.meta.unlink(missing_ok=True)

    def _discard(self) -> None:
        self.part.unlink(missing_ok=True)
        self.meta.unlink(missing_ok=True)

    def _download(self, url: str) -> None:
        import requests
        import urllib3
        from tqdm.auto import tqdm

        try:
            meta = json.loads(self.meta.read_text())
        except (OSError, ValueError):
            meta = {}
        if self.part.exists() and meta.get("url") != url:
            self.say(f"{self.part}: left by a download from {meta.get('url', 'an unknown URL')}; "
                     "starting over")  # fmt: skip
            self._discard()
        have = self.part.stat().st_size if self.part.exists() else 0
        headers = {"Accept-Encoding": "identity", "User-Agent": "geomopt-fetch"}
        if have:
            headers["Range"] = f"bytes={have}-"
        with requests.get(url, headers=headers, stream=True, timeout=self.timeout) as r:
            if r.status_code == 416 and have:
                if meta.get("size") == have:
                    return  # the part was already complete
                self._discard()
                raise requests.ConnectionError(f"HTTP 416 for the rest from byte {have}; "
                                               "starting over")  # fmt: skip
            r.raise_for_status()
            total = self._start(r, have, meta.get("size"), url)
            if r.status_code != 206:
                have = 0
            body = iter(lambda: r.raw.read1(1 << 20), b"")
            head = b""
            if have == 0 and self.starts_with:
                while len(head) < len(self.starts_with) and (block := next(body, b"")):
                    head += block
                if not head.startswith(self.starts_with):
                    self._discard()
                    kind = r.headers.get("Content-Type") or "a file"
                    raise _Refused(
                        f"the server sent {kind} starting {head[:16]!r}, expected "
                        f"{self.expected} (starting {self.starts_with!r}); pass its URL"
                    )
            self.meta.write_text(json.dumps({"url": url, "size": total}))
            with (
                open(self.part, "ab" if have else "wb") as out,
                tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                     desc=self.part.name[: -len(".part")], disable=not self.progress,
                     leave=False) as bar,
            ):  # fmt: skip
                try:
                    for block in itertools.chain([head], body):
                        out.write(block)
                        bar.update(len(block))
                except urllib3.exceptions.HTTPError as err:  # a cut body: what arrived is kept
                    raise requests.ConnectionError(_short(err)) from err
        done = self.part.stat().st_size
        if total is not None and done < total:
            raise requests.ConnectionError(f"connection closed at byte {done} of {total}")

    def _start(self, r, have: int, known: int | None, url: str) -> int | None:
        """The total size, checking a ``206`` against the ``have`` bytes on disk."""
        import requests

        if r.status_code == 206:
            cr = _content_range(r.headers.get("Content-Range"))
            if cr is not None and cr[0] == have and (None in (known, cr[1]) or known == cr[1]):
                return cr[1] if cr[1] is not None else known
            self.say(f"{url}: the server resumed at {r.headers.get('Content-Range')!r}, not at "
                     f"byte {have} of {known}; starting over")  # fmt: skip
            self._discard()
            raise requests.ConnectionError("mismatched Content-Range")
        if have:
            self.say(f"{url}: the server ignored the Range request; starting over from byte 0")
        length = r.headers.get("Content-Length")
        return int(length) if length and length.isdigit() else None
