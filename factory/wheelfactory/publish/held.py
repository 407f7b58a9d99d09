"""What a package index already holds of a project, read before anything is uploaded to it: its
simple page (PEP 691 JSON, or PEP 503 HTML where JSON is not served), file name -> sha256, with
the files a page lists without a hash downloaded and hashed. Files are immutable, as PyPI rules:
publish/upload.py skips what is held with the same bytes and refuses a publish that would replace
anything. A failure is one PublishError line naming the URL, its password masked.
"""

from __future__ import annotations

import hashlib
import threading
import time
import urllib.error
import urllib.request
import urllib.response
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from wheelfactory.errors import PublishError
from wheelfactory.plan.compile_cache_settings import mask_password
from wheelfactory.plan.index_pages import listed_files

# PEP 691: JSON, HTML where not served
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
PAGE_LIMIT = 64 * 1024 * 1024  # a project page; one far larger is not a simple page
# a listed file hashed here; a stream past it is no wheel we publish
FILE_LIMIT = 8 * 1024 * 1024 * 1024
T = TypeVar("T")
TIMEOUT = 60.0  # connecting, and each read: a server that goes quiet
# Whole answers: a server that trickles (a byte every few seconds never trips TIMEOUT) or streams
# forever would hold the publish with no end. Each page and each file read has its deadline.
PAGE_DEADLINE = 120.0
FILE_DEADLINE = 1800.0
# Every read made of one target together: many pages each just inside PAGE_DEADLINE would add up.
TARGET_DEADLINE = 3600.0


@dataclass(frozen=True)
class Deadline:
    """When every read made of one target must have ended (``time.monotonic()``)."""

    ends: float

    @classmethod
    def from_now(cls) -> Deadline:
        return cls(time.monotonic() + TARGET_DEADLINE)

    def left(self) -> float:
        return max(0.0, self.ends - time.monotonic())


def one_line(text: str) -> str:
    """A server's or a library's message as one line of ours."""
    return " ".join(text.split())


def listed_hashes(
    body: bytes, content_type: str, page_url: str
) -> list[tuple[str, str | None, str]]:
    """(file name, sha256 or None, file URL) of each file a project page lists: PEP 691 JSON
    (``files[].hashes.sha256``) or PEP 503 HTML (a ``#sha256=`` fragment), read by the one page
    reader (plan/index_pages.py). ValueError when the page is neither."""
    return [(f.name, f.sha256, f.url) for f in listed_files(body, content_type, page_url)]


def _open(url: str, accept: str | None = None) -> urllib.response.addinfourl:
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"{url}: not an http(s) URL")
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    answer: urllib.response.addinfourl = urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 (checked)
    return answer


