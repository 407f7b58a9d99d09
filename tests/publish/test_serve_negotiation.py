"""wheelfactory serve answers a simple-API directory by content negotiation (PEP 691), serves the
.metadata files, and serves any index directory with --root: a real server on 127.0.0.1."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.publish.test_index import index
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.serve import HTML_TYPE, JSON_TYPE, IndexServer, negotiate, open_root, open_server

CPU = "torch213-cxx11-cpu-x86_64-linux"
# What the installers send (pip 26, uv 0.13), a browser, curl.
PIP = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
UV = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept, answer", [
    (PIP, ("index.json", JSON_TYPE)),
    (UV, ("index.json", JSON_TYPE)),
    ("application/vnd.pypi.simple.latest+json", ("index.json", JSON_TYPE)),
    ("application/vnd.pypi.simple.v1+html", ("index.html", HTML_TYPE)),
    ("application/vnd.pypi.simple.latest+html;q=0.5, application/vnd.pypi.simple.v1+json;q=0.4",
     ("index.html", HTML_TYPE)),
    (BROWSER, ("index.html", "text/html; charset=utf-8")),
    ("*/*", ("index.html", "text/html; charset=utf-8")),  # a tie: HTML
    (None, ("index.html", "text/html; charset=utf-8")),
    ("", ("index.html", "text/html; charset=utf-8")),
    ("application/*", ("index.html", HTML_TYPE)),
    ("text/html;q=0, application/vnd.pypi.simple.v1+json;q=0.001", ("index.json", JSON_TYPE)),
    ("application/vnd.pypi.simple.v1+json;q=zero, text/html", ("index.html", "text/html; charset=utf-8")),
    ("application/vnd.pypi.simple.v1+json;q=2", ("index.html", "text/html; charset=utf-8")),  # out of range
    ("image/png", ("index.html", "text/html; charset=utf-8")),  # nothing we have: HTML
    ("APPLICATION/VND.PYPI.SIMPLE.V1+JSON", ("index.json", JSON_TYPE)),
])
def test_negotiate_reads_q_values(accept: str | None, answer: tuple[str, str]) -> None:
    assert negotiate(accept) == answer


def start(server: IndexServer) -> IndexServer:
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, IndexServer, list[str]]]:
    make_dist(tmp_path)
    index(tmp_path)
    lines: list[str] = []
    server = start(open_server(tmp_path, "127.0.0.1", 0, lines.append))
    yield tmp_path / INDEX_LINK, server, lines
    server.shutdown()
    server.server_close()


def request(server: IndexServer, path: str, accept: str | None = None, method: str = "GET"
            ) -> tuple[int, http.client.HTTPMessage, bytes]:
    """(status, headers: looked up case-insensitively, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        conn.request(method, path, headers={"Accept": accept} if accept is not None else {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", [f"/{CPU}/simple/", f"/{CPU}/simple/tiny/"])
def test_a_simple_directory_answers_json_or_html_as_asked(served: tuple[Path, IndexServer, list[str]],
                                                          path: str) -> None:
    root, server, lines = served
    on_disk = root / path.strip("/")
    status, headers, body = request(server, path, PIP)
    assert status == 200 and headers["Content-Type"] == JSON_TYPE and headers["Vary"] == "Accept"
    assert body == (on_disk / "index.json").read_bytes() and headers["Content-Length"] == str(len(body))
    status, headers, body = request(server, path, BROWSER)
    assert (status, headers["Content-Type"], headers["Vary"]) == (200, "text/html; charset=utf-8", "Accept")
    assert body == (on_disk / "index.html").read_bytes()
    status, headers, body = request(server, path, "application/vnd.pypi.simple.v1+html")
    assert headers["Content-Type"] == HTML_TYPE and body == (on_disk / "index.html").read_bytes()
    status, headers, body = request(server, path, PIP, method="HEAD")
    assert status == 200 and headers["Content-Type"] == JSON_TYPE and body == b""
    server.log_line.flush()
    assert any(f'"GET {path} HTTP/1.1" 200 - (index.json)' == line for line in lines), lines  # the log says which
    assert any(f'"GET {path} HTTP/1.1" 200 - (index.html)' == line for line in lines), lines


def test_metadata_files_are_served_as_they_are(served: tuple[Path, IndexServer, list[str]]) -> None:
    root, server, _ = served
    (metadata,) = (root / CPU / "simple" / "tiny").glob("*.whl.metadata")
    quoted = metadata.name.replace("+", "%2B")
    status, headers, body = request(server, f"/{CPU}/simple/tiny/{quoted}", PIP)
    assert status == 200 and body == metadata.read_bytes() and headers["Content-Type"] == "application/octet-stream"


def test_other_directories_are_not_negotiated(served: tuple[Path, IndexServer, list[str]]) -> None:
    root, server, _ = served
    status, headers, body = request(server, "/", PIP)  # the root's index.json is the listing, not PEP 691
    assert status == 200 and headers["Content-Type"].startswith("text/html") and "Vary" not in headers
    status, headers, body = request(server, "/variants/simple/", PIP)  # HTML only there
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == (root / "variants" / "simple" / "index.html").read_bytes()
    status, headers, _ = request(server, f"/{CPU}/simple/tiny", PIP)  # no slash: the usual redirect
    assert status == 301 and headers["Location"] == f"/{CPU}/simple/tiny/"
    status, _, _ = request(server, f"/{CPU}/simple/nothing/", PIP)
    assert status == 404


def test_open_root_serves_any_index_directory(tmp_path: Path) -> None:
    make_dist(tmp_path / "dist")
    index(tmp_path / "dist")
    site = tmp_path / "site"
    shutil.copytree((tmp_path / "dist" / INDEX_LINK).resolve(), site)
    server = start(open_root(site, "127.0.0.1", 0, lambda line: None))
    try:
        status, headers, body = request(server, f"/{CPU}/simple/tiny/", UV)
    finally:
        server.shutdown()
        server.server_close()
    assert status == 200 and headers["Content-Type"] == JSON_TYPE
    assert body == (site / CPU / "simple" / "tiny" / "index.json").read_bytes()


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ})


def test_serve_root_cli_serves_a_directory_and_announces_each_variant_once(tmp_path: Path) -> None:
    """Two releases in one directory: one line per variant, the JSON page lists both."""
    from tests.publish.test_index_metadata import two_releases
    from wheelfactory.publish.generations import write_index

    _, merged, second = two_releases(tmp_path)
    generation, _ = write_index(second, merged)
    process = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "--root", str(generation), "--port",
                                "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"serving (\S+) at http://127\.0\.0\.1:(\d+)/", first)
        assert found and found.group(1) == str(generation), first
        announced = [process.stdout.readline() for _ in range(3)]  # type: ignore[union-attr]
        assert sorted(line.split(":")[0].strip() for line in announced) == sorted(
            ["torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux"])
        conn = http.client.HTTPConnection("127.0.0.1", int(found.group(2)), timeout=30)
        conn.request("GET", f"/{CPU}/simple/tiny/", headers={"Accept": UV})
        answer = conn.getresponse()
        body = answer.read()
        conn.close()
        assert answer.getheader("Content-Type") == JSON_TYPE and body.count(b'"filename"') == 2
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert CPU not in out  # nothing more was announced: one line per variant, not per release


def test_serve_root_errors_are_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("--root", str(empty))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "holds no index" in result.stderr
    assert "Traceback" not in result.stderr
    (empty / "index.html").write_text("<html></html>\n")
    (empty / "index.json").write_text("{not json")
    result = cli("--root", str(empty))
    assert result.returncode == 2 and f"{empty / 'index.json'}: not JSON" in result.stderr
    result = cli("--root", str(empty), "-o", str(tmp_path))
    assert result.returncode == 2 and "--root and -o" in result.stderr and result.stderr.count("\n") == 1
