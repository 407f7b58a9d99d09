"""The relay that carries a Redis connection into a container without network, against a small
Redis-speaking server (the real Redis path is tests/engines/test_compile_cache_redis.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheelfactory.engines import socketpipe
from wheelfactory.engines.cache_relay import RedisRelay, RedisUnreachable, ping
from wheelfactory.engines.compile_cache import RELAY_SCRIPT
from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches, compile_cache_for
from wheelfactory.engines.image_facts import ImageFacts
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.plan.compile_cache_settings import CompileCache, parse_redis


class FakeRedis:
    """Answers PING with +PONG and echoes anything else back: enough to see bytes go both ways."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _serve(client: socket.socket) -> None:
        with client:
            while data := client.recv(65536):
                client.sendall(b"+PONG\r\n" if b"PING" in data else data)


@pytest.fixture
def fake_redis() -> Iterator[FakeRedis]:
    server = FakeRedis()
    yield server
    server.server.close()


def roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        received += sock.recv(65536)
    return received


def test_ping_tells_redis_from_nothing(fake_redis: FakeRedis) -> None:
    endpoint = parse_redis(f"redis://127.0.0.1:{fake_redis.port}")
    assert endpoint is not None
    ping(endpoint)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = parse_redis(f"redis://127.0.0.1:{probe.getsockname()[1]}")
    assert dead is not None
    with pytest.raises(RedisUnreachable, match="does not answer"):
        ping(dead)


def test_relay_pipes_the_socket_to_redis_and_ships_its_other_half(fake_redis: FakeRedis) -> None:
    endpoint = parse_redis(f"redis://127.0.0.1:{fake_redis.port}")
    assert endpoint is not None
    with RedisRelay(endpoint) as relay:
        assert (relay.directory / RELAY_SCRIPT).read_text() == Path(socketpipe.__file__).read_text()
        payload = bytes(range(256)) * 2048  # 512 KiB: several reads
        clients = []
        for _ in range(3):  # concurrent connections, each its own upstream
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(str(relay.path))
            clients.append(sock)
        for sock in clients:
            assert roundtrip(sock, payload) == payload
            sock.close()
        assert fake_redis.connections == 3
        directory = relay.directory
    assert not directory.exists()  # closed: socket and script gone


def test_the_in_container_half_listens_before_it_returns(fake_redis: FakeRedis, tmp_path: Path) -> None:
    """socketpipe.py --background, as the build container runs it: TCP on loopback -> socket."""
    endpoint = parse_redis(f"redis://127.0.0.1:{fake_redis.port}")
    assert endpoint is not None
    with RedisRelay(endpoint) as relay, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        script = relay.directory / RELAY_SCRIPT
        started = subprocess.run([sys.executable, str(script), "--listen", f"tcp:127.0.0.1:{port}",
                                  "--to", f"unix:{relay.path}", "--background"], timeout=30)
        assert started.returncode == 0
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # no wait needed
            assert roundtrip(sock, b"*1\r\n$4\r\nECHO\r\n") == b"*1\r\n$4\r\nECHO\r\n"
        # The detached child outlives the relay: stop it. (A pattern that starts with "--" is
        # read by pkill as an option, which once left these children running after every run.)
        stopped = subprocess.run(["pkill", "-f", f"{RELAY_SCRIPT} --listen tcp:127.0.0.1:{port} "], check=False)
        assert stopped.returncode == 0, "the background relay was not found to stop"


@pytest.mark.parametrize("text", ["tcp:host", "udp:1.2.3.4:5", "unix:", "tcp:h:port"])
def test_bad_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="expected tcp:HOST:PORT or unix:PATH"):
        socketpipe.parse_address(text)


def test_an_unreachable_redis_builds_without_the_cache_and_says_why(tmp_path: Path) -> None:
    """A cache outage must not fail a release: the engine builds uncached, with a note for the log."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = parse_redis(f"redis://127.0.0.1:{probe.getsockname()[1]}/0")
    run = DockerRun(None, Wheelhouse(tmp_path / "wh"), DockerOptions(  # type: ignore[arg-type]
        base_images={"x86_64": "base"}, image_log=tmp_path / "images.log",
        compile_cache=CompileCache("sccache", tmp_path / "store", dead)), RunCaches())
    cache, _, note = compile_cache_for(run, ImageFacts("2.36", ("cp311-cp311",), None))
    assert cache is None and "does not answer" in note and note.endswith("building without the compile cache")
    again, _, note_again = compile_cache_for(run, ImageFacts("2.36", ("cp311-cp311",), None))
    assert again is None and note_again == note  # asked once per run, not per variant


def test_the_run_holds_one_relay_and_closes_it_when_it_ends(tmp_path: Path, fake_redis: FakeRedis) -> None:
    """The relay starts with the first build that asks and lives as long as the run's caches are held
    open (the session's `with`), not until the interpreter exits: leaving closes it and removes its socket."""
    run = DockerRun(None, Wheelhouse(tmp_path / "wh"), DockerOptions(  # type: ignore[arg-type]
        base_images={"x86_64": "base"}, image_log=tmp_path / "images.log",
        compile_cache=CompileCache("sccache", tmp_path / "store", parse_redis(f"redis://127.0.0.1:{fake_redis.port}/0"))),
        RunCaches())
    facts = ImageFacts("2.36", ("cp311-cp311",), None)
    with run.caches:
        cache, relay_dir, note = compile_cache_for(run, facts)
        assert cache is not None and note == "" and relay_dir is not None and (relay_dir / "redis.sock").exists()
        assert compile_cache_for(run, facts)[1] == relay_dir  # one relay for every variant of the run
    assert not relay_dir.exists()
