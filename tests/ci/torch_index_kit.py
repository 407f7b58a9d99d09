"""A torch index served over real HTTP on 127.0.0.1 (PEP 503 HTML or PEP 691 JSON) for the
`compat refresh` tests and the watch-torch job's test."""

from __future__ import annotations

import functools
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

FILES = [
    "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "torch-2.16.0-cp313-cp313-manylinux_2_28_x86_64.whl",
    "torch-2.16.0-cp313-cp313-manylinux_2_28_aarch64.whl",
    "torch-2.16.0+cu132-cp312-cp312-manylinux_2_28_x86_64.whl",
    "torch-2.16.0+cu132-cp313-cp313-manylinux_2_28_x86_64.whl",
    "torch-2.16.0.tar.gz",  # not a wheel: left out
    "torch-2.17.0a0-cp313-cp313-manylinux_2_28_x86_64.whl",  # a pre-release: left out
]


def write_index(root: Path, kind: str, files: list[str], metadata: dict[str, str] | None = None) -> None:
    """``root/simple/torch/`` listing ``files`` (``kind``: html or json); ``metadata``: file name ->
    its METADATA, served as ``<file>.metadata`` and announced on the page (PEP 658 / PEP 714)."""
    page = root / "simple" / "torch"
    page.mkdir(parents=True)
    metadata = metadata or {}
    (root / "files").mkdir(exist_ok=True)
    for name, text in metadata.items():
        (root / "files" / f"{name}.metadata").write_text(text)
    if kind == "html":
        offered = ' data-core-metadata="true"'
        anchors = "\n".join(f'<a href="../../files/{name}#sha256={"0" * 64}"'
                            f'{offered if name in metadata else ""}>{name}</a><br/>' for name in files)
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{anchors}</body></html>\n")
    else:
        document = {"meta": {"api-version": "1.1"}, "name": "torch",
                    "files": [{"filename": n, "url": f"../../files/{n}", "hashes": {},
                               **({"core-metadata": True} if n in metadata else {})} for n in files]}
        (page / "index.json").write_text(json.dumps(document))


class Handler(http.server.SimpleHTTPRequestHandler):
    """PEP 691: the JSON page where the directory has one (with its content type), else HTML."""

    def send_head(self):  # type: ignore[no-untyped-def]
        json_page = Path(self.translate_path(self.path)) / "index.json"
        if self.path.endswith("/") and json_page.is_file():
            body = json_page.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)
        return super().send_head()

    def log_message(self, *args: object) -> None:
        pass



@pytest.fixture
def http_index(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(served root, base URL) of a static server on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
