"""``wheelfactory serve``: the standard library's HTTP server over ``dist/index`` (or ``--root DIR``).

It serves the symlink, not the generation behind it, so a regenerated index is picked up by the
next request without a restart (and a request in flight finishes from its own generation).

A simple-API directory (``<variant>/simple/``, ``<variant>/simple/<project>/``) answers by content
negotiation (PEP 691): its ``index.json`` as ``application/vnd.pypi.simple.v1+json`` when the
Accept header prefers that (or ``...latest+json``), else its ``index.html`` (as
``application/vnd.pypi.simple.v1+html`` when that is what was asked for, else ``text/html``: a
browser, curl and a tie get HTML), with ``Vary: Accept``. The access log names the file answered.

Requests come from anyone who can reach the port, so nothing they send is trusted: a path with
control characters, bad percent-encoding or ``..`` segments gets a short 400 (never a traceback),
only regular files inside the root are answered (``support/confined.walk_under``: no link
followed, no FIFO or device opened to wait on or stream from), directories are not listed, log
lines have control characters escaped before they reach the terminal, and select.py's base URL comes from ``--base-url`` or the bound address, never from the
request's Host header.
"""

from __future__ import annotations

import functools
import os
import posixpath
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path
from typing import BinaryIO, cast
from urllib.parse import unquote, urlsplit

from wheelfactory.errors import UsageError
from wheelfactory.plan.index_pages import JSON_CONTENT
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.listing import read_listing, read_listing_at
from wheelfactory.support import confined
from wheelfactory.support.paths import StrPath

_LOG_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")  # C0, DEL, C1 (and the escape character itself)
_RAW_PATH_CHARS = re.compile(r"[!-~]*")  # what a request target may hold unencoded: printable ASCII
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
# What names the index's base URL: its pages, requirements files, listings and select.py
REWRITTEN = frozenset({".html", ".txt", ".json", ".py"})
LOG_QUEUE_LINES = 1000  # log lines waiting for a slow reader; more are dropped (and counted)


def escape_log(text: str) -> str:
    """``text`` with control characters as ``\\xNN`` (and ``\\`` doubled): one inert line."""
    return _LOG_UNSAFE.sub(
        lambda m: "\\\\" if m.group() == "\\" else f"\\x{ord(m.group()):02x}", text
    )


def path_problem(target: str) -> str | None:
    """Why a request target is refused (a short reason for the 400), or None when it may be served."""
    if not target.startswith("/") or target.startswith("//"):
        return "the path must start with a single /"
    if not _RAW_PATH_CHARS.fullmatch(target):
        return "control or non-ASCII characters in the path"
    if _BAD_PERCENT.search(target):
        return "bad percent-encoding"
    path = target.split("?", 1)[0].split("#", 1)[0]
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return "percent-encoding that is not UTF-8"
    if _CONTROL.search(decoded):
        return "control characters in the path"
    if ".." in decoded.replace("\\", "/").split("/"):
        return "the path leaves the index"
    return None


JSON_TYPE = JSON_CONTENT  # the one spelling of PEP 691 JSON (plan/index_pages.py)
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
# What a simple-API directory can answer: (media type a client may name, file, Content-Type sent).
# On a tie the first wins, so a client that names none of them (a browser, curl, */*) gets HTML.
REPRESENTATIONS = (
    ("text/html", "index.html", "text/html; charset=utf-8"),
    (HTML_TYPE, "index.html", HTML_TYPE),
    ("application/vnd.pypi.simple.latest+html", "index.html", HTML_TYPE),
    (JSON_TYPE, "index.json", JSON_TYPE),
    ("application/vnd.pypi.simple.latest+json", "index.json", JSON_TYPE),
)


def _accepted(accept: str) -> list[tuple[str, float]]:
    """The media ranges of an Accept header with their q-values; a range with a bad q is left out."""
    ranges = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = -1.0
        if media and 0.0 <= q <= 1.0:
            ranges.append((media.lower(), q))
    return ranges