def read_held(
    simple_url: str,
    project: str,
    *,
    only: Collection[str] | None = None,
    deadline: Deadline | None = None,
) -> dict[str, str]:
    """File name -> sha256 of what the index at ``simple_url`` holds of ``project``; {} where the
    project has no page (404) in an index that is there. A file listed without a sha256 is
    downloaded and hashed, where it is one of ``only`` (None: every such file), else left out.
    PublishError, naming the URL (password masked), when the page cannot be read or the index is
    not there. ``deadline``: the target's, shared by every read made of it."""
    root = simple_url if simple_url.endswith("/") else simple_url + "/"
    url = f"{root}{canonicalize_name(project)}/"
    try:
        body, content_type, page_url = within(
            PAGE_DEADLINE, f"the page {mask_password(url)}", lambda: _read_page(url), deadline
        )
        listed = listed_hashes(body, content_type, page_url)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the server's answer, and with it the connection
        if exc.code == 404:
            _require_index(root)
            return {}
        raise PublishError(
            f"cannot read what {mask_password(url)} holds: HTTP {exc.code} {exc.reason}"
            + ("; the index asks for credentials to be read" if exc.code in (401, 403) else "")
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise PublishError(
            f"cannot read what {mask_password(url)} holds: {one_line(str(reason))}; "
            "is the server up, and is this its simple index?"
        ) from None
    held: dict[str, str] = {}
    for name, digest, file_url in listed:
        if digest is None:
            if only is not None and name not in only:
                continue
            digest = _hash_of(file_url, name, deadline)
        held[name] = digest
    return held


def _read_page(url: str) -> tuple[bytes, str, str]:
    with _open(url, JSON_ACCEPT) as answer:
        body = answer.read(PAGE_LIMIT + 1)
        if len(body) > PAGE_LIMIT:
            raise PublishError(
                f"cannot read what {mask_password(url)} holds: its page is over "
                f"{PAGE_LIMIT >> 20} MiB, which no project's simple page is; is this the index's "
                "simple URL?"
            )
        return body, answer.headers.get("Content-Type", "text/html"), answer.geturl()


READ_HINT = (
    f"connect and each read may take {TIMEOUT:.0f} s; is the server overloaded, or not an index?"
)


def within(
    seconds: float,
    what: str,
    work: Callable[[], T],
    deadline: Deadline | None = None,
    *,
    hint: str = READ_HINT,
) -> T:
    """``work()``'s result, or PublishError when it has not ended within ``seconds`` (or by the
    target's ``deadline``, where that comes first). The read is left to end on its own, in a
    daemon thread (closing its answer from here would wait on the lock its read holds): the
    publish stops without it."""
    allowed = seconds if deadline is None else min(seconds, deadline.left())
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=run, name="wheelfactory-held-read", daemon=True)
    worker.start()
    worker.join(allowed)
    if worker.is_alive():
        if allowed < seconds:
            raise PublishError(
                f"{what}: not read when the {TARGET_DEADLINE:.0f} s that every read of one target "
                "shares had passed; is the server overloaded?"
            )
        raise PublishError(f"{what}: no whole answer within {seconds:.0f} s ({hint})")
    if failed:
        # popped, not indexed: the failure's traceback holds run()'s frame, which holds this list;
        # left in it, the cycle (and the failed connection's socket) would wait for the garbage collector
        raise failed.pop()
    return done.pop()


def _require_index(root: str) -> None:
    """PublishError where the index at ``root`` is not there (404, 410): a devpi index never
    created, or a mistyped user, answers 404 for a project page too, as an index that holds nothing
    of the project does, and would fail only at the upload, after other targets were written. A
    HEAD: a root page may list a whole index (PyPI's is tens of MB). A server that answers HEAD
    otherwise (405) is taken to have it: the upload says more."""
    try:
        request = urllib.request.Request(root, method="HEAD")
        urllib.request.urlopen(request, timeout=TIMEOUT).close()  # noqa: S310 (read_held checked the scheme)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise PublishError(
                f"{mask_password(root)}: no such index (HTTP {exc.code}); create it first (devpi: "
                "the user's index of each variant) or correct the target's URL (or its index_url)"
            ) from None
    except (urllib.error.URLError, OSError, ValueError):
        pass  # it answered the project page a moment ago: the upload will say what is wrong


def _hash_of(url: str, name: str, deadline: Deadline | None = None) -> str:
    """The sha256 of a listed file whose page gives none (pypiserver --hash-algo md5, some proxies)."""

    def read() -> str:
        digest, size = hashlib.sha256(), 0
        with _open(url) as answer:
            for block in iter(lambda: answer.read(1 << 20), b""):
                size += len(block)
                if size > FILE_LIMIT:
                    raise PublishError(
                        f"{name}: listed without a sha256, and {mask_password(url)} sends more than "
                        f"{FILE_LIMIT >> 30} GiB of it: not a wheel this publish could have sent"
                    )
                digest.update(block)
        return digest.hexdigest()

    try:
        return within(
            FILE_DEADLINE, f"{name} (listed without a sha256, read to hash it)", read, deadline
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise PublishError(
            f"{name}: listed without a sha256 and cannot be read to hash it from "
            f"{mask_password(url)}: {one_line(str(reason))}"
        ) from None
