"""``wheelfactory serve``: the standard library's HTTP server over ``dist/index``.

It serves the symlink, not the generation behind it, so a regenerated index is picked up by the
next request without a restart (and a request in flight finishes from its own generation).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from wheelfactory.errors import UsageError
from wheelfactory.publish.index import INDEX_LINK


class _Handler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".whl": "application/octet-stream",
                      ".json": "application/json", ".txt": "text/plain; charset=utf-8"}

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        if self.path.split("?")[0] == "/select.py":
            self._send_select()
        else:
            super().do_GET()

    def _send_select(self) -> None:
        """select.py defaulting to the URL this request reached us at (the index was written
        with --base-url, which may name another port or host)."""
        try:
            source = (Path(self.directory) / "select.py").read_text(encoding="utf-8")
        except OSError:
            self.send_error(404)
            return
        here = f"http://{self.headers.get('Host') or self.server.url.split('//', 1)[1]}"  # type: ignore[attr-defined]
        body = re.sub(r'(?m)^DEFAULT_INDEX = .*$', lambda _: f"DEFAULT_INDEX = {here!r}", source, count=1).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/x-python; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        self.server.log_line(format % args)  # type: ignore[attr-defined]


class IndexServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, host: str, port: int, log_line: Callable[[str], None]) -> None:
        self.log_line = log_line
        super().__init__((host, port), functools.partial(_Handler, directory=str(root)))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"


def open_server(dist: Path, host: str, port: int, log_line: Callable[[str], None]) -> IndexServer:
    root = dist / INDEX_LINK
    if not (root / "index.html").is_file():
        raise UsageError(f"{root} holds no index: run `wheelfactory index -o {dist}` first")
    try:
        return IndexServer(root, host, port, log_line)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
                         "(0 picks a free one)") from None
