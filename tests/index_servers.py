"""Real package index servers on 127.0.0.1 for the upload tests: devpi-server (users, one index
per variant, created over its REST API) and pypiserver (one flat index, uploads behind an
htpasswd file). Both are test dependencies (pyproject.toml's ``test`` extra), run from this
interpreter's environment; the conftest starts each once per session."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

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
