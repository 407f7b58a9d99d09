"""wheelfactory serve: a real HTTP server over dist/index, picking up a regenerated index."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from tests.publish.dist_fakes import make_dist
from tests.publish.test_index import index
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.serve import IndexServer, open_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, IndexServer]]:
    make_dist(tmp_path)
    index(tmp_path)
    server = open_server(tmp_path, "127.0.0.1", 0, lambda line: None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, server
    server.shutdown()
    server.server_close()


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()  # type: ignore[no-any-return]


def test_pep503_pages_and_wheels_over_http(served: tuple[Path, IndexServer]) -> None:
    _, server = served
    page = get(f"{server.url}/torch213-cxx11-cpu-x86_64-linux/simple/tiny/").decode()
    (href,) = re.findall(r'href="([^"#]+)#sha256=', page)
    assert get(f"{server.url}/torch213-cxx11-cpu-x86_64-linux/simple/tiny/{href}")[:2] == b"PK"
    select = get(f"{server.url}/select.py").decode()
    assert f"DEFAULT_INDEX = '{server.url}'" in select  # the served selector points at this server


def test_a_regenerated_index_is_served_without_a_restart(served: tuple[Path, IndexServer]) -> None:
    """Written for another base URL each time; served, each names the address it is served at
    (the base the pages were written with is read again for each request)."""
    dist, server = served
    page = get(f"{server.url}/index.html")
    assert server.url.encode() in page and b"example.test" not in page
    index(dist, base_url="http://example.test:77")
    page = get(f"{server.url}/index.html")
    assert server.url.encode() in page and b"example.test" not in page


def test_every_page_names_the_port_it_is_served_at(tmp_path: Path) -> None:
    """`index` writes http://127.0.0.1:8000 into its pages; `serve --port P` answers each page,
    requirements file, listing and select.py with P (issue 37). Wheels are sent as they are."""
    make_dist(tmp_path)
    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(tmp_path)], check=True, timeout=300,
                   capture_output=True)  # as a user runs it: the default base URL
    written = {p.relative_to(tmp_path / INDEX_LINK).as_posix(): p.read_bytes()
               for p in (tmp_path / INDEX_LINK).rglob("*") if p.is_file()}
    naming = [name for name, body in written.items() if b"127.0.0.1:8000" in body]
    assert {"index.html", "select.py"} <= set(naming) and any(n.endswith(".txt") for n in naming), naming
    server = open_server(tmp_path, "127.0.0.1", 0, lambda _: None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for name in naming:
            body = get(f"{server.url}/{quote(name)}")
            assert b":8000" not in body and server.url.encode() in body, name
        wheel = next(name for name in written if name.endswith(".whl"))
        assert get(f"{server.url}/{quote(wheel)}") == written[wheel]
    finally:
        server.shutdown()
        server.server_close()


def test_serve_binds_loopback_and_prints_pip_commands(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(tmp_path), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()  # type: ignore[union-attr]
        url = re.search(r"at (http://127\.0\.0\.1:\d+)/", first)
        assert url, first
        line = process.stdout.readline()  # type: ignore[union-attr]
        assert f"pip install --index-url {url.group(1)}/" in line
        assert b"<title>wheelfactory index</title>" in get(url.group(1) + "/")
    finally:
        process.terminate()
        process.communicate(timeout=30)  # also closes the pipes


def test_serve_without_an_index_says_what_to_run(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "serve", "-o", str(tmp_path)], capture_output=True,
                            text=True, timeout=60, check=False, env={**os.environ})
    assert result.returncode == 2 and "run `wheelfactory index" in result.stderr


def test_the_top_page_links_the_build_report_and_serve_serves_it(tmp_path: Path) -> None:
    """`index` writes the build report into the index and links it from the top page; served, it
    names the release and every link on it answers (it links the index's pages, not dist's
    files, which are not served)."""
    make_dist(tmp_path)
    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(tmp_path)], check=True, timeout=300,
                   capture_output=True)
    server = open_server(tmp_path, "127.0.0.1", 0, lambda _: None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert b'<a href="report.html">Build report</a>' in get(f"{server.url}/")
        page = get(f"{server.url}/report.html").decode()
        assert "<h1>tiny 0.1.0: build report</h1>" in page and "last built " in page, page[:800]
        hrefs = sorted(set(re.findall(r'href="([^"#]+)"', page)))
        assert hrefs and any(h.endswith("/simple/index.html") for h in hrefs), hrefs
        for href in hrefs:
            get(f"{server.url}/{href}")  # raises on anything but 200
    finally:
        server.shutdown()
        server.server_close()



def test_select_py_is_read_again_only_when_it_is_another_file(served: tuple[Path, IndexServer]) -> None:
    """The base URL the index was written with is select.py's DEFAULT_INDEX, read once per file
    (its inode, size and mtime): the same file edited with its mtime kept is not read again; a
    new mtime is (and a regenerated index is another file)."""
    dist, server = served
    select = dist / INDEX_LINK / "select.py"
    written = "http://example.test:9"  # what index() wrote the pages (and select.py) with
    assert written.encode() not in get(f"{server.url}/index.html")  # replaced by the served base
    before = select.stat()
    text = select.read_text(encoding="utf-8")
    with open(select, "r+", encoding="utf-8") as same_file:  # one character: same size
        same_file.write(text.replace(f"DEFAULT_INDEX = '{written}'", "DEFAULT_INDEX = 'http://example.test:8'"))
    os.utime(select, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (select.stat().st_ino, select.stat().st_size) == (before.st_ino, before.st_size)
    assert written.encode() not in get(f"{server.url}/index.html")  # not read again
    os.utime(select, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    assert written.encode() in get(f"{server.url}/index.html")  # read again: :8 is not in the page
