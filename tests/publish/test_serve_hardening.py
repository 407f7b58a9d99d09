"""wheelfactory serve under hostile requests: a real server on 127.0.0.1, raw request lines."""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.publish.test_index import index
from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.plan.compile_cache_settings import mask_password
from wheelfactory.plan.matrix import Matrix
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.serve import IndexServer, check_base_url, escape_log, open_server

Served = tuple[Path, IndexServer, list[str]]


def start(dist: Path, host: str = "127.0.0.1", base_url: str | None = None) -> tuple[IndexServer, list[str]]:
    lines: list[str] = []
    server = open_server(dist, host, 0, lines.append, base_url)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, lines


def stop(server: IndexServer) -> None:
    server.shutdown()
    server.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    make_dist(tmp_path)
    index(tmp_path)
    server, lines = start(tmp_path)
    yield tmp_path, server, lines
    stop(server)


def raw(server: IndexServer, request: bytes) -> bytes:
    """Sends ``request`` as written (http.client refuses control characters) and reads to the close."""
    port = server.server_address[1]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def get(server: IndexServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_log_lines_escape_control_characters(served: Served) -> None:
    _, server, lines = served
    answer = raw(server, b"GET /\x1b[2J\x1b]0;owned\x07\x9b HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 400 ")
    server.log_line.flush()  # the log is written by its own thread
    assert not any(re.search(r"[\x00-\x1f\x7f-\x9f]", line) for line in lines), lines
    logged = "\n".join(lines)
    assert "\\x1b[2J" in logged and "\\x07" in logged


def test_escape_log_leaves_one_inert_line() -> None:
    assert escape_log("a\x1b[31m\r\nb\\x1b\x00") == "a\\x1b[31m\\x0d\\x0ab\\\\x1b\\x00"
    assert escape_log('"GET /tiny/ HTTP/1.1" 200 -') == '"GET /tiny/ HTTP/1.1" 200 -'


@pytest.mark.parametrize("path", ["/%00", "/index.html%00.txt", "/%zz", "/%", "/%ff%fe", "/a%0d%0aSet-Cookie:%20x",
                                  "/%1b[31m", "/../../etc/passwd", "/..%2f..%2fetc%2fpasswd", "/whl/%2e%2e/%2e%2e/x",
                                  "http://evil.example/index.html"])
def test_malformed_paths_get_a_short_400(served: Served, path: str) -> None:
    _, server, lines = served
    status, body = get(server, path)
    assert status == 400, body
    assert len(body) < 200 and b"Traceback" not in body and body.startswith(b"400 ")
    server.log_line.flush()
    assert not any("Traceback" in line or "request failed" in line for line in lines), lines


def test_a_double_slash_is_no_redirect_off_site(served: Served) -> None:
    _, server, _ = served
    answer = raw(server, b"GET //evil.example/whl HTTP/1.0\r\n\r\n")  # the stdlib folds the leading slashes
    assert answer.split(b" ", 2)[1] in (b"400", b"404") and b"evil.example" not in answer.lower()


def test_nul_in_the_raw_request_line_is_400(served: Served) -> None:
    _, server, _ = served
    assert raw(server, b"GET /index.html\x00 HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 400 ")


def test_traversal_never_serves_a_file_outside_the_index(served: Served) -> None:
    dist, server, _ = served
    (dist / "secret.txt").write_text("do not serve\n")
    for path in ("/../../etc/passwd", "/../secret.txt", "/../../secret.txt", "/%2e%2e/secret.txt"):
        status, body = get(server, path)
        assert status in (400, 404) and b"root:" not in body and b"do not serve" not in body, (path, body)
    answer = raw(server, b"GET /../secret.txt HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 400 ") and b"do not serve" not in answer


def test_directories_are_never_listed(served: Served) -> None:
    dist, server, _ = served
    for path in ("/whl/", "/torch213-cxx11-cpu-x86_64-linux/", "/variants/"):
        status, body = get(server, path)
        assert status == 404 and b".html" not in body and b"requirements" not in body, (path, body)
    status, body = get(server, "/torch213-cxx11-cpu-x86_64-linux/simple/")  # a directory with index.html
    assert status == 200
    assert body == (dist / INDEX_LINK / "torch213-cxx11-cpu-x86_64-linux" / "simple" / "index.html").read_bytes()


def test_the_host_header_is_not_reflected_into_select_py(served: Served) -> None:
    _, server, _ = served
    status, body = get(server, "/select.py", {"Host": "evil.example"})
    assert status == 200 and b"evil.example" not in body
    assert f"DEFAULT_INDEX = '{server.url}'".encode() in body  # the bound address


def test_base_url_fixes_select_py(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    server, _ = start(tmp_path, base_url="https://wheels.example.test/kernels/")
    try:
        status, body = get(server, "/select.py", {"Host": "evil.example"})
    finally:
        stop(server)
    assert status == 200 and b"evil.example" not in body
    assert b"DEFAULT_INDEX = 'https://wheels.example.test/kernels'" in body


def test_every_interface_serves_select_py_as_index_wrote_it(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)  # base URL http://example.test:9
    server, _ = start(tmp_path, host="0.0.0.0")
    try:
        status, body = get(server, "/select.py", {"Host": "evil.example"})
    finally:
        stop(server)
    assert status == 200 and b"evil.example" not in body and b"DEFAULT_INDEX = 'http://example.test:9'" in body


@pytest.mark.parametrize("url", ["javascript:alert(1)", "http://", "ftp://h", "http://a b", "http://u:p@h",
                                 "http://h/'+x+'", "http://h?q=1", "http://h/\x1b"])
def test_a_bad_base_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="--base-url"):
        check_base_url(url)


def test_a_failing_request_logs_one_escaped_line(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    _, server, lines = served
    try:
        raise ValueError("embedded null byte \x00\x1b[2J")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 1))
    server.log_line.flush()
    assert lines == ["('127.0.0.1', 1): request failed: ValueError: embedded null byte \\x00\\x1b[2J"]
    assert capsys.readouterr().err == ""


