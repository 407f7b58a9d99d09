"""The sha256 of a stream of bytes, read a MiB at a time: one home for the loop that files on
disk, members of a zip and files opened through a held descriptor all go through."""

from __future__ import annotations

import hashlib
from typing import BinaryIO, Protocol

CHUNK = 1 << 20


class _Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


def stream_sha256(stream: BinaryIO | _Readable) -> bytes:
    """The raw sha256 of what ``stream`` reads to its end."""
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    return digest.digest()
