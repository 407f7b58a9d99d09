"""Reading an input file the user named (matrix.toml, a compatibility table, a manifest, index.json):
only a regular file, never more than a cap, never blocking. `-m /dev/zero`, a FIFO or a directory is
one line that says what the path is, instead of a read that never returns."""

from __future__ import annotations

import os
import stat
from pathlib import Path

INPUT_CAP = 64 << 20  # a matrix, a table or a manifest of a whole release matrix is far smaller


class NotARegularFile(OSError):
    """The path exists and is not a regular file (its kind in ``strerror``), or is over the cap."""


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is that is no regular file: "a directory", "a fifo"..."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_input(path: Path, *, cap: int = INPUT_CAP) -> bytes:
    """The bytes of ``path`` (symlinks followed), which must be a regular file of at most ``cap``
    bytes; FileNotFoundError when it is missing, NotARegularFile or another OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(0, f"it is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > cap:
            raise NotARegularFile(
                0, f"it is {info.st_size} bytes, over the {cap >> 20} MiB an input may be"
            )
        chunks = []
        left = cap + 1
        while left > 0:  # the size can change under us: read at most the cap, whatever fstat said
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:
            raise NotARegularFile(0, f"it grew past the {cap >> 20} MiB an input may be")
        return data
    finally:
        os.close(fd)
