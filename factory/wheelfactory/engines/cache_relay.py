"""A Redis connection for a build container that has no network.

Build containers run with ``--network none``. A compile cache on Redis is reached through a
unix socket in a host directory mounted into the container: this relay serves that socket on
the host and pipes every connection to the Redis endpoint (TCP or a socket). Inside the
container, ``socketpipe.py`` (copied into the same directory) listens on loopback TCP for
sccache and pipes to the socket. Nothing else is reachable from the container, so builds stay
hermetic apart from the cache, whose entries sccache addresses by content.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from pathlib import Path

from wheelfactory.engines import socketpipe
from wheelfactory.engines.compile_cache import RELAY_SCRIPT, RELAY_SOCKET
from wheelfactory.errors import WheelfactoryError
from wheelfactory.plan.compile_cache_settings import RedisEndpoint


class RedisUnreachable(WheelfactoryError):
    pass


def address_of(endpoint: RedisEndpoint) -> tuple[str, str, int]:
    if endpoint.socket is not None:
        return "unix", str(endpoint.socket), 0
    return "tcp", endpoint.host or "127.0.0.1", endpoint.port


def ping(endpoint: RedisEndpoint, timeout: float = 3.0) -> None:
    """Raise RedisUnreachable unless the endpoint answers PING (a real Redis, not just a port)."""
    try:
        with socketpipe.connect(address_of(endpoint), timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = sock.recv(64)
    except OSError as exc:
        raise RedisUnreachable(f"Redis at {endpoint} does not answer: {exc}") from None
    if not reply.startswith((b"+PONG", b"-NOAUTH")):
        raise RedisUnreachable(f"{endpoint} answered {reply[:40]!r} to PING: is it Redis?")


class RedisRelay:
    """Serves ``<directory>/redis.sock`` (and ships the in-container half beside it) until closed."""

    def __init__(self, endpoint: RedisEndpoint) -> None:
        self.endpoint = endpoint
        # A short path: unix socket paths are limited to ~107 bytes.
        self.directory = Path(tempfile.mkdtemp(prefix="wf-redis-"))
        self.directory.chmod(0o755)  # the container's user must reach the socket
        shutil.copyfile(socketpipe.__file__, self.directory / RELAY_SCRIPT)
        self.path = self.directory / RELAY_SOCKET
        self._server = socketpipe.listen(("unix", str(self.path), 0))
        self._stop = threading.Event()
        target = address_of(endpoint)
        self._thread = threading.Thread(
            target=socketpipe.serve,
            name="wheelfactory-redis-relay",
            daemon=True,
            args=(self._server, lambda: socketpipe.connect(target), self._stop),
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