def test_serve_cli_escapes_stderr_and_takes_base_url(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(tmp_path), "--port", "0",
                                "--base-url", "https://wheels.example.test"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = process.stdout.readline().decode()  # type: ignore[union-attr]
        found = re.search(r"at http://127\.0\.0\.1:(\d+)/", first)
        assert found, first
        assert b"pip install --index-url https://wheels.example.test/" in process.stdout.readline()  # type: ignore[union-attr]
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=30) as conn:
            conn.sendall(b"GET /\x1b]0;owned\x07\x1b[2J HTTP/1.0\r\n\r\n")
            assert conn.recv(65536).startswith(b"HTTP/1.0 400 ")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert b"\x1b" not in err and b"\x07" not in err and b"Traceback" not in err
    assert b"\\x1b]0;owned\\x07" in err


def test_a_redis_password_is_masked_in_the_error(parse: Callable[[str], Matrix]) -> None:
    with pytest.raises(ConfigError) as info:
        parse("[build]\ncompile_cache_redis = 'redis://:s3cret@cache.example:6379/0'\n")
    assert "s3cret" not in str(info.value)
    assert "redis://:***@cache.example:6379/0" in str(info.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
    ("redis://user:p@ss/w@h", "redis://user:***@h"),
    ("redis://pw@h", "redis://***@h"),
    ("rediss://h:1/0?password=pw&db=1", "rediss://h:1/0?password=***&db=1"),
    ("redis://127.0.0.1:6379/1", "redis://127.0.0.1:6379/1"),
    ("unix:///run/redis.sock", "unix:///run/redis.sock"),
])
def test_mask_password(url: str, shown: str) -> None:
    assert mask_password(url) == shown


def test_a_log_nobody_reads_never_stops_the_answers(tmp_path: Path) -> None:
    """stderr a pipe nobody reads: writing the log blocks. The server answers everyone anyway, and
    the lines it could not queue are counted and reported once the log is read again."""
    make_dist(tmp_path)
    index(tmp_path)
    reading = threading.Event()
    written: list[str] = []

    def stuck(line: str) -> None:
        reading.wait()
        written.append(line)

    server = open_server(tmp_path, "127.0.0.1", 0, stuck, log_lines=3)  # a small queue fills in few requests
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        for _ in range(12):
            status, _body = get(server, "/index.html")
            assert status == 200
        assert server.log_line.dropped > 0
        reading.set()
        get(server, "/index.html")
        server.log_line.flush()
        assert any("log line(s) dropped: the log was not being read" in line for line in written), written
    finally:
        reading.set()
        stop(server)
