"""Real servers on 127.0.0.1 for the publish tests, fast tier and Docker tier alike:
devpi-server (users, one index per variant, created over its REST API), pypiserver (one flat
index, uploads behind an htpasswd file) and moto's standalone server standing in for an S3
service (no S3 service is reachable here). All are test dependencies (pyproject.toml's ``test``
extra), run from this interpreter's environment. Also: what a published static index holds (its
files' hashes, links to missing files) and an HTTP access log read (which files an installer fetched)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urljoin, urlsplit

from wheelfactory.publish.stores import LOCK_FILE

BIN = Path(sys.executable).parent
T = TypeVar("T")
START_TIMEOUT = 120.0  # a cold devpi-server on a slow CI machine imports for ~10 s


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except urllib.error.HTTPError:
        return True  # it answers, if not with 200
    except OSError:
        return False


@dataclass
class Server:
    """A server process; ``seconds``: from its start until it answered."""

    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path
    seconds: float

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def start(command: list[str], *, port: int, probe: str, log: Path, cwd: Path) -> Server:
    """``command`` (listening on ``port``) started and polled at ``probe`` until it answers;
    RuntimeError with the end of its log when it exits or does not answer in time."""
    url = f"http://127.0.0.1:{port}"
    begun = time.monotonic()
    with log.open("ab") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=cwd,
                                   env={**os.environ, "PYTHONWARNINGS": "ignore"})
    while time.monotonic() - begun < START_TIMEOUT:
        if process.poll() is not None:
            break
        if _answers(url + probe):
            return Server(url, process, log, time.monotonic() - begun)
        time.sleep(0.1)
    process.kill()
    process.wait(timeout=30)
    raise RuntimeError(f"{command[0]} did not answer at {url}{probe}: {log.read_text(errors='replace')[-3000:]}")


def start_retrying(launch: Callable[[Path], T], root: Path) -> T:
    """A free port is only free until another process takes it: try three."""
    for attempt in range(2):
        try:
            return launch(root / f"try{attempt}")
        except RuntimeError:
            pass
    return launch(root / "try2")


class Launched(Protocol):
    server: Server


L = TypeVar("L", bound=Launched)


@contextlib.contextmanager
def running(launch: Callable[[Path], L], root: Path) -> Iterator[L]:
    """``launch`` (DevpiServer.launch, ...) started under ``root`` (``start_retrying``), stopped after."""
    started = start_retrying(launch, root)
    try:
        yield started
    finally:
        started.server.stop()


def _json(method: str, url: str, body: dict[str, object], headers: dict[str, str] | None = None) -> dict[str, object]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json",
                                              **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, object] = json.loads(answer.read())
        return result


@dataclass
class DevpiServer:
    server: Server
    users: set[str] = field(default_factory=set)

    @classmethod
    def launch(cls, root: Path) -> DevpiServer:
        root.mkdir(parents=True)
        serverdir = root / "server"
        subprocess.run([str(BIN / "devpi-init"), "--serverdir", str(serverdir), "--no-root-pypi"], check=True,
                       capture_output=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300)
        port = free_port()
        return cls(start([str(BIN / "devpi-server"), "--serverdir", str(serverdir), "--host", "127.0.0.1",
                          "--port", str(port), "--offline-mode"], port=port, probe="/+api", log=root / "devpi.log",
                         cwd=root))

    @property
    def url(self) -> str:
        return self.server.url

    def user_with_indexes(self, user: str, password: str, indexes: list[str]) -> None:
        """A user (PUT /<user>), logged in (POST /+login), who owns ``indexes`` (PUT /<user>/<index>):
        non-volatile stages with no bases, as a release index is."""
        _json("PUT", f"{self.url}/{user}", {"password": password})
        login = _json("POST", f"{self.url}/+login", {"user": user, "password": password})
        result = login["result"]
        assert isinstance(result, dict)
        token = base64.b64encode(f"{user}:{result['password']}".encode()).decode()
        for index in indexes:
            _json("PUT", f"{self.url}/{user}/{index}", {"type": "stage", "bases": [], "volatile": False},
                  headers={"X-Devpi-Auth": token})
        self.users.add(user)


@dataclass
class PypiServer:
    server: Server
    username: str
    password: str
    packages: Path

    @classmethod
    def launch(cls, root: Path) -> PypiServer:
        root.mkdir(parents=True)
        (root / "packages").mkdir()
        # passlib (pypiserver's htpasswd reader) writes the file; in a child, where its import of
        # the deprecated crypt module warns without failing this session (filterwarnings = error)
        code = ("import sys; from passlib.apache import HtpasswdFile; f = HtpasswdFile(sys.argv[1], new=True); "
                "f.set_password('uploader', 'uploader-secret'); f.save()")
        subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(root / "htpasswd")], check=True, timeout=60)
        port = free_port()
        # --disable-fallback: an unknown project is a 404 here, not a redirect to a public index
        server = start([str(BIN / "pypi-server"), "run", "-p", str(port), "-i", "127.0.0.1", "-a", "update",
                        "-P", str(root / "htpasswd"), "--disable-fallback", "--hash-algo", "sha256",
                        str(root / "packages")], port=port, probe="/health", log=root / "pypiserver.log", cwd=root)
        return cls(server, "uploader", "uploader-secret", root / "packages")

    @property
    def url(self) -> str:
        return self.server.url


@dataclass
class S3Server:
    """moto's standalone server: the S3 API on 127.0.0.1, any credentials accepted."""

    server: Server
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1"}

    @classmethod
    def launch(cls, root: Path) -> S3Server:
        root.mkdir(parents=True)
        port = free_port()
        binary = shutil.which("moto_server", path=str(BIN)) or "moto_server"
        return cls(start([binary, "-H", "127.0.0.1", "-p", str(port)], port=port, probe="/moto-api/",
                         log=root / "moto.log", cwd=root))

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def env(self) -> dict[str, str]:
        """What boto3 (a publish) needs to reach this endpoint."""
        return {**self.credentials, "AWS_ENDPOINT_URL": self.url}

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name=self.credentials["AWS_DEFAULT_REGION"],
                            aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"])

    def public_bucket(self, name: str) -> None:
        """Bucket ``name``, which anyone may read (what a public index needs on any S3 store)."""
        client = self.client()
        client.create_bucket(Bucket=name)
        client.put_bucket_policy(Bucket=name, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{name}/*"}]}))


# An access log line of `wheelfactory serve` or http.server: the path, the status, and (serve) the
# file a negotiated simple-API directory was answered with.
REQUEST = re.compile(r'"GET (\S+) HTTP/1\.[01]" (\d{3}) \S+(?: \((index\.json|index\.html)\))?')
Requests = list[tuple[str, int, str | None]]  # (path, status, negotiated file)


def requests_in(log: str) -> Requests:
    return [(m.group(1), int(m.group(2)), m.group(3)) for m in REQUEST.finditer(log)]


def fetched(requests: Requests) -> tuple[list[str], list[str]]:
    """(.metadata paths, .whl paths) answered 200."""
    ok = [path for path, status, _ in requests if status == 200]
    return [p for p in ok if p.endswith(".whl.metadata")], [p for p in ok if p.endswith(".whl")]


# What a static index published to a directory holds

def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the publish lock aside) -> sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def dangling_links(root: Path) -> list[str]:
    """Links of every page (HTML and PEP 691 JSON) under ``root`` to a file that is not there."""
    missing = []
    for page in root.rglob("*"):
        if page.suffix not in (".html", ".json") or not page.is_file():
            continue
        base = "file://" + str(page)
        if page.suffix == ".html":
            parser = _Links()
            parser.feed(page.read_text())
            hrefs = parser.hrefs
        else:
            data = json.loads(page.read_text())
            hrefs = [f["url"] for f in data.get("files", []) if isinstance(f, dict)] if isinstance(data, dict) else []
        for href in hrefs:
            if "://" in href:
                continue
            target = Path(unquote(urlsplit(urljoin(base, href)).path))
            if not (target.is_file() or (target / "index.html").is_file()):
                missing.append(f"{page.relative_to(root)} -> {href}")
    return missing
