"""Pipe stream connections from one socket address to another: the two halves of the relay that
carries a Redis connection into a build container that has no network (see cacherelay.py).

Standard library only, Python 3.9+, no package imports: the file is also copied into the
container (where wheelfactory is not installed) and run there as a script:

    python socketpipe.py --listen tcp:127.0.0.1:6379 --to unix:/wf-cache/redis/redis.sock --background

sccache 0.16 rejects unix-socket Redis endpoints ("invalid format"), so inside the container it
talks TCP to loopback, this script carries that to the mounted socket, and the host side carries
it on to Redis.
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
from collections.abc import Callable


def parse_address(text: str) -> tuple[str, str, int]:
    """``tcp:HOST:PORT`` or ``unix:PATH`` -> (kind, host-or-path, port)."""
    kind, _, rest = text.partition(":")
    if kind == "unix" and rest:
        return "unix", rest, 0
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            return "tcp", host.strip("[]"), int(port)
    raise ValueError(f"{text!r}: expected tcp:HOST:PORT or unix:PATH")


def connect(address: tuple[str, str, int], timeout: float | None = None) -> socket.socket:
    kind, where, port = address
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(where)
    else:
        sock = socket.create_connection((where, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(None)
    return sock


def listen(address: tuple[str, str, int]) -> socket.socket:
    kind, where, port = address
    if kind == "unix":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(where)
        os.chmod(where, 0o666)  # the container's user, whoever it is, must reach it
    else:
        server = socket.socket(
            socket.AF_INET6 if ":" in where else socket.AF_INET, socket.SOCK_STREAM
        )
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((where, port))
    server.listen(64)
    return server


def serve(
    server: socket.socket, upstream: Callable[[], socket.socket], stop: threading.Event
) -> None:
    """Accept until ``server`` is closed; each connection is piped both ways to a fresh upstream."""
    while not stop.is_set():
        try:
            client, _ = server.accept()
        except OSError:
            return  # closed
        try:
            other = upstream()
        except OSError:
            # the client sees the connection end: sccache counts a cache error, compiles
            client.close()
            continue
        for source, sink in ((client, other), (other, client)):
            threading.Thread(target=pipe, args=(source, sink), daemon=True).start()


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(1 << 16)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):  # one side ended: end both, so the peer sees it
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        source.close()  # the other direction's thread closes the other socket


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--listen", required=True, help="tcp:HOST:PORT or unix:PATH")
    parser.add_argument("--to", required=True, help="tcp:HOST:PORT or unix:PATH")
    parser.add_argument(
        "--background",
        action="store_true",
        help="return once listening; keep serving in a detached child",
    )
    args = parser.parse_args(argv)
    target = parse_address(args.to)
    server = listen(parse_address(args.listen))
    if args.background and os.fork():
        return 0  # the parent: the socket listens already, so whatever runs next can connect
    if args.background:
        os.setsid()  # the child: detached, with no stream a caller could wait on
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    serve(server, lambda: connect(target), threading.Event())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
