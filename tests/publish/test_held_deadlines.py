"""What publish reads from an upload server before sending anything (publish/held.py) has limits:
a page trickled a byte at a time, a file that streams forever and a page larger than any project
page are each one PublishError naming the limit, not a publish that runs forever or a page taken
as holding nothing. A hostile server on 127.0.0.1, the real reader, limits made small."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from wheelfactory.errors import PublishError
from wheelfactory.publish import held, upload

STOP = threading.Event()


class Hostile(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        if self.path.startswith("/trickle/"):
            self._headers("text/html", 10_000)
            for _ in range(10_000):
                if STOP.wait(0.5):
                    return
                self.wfile.write(b"<")
                self.wfile.flush()
        elif self.path.startswith("/big/"):
            body = b"<html>" + b" " * (3 << 20) + b"</html>"
            self._headers("text/html", len(body))
            self.wfile.write(body)
        elif self.path.startswith("/endless/tiny/"):  # lists a file without a hash: it is read to hash it
            body = b'<html><a href="/forever/tiny-1.0-py3-none-any.whl">tiny-1.0-py3-none-any.whl</a></html>'
            self._headers("text/html", len(body))
            self.wfile.write(body)
        elif self.path.startswith("/forever/"):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            block = b"\0" * 65536
            while not STOP.is_set():
                try:
                    self.wfile.write(block)
                except OSError:
                    return
        else:
            self.send_error(404)

    def do_POST(self) -> None:  # noqa: N802 (the base class's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the upload, then silence
        STOP.wait(600)

    def _headers(self, content_type: str, length: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(held, "PAGE_DEADLINE", 2.0)
    monkeypatch.setattr(held, "FILE_DEADLINE", 2.0)
    monkeypatch.setattr(held, "PAGE_LIMIT", 1 << 20)
    STOP.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    STOP.set()  # the hostile answers end, and with them the reads the deadline left behind
    httpd.shutdown()
    httpd.server_close()
    for thread in threading.enumerate():
        if thread.name == "wheelfactory-held-read":
            thread.join(30)


def test_a_trickled_page_stops_at_its_deadline(server: str) -> None:
    with pytest.raises(PublishError, match=r"no whole answer within 2 s"):  # not the 10,000 bytes' 5,000 s
        held.read_held(f"{server}/trickle/", "tiny")


def test_a_page_larger_than_any_project_page_is_refused_not_taken_as_empty(server: str) -> None:
    with pytest.raises(PublishError, match=r"its page is over 1 MiB"):
        held.read_held(f"{server}/big/", "tiny")


def test_a_file_that_streams_forever_stops_at_its_deadline(server: str) -> None:
    with pytest.raises(PublishError, match=r"tiny-1.0-py3-none-any.whl \(listed without a sha256, read to hash it\): "
                                           r"no whole answer within 2 s"):
        held.read_held(f"{server}/endless/", "tiny")


def test_the_limits_the_publishing_page_gives_are_the_readers() -> None:
    from tests.testkit import docs_text

    text = " ".join(docs_text("publishing.md").split())
    said = (f"{held.TIMEOUT:.0f} s to connect and for each read, {held.PAGE_DEADLINE:.0f} s for a whole page and "
            f"{held.FILE_DEADLINE:.0f} s for a file listed without a hash (read to hash it), "
            f"{held.PAGE_LIMIT >> 20} MiB for a page")
    assert said in text and f"{held.FILE_LIMIT >> 30} GiB for a file" in text
    assert f"every read of one target shares {held.TARGET_DEADLINE:.0f} s in all" in text
    assert (f"Each twine call (the uploads to one index) has {upload.UPLOAD_BASE:.0f} s, and one more per "
            f"{upload.UPLOAD_RATE >> 10} KiB sent") in text


def test_the_reads_of_one_target_share_one_deadline(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page is read within its own 2 s, and the target has 3 s for all of them: the second
    trickled page stops at what the first left, naming the target's limit."""
    monkeypatch.setattr(held, "TARGET_DEADLINE", 3.0)
    deadline = held.Deadline.from_now()
    with pytest.raises(PublishError, match=r"no whole answer within 2 s"):
        held.read_held(f"{server}/trickle/", "tiny", deadline=deadline)
    with pytest.raises(PublishError, match=r"not read when the 3 s that every read of one target shares had passed"):
        held.read_held(f"{server}/trickle/", "other", deadline=deadline)


def test_an_upload_the_server_never_answers_stops_at_its_deadline(server: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """twine (the real one) posts to a server that reads the request and never answers."""
    from tests.fake_wheels import make_wheel

    monkeypatch.setattr(upload, "UPLOAD_BASE", 2.0)
    wheel = make_wheel(tmp_path, "tiny", "1.0")
    monkeypatch.setenv("TWINE_USERNAME", "user")
    monkeypatch.setenv("TWINE_PASSWORD", "secret")
    sent = upload.UploadFile(wheel, wheel.name, "tiny", "0" * 64, None)
    index = upload.IndexUpload(None, f"{server}/silent/", None, None, (sent,), ())
    with pytest.raises(PublishError, match=r"uploading 1 file\(s\) to .*: no whole answer within 2 s \(2 s, and 1 s "
                                           r"per 256 KiB sent"):
        upload.upload_index(index, say=lambda line: None)