def _quality(media: str, ranges: list[tuple[str, float]]) -> float:
    """The q the most specific matching range gives ``media`` (type/subtype, then type/*, then */*)."""
    kind = media.split("/")[0]
    for pattern in (media, f"{kind}/*", "*/*"):
        matching = [q for r, q in ranges if r == pattern]
        if matching:
            return max(matching)
    return 0.0


def negotiate(accept: str | None) -> tuple[str, str]:
    """(file, Content-Type) a simple-API directory answers ``accept`` with (PEP 691)."""
    ranges = _accepted(accept or "")
    # max keeps the first of a tie
    best = max(REPRESENTATIONS, key=lambda r: _quality(r[0], ranges))
    if not ranges or _quality(best[0], ranges) <= 0.0:
        # nothing we have was asked for: HTML, as a plain server answers
        return REPRESENTATIONS[0][1:]
    return best[1], best[2]


def check_base_url(base_url: str) -> str:
    """``base_url`` without its trailing slash; UsageError unless it is a plain http(s) URL."""
    problem = None
    if not _RAW_PATH_CHARS.fullmatch(base_url) or any(c in base_url for c in "\"'<>`"):
        problem = "holds spaces, quotes or characters outside printable ASCII"
    else:
        try:
            parts = urlsplit(base_url)
        except ValueError as exc:
            problem = str(exc)
        else:
            if parts.scheme not in ("http", "https") or not parts.hostname:
                problem = "is not an http:// or https:// URL with a host"
            elif parts.query or parts.fragment or "@" in parts.netloc:
                problem = "may not hold credentials, a query or a fragment"
    if problem:
        raise UsageError(
            f"--base-url {base_url!r} {problem}; e.g. --base-url https://wheels.example.org"
        )
    return base_url.rstrip("/")


class _Handler(SimpleHTTPRequestHandler):
    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".whl": "application/octet-stream",
        ".json": "application/json",
        ".txt": "text/plain; charset=utf-8",
        # PEP 658: the METADATA bytes as they are
        ".metadata": "application/octet-stream",
    }
    answered_with: str | None = None  # the negotiated file of this request, for the log
    server_version = "wheelfactory"
    sys_version = ""  # no Python version in the Server header
    error_message_format = "%(code)d %(message)s\n"
    error_content_type = "text/plain; charset=utf-8"
    # seconds a connection may sit idle (a stalled client does not hold a thread forever)
    timeout = 60

    @property
    def _index(self) -> IndexServer:
        return cast(IndexServer, self.server)

    def parse_request(self) -> bool:
        self.answered_with = None  # a kept-alive connection's handler serves several requests
        if not super().parse_request():
            return False
        problem = path_problem(self.path)
        if problem:
            self.send_error(400, problem)
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        super().do_GET()

    def send_head(self) -> BinaryIO | BytesIO | None:
        """The headers of the answer and the open file to send (None: answered already). Every
        component of the path is opened inside the root without following a link, and only a
        regular file is answered: a link in the root to a file or folder outside it, a FIFO (which
        would never answer) or a device (an endless body) is 404, as a missing file is."""
        url_path = urlsplit(self.path).path
        parts = [part for part in unquote(url_path).split("/") if part]  # path_problem refused ".."
        found = confined.walk_under(self.directory, parts)
        if found is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return None
        fd, is_directory = found
        content_type, negotiated = self.guess_type(url_path), False
        served_name = parts[-1] if parts else "index.html"
        if is_directory:
            try:
                if not url_path.endswith("/"):  # as the base class: the directory's URL ends in /
                    self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                    self.send_header("Location", url_path + "/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                name, content_type = self._page(fd, parts)
                negotiated = name != "index.html" or "simple" in parts[-2:]
                page = confined.walk_under(fd, [name])
            finally:
                os.close(fd)
            if page is None or page[1]:  # no page: directories are not listed
                if page is not None:
                    os.close(page[0])
                self.send_error(HTTPStatus.NOT_FOUND)
                return None
            fd, served_name = page[0], name
            self.answered_with = name if negotiated else None
        answer: BinaryIO | BytesIO = os.fdopen(fd, "rb")
        try:
            stat_result = os.fstat(answer.fileno())
            size = stat_result.st_size
            moved = (
                self._index.moved_base()
                if posixpath.splitext(served_name)[1] in REWRITTEN
                else None
            )
            if moved is not None:
                body = answer.read().replace(moved[0].encode(), moved[1].encode())
                answer.close()
                answer, size = BytesIO(body), len(body)
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(size))
            self.send_header("Last-Modified", self.date_time_string(stat_result.st_mtime))
            if negotiated:
                self.send_header("Vary", "Accept")
            self.end_headers()
        except BaseException:
            answer.close()
            raise
        return answer

    def _page(self, directory: int, parts: list[str]) -> tuple[str, str]:
        """(file, Content-Type) a directory URL answers with: a simple-API directory's by content
        negotiation (PEP 691), any other's index.html."""
        if "simple" not in parts[-2:]:
            return REPRESENTATIONS[0][1:]
        name, content_type = negotiate(self.headers.get("Accept"))
        found = confined.walk_under(directory, [name])
        if found is not None:
            os.close(found[0])
        if found is None or found[1]:  # an HTML-only directory (variants/simple/)
            return REPRESENTATIONS[0][1:]
        return name, content_type

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        status = code.value if isinstance(code, HTTPStatus) else code
        shown = f" ({self.answered_with})" if self.answered_with else ""
        self.log_message('"%s" %s %s%s', self.requestline, str(status), str(size), shown)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        self._index.log_line(escape_log(format % args))


class IndexServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        root: Path,
        host: str,
        port: int,
        log_line: Callable[[str], None],
        base_url: str | None = None,
        *,
        log_lines: int = LOG_QUEUE_LINES,
    ) -> None:
        self.log_line = QueuedLog(log_line, log_lines)  # a request never waits on the log's reader
        self.base_url = base_url
        self.root = root
        # select.py's written base URL, by the file it was read from (requests run in threads)
        self._select_read: tuple[tuple[int, int, int, int], str | None] | None = None
        self._select_lock = threading.Lock()
        super().__init__((host, port), functools.partial(_Handler, directory=str(root)))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def moved_base(self) -> tuple[str, str] | None:
        """(the base URL the index was written with, the one it is served at) where they differ:
        each page, select.py and requirements file is answered with the second in place of the
        first (``index`` wrote http://127.0.0.1:8000 unless told; ``serve --port`` may be another).
        The written one is what select.py names as its default: a regenerated index may have been
        written with another, so it is read again whenever select.py is another file."""
        served = self.select_base_url
        if served is None:
            return None
        written = self._written_base()
        return (written, served) if written and written != served else None

    def _written_base(self) -> str | None:
        """select.py's DEFAULT_INDEX, read once per file (device, inode, mtime and size)."""
        found = confined.walk_under(str(self.root), ["select.py"])
        if found is None or found[1]:
            if found is not None:
                os.close(found[0])
            return None
        with os.fdopen(found[0], "rb") as handle:
            facts = os.fstat(handle.fileno())
            key = (facts.st_dev, facts.st_ino, facts.st_mtime_ns, facts.st_size)
            with self._select_lock:
                if self._select_read is not None and self._select_read[0] == key:
                    return self._select_read[1]
            text = handle.read(1 << 20).decode("utf-8", "replace")
        written = re.search(r"(?m)^DEFAULT_INDEX = '([^'\n]+)'", text)
        base = written.group(1) if written else None
        with self._select_lock:
            self._select_read = (key, base)
        return base

    @property
    def select_base_url(self) -> str | None:
        """The base URL the served select.py names: --base-url, else the bound address; None (the
        file as ``index`` wrote it) when bound to every interface, where no one address is right."""
        if self.base_url is not None:
            return self.base_url
        host = self.server_address[0]
        return (
            None
            if (host.decode() if isinstance(host, bytes) else str(host)) in _WILDCARD_HOSTS
            else self.url
        )

    def handle_error(self, request: object, client_address: object) -> None:
        """One escaped line instead of socketserver's traceback on stderr."""
        exc = sys.exc_info()[1]
        self.log_line(escape_log(f"{client_address}: request failed: {type(exc).__name__}: {exc}"))


class QueuedLog:
    """The server's log, written by a thread of its own through a bounded queue: a request never
    waits on the log's reader (stderr a pipe nobody reads would otherwise stop every answer). When
    the queue is full lines are dropped and counted; the next line written says how many."""

    def __init__(self, sink: Callable[[str], None], capacity: int = LOG_QUEUE_LINES) -> None:
        self.sink = sink
        self.dropped = 0
        self._queue: queue.Queue[str] = queue.Queue(capacity)
        self._lock = threading.Lock()
        threading.Thread(target=self._write, name="serve-log", daemon=True).start()

    def __call__(self, line: str) -> None:
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def _write(self) -> None:
        while True:
            line = self._queue.get()
            with self._lock:
                dropped, self.dropped = self.dropped, 0
            try:
                if dropped:
                    self.sink(f"({dropped} log line(s) dropped: the log was not being read)")
                self.sink(line)
            except (OSError, ValueError):
                pass  # the log's reader is gone: the server goes on answering
            finally:
                self._queue.task_done()

    def flush(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` s) until every queued line is written."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks and time.monotonic() < deadline:
                self._queue.all_tasks_done.wait(deadline - time.monotonic())


def open_server(
    dist: Path,
    host: str,
    port: int,
    log_line: Callable[[str], None],
    base_url: str | None = None,
    *,
    log_lines: int = LOG_QUEUE_LINES,
) -> IndexServer:
    """A server over ``dist/index``, the index ``wheelfactory index`` keeps there."""
    return open_root(
        dist / INDEX_LINK,
        host,
        port,
        log_line,
        base_url,
        log_lines=log_lines,
        hint=f"run `wheelfactory index -o {dist}` first",
    )


def _require_index(root: Path, hint: str) -> None:
    if not (root / "index.html").is_file():
        raise UsageError(f"{root} holds no index (no index.html): {hint}")


def open_root(
    root: Path,
    host: str,
    port: int,
    log_line: Callable[[str], None],
    base_url: str | None = None,
    *,
    log_lines: int = LOG_QUEUE_LINES,
    hint: str = "give the directory `wheelfactory index` or a publish to a directory wrote",
) -> IndexServer:
    """A server over ``root``, a directory holding an index (index.html at its top)."""
    _require_index(root, hint)
    fixed = check_base_url(base_url) if base_url is not None else None
    try:
        return IndexServer(root, host, port, log_line, fixed, log_lines=log_lines)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
            "(0 picks a free one)"
        ) from None


@dataclass(frozen=True)
class Serving:
    """A server over an index, not yet serving: what it serves and the variants its listing names,
    each once (id, project, its index's path), for the caller to announce."""

    server: IndexServer
    root: Path
    variants: tuple[tuple[str, str, str], ...]

    @property
    def base_url(self) -> str:
        """Where clients reach it: --base-url, else the bound address."""
        return self.server.base_url or self.server.url


def open_index(
    out: StrPath = "dist",
    *,
    root: StrPath | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    base_url: str | None = None,
    log_line: Callable[[str], None] = print,
) -> Serving:
    """``wheelfactory serve``: a server over ``out``/index, or over ``root`` (an index ``index``
    or a publish to a directory wrote), its listing checked before anything listens (a bad
    index.json is one line); ``serve_forever()`` it. UsageError where there is no index."""
    if root is not None:
        served = Path(root).resolve()
        hint = "give --root the directory `wheelfactory index` or a publish to a directory wrote"
        _require_index(served, hint)
        listing = read_listing_at(served, hint=hint)
    else:
        dist = Path(out).resolve()
        served, hint = dist / INDEX_LINK, f"run `wheelfactory index -o {dist}` first"
        listing = read_listing(dist)
    server = open_root(served, host, port, log_line, base_url, hint=hint)
    variants = cast(list[dict[str, str]], listing["variants"])  # checked the shape
    named: dict[tuple[str, str], str] = {}
    for variant in variants:  # one entry per release: each variant once
        named.setdefault((variant["id"], variant["project"]), variant["index"])
    return Serving(
        server, served, tuple((vid, project, index) for (vid, project), index in named.items())
    )
