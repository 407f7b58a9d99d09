"""Files under a root we read or write for the user (a publish target, a served root), reached
one component at a time from the root's descriptor: no symbolic link below the root is followed
and no special file is opened. Each check is made on the descriptor (O_NOFOLLOW, then fstat),
never on a name that could change between the check and the use. O_NONBLOCK on every open: a FIFO
planted where a file belongs never waits for a writer.

The root itself is the user's to name (its own path may pass through links: ``dist/index`` is
one); what lies below it is what a hostile tree could plant.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """A path below the root that is not what belongs there; ``str()`` is one line naming it."""

    def __init__(self, path: Path, found: str, expected: str) -> None:
        super().__init__(f"{path} is {found}, where {expected} belongs")
        self.path, self.found = path, found


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, words in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return words
    return "a special file"


def _found(parent: int, name: str) -> str:
    """What ``name`` in the directory ``parent`` is, for a refusal (it may be gone by now)."""
    try:
        return kind(os.lstat(name, dir_fd=parent).st_mode)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def _open_root(root: Path) -> int:
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _step(parent: int, name: str, where: Path, *, create: bool) -> int:
    """The directory ``name`` under ``parent`` (made when missing and ``create``), opened without
    following a link; Refused when something else is there."""
    while True:
        try:
            fd = os.open(name, _READ | os.O_DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass  # made meanwhile (another writer): open what is there
            continue
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Refused(where, _found(parent, name), "a folder") from None
            raise
        return fd


@contextmanager
def directory(root: Path, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """The descriptor of ``root/parts...``, each part a directory reached without following a link
    (made when missing and ``create``). FileNotFoundError when one is missing; Refused when one is
    a link or not a directory."""
    fd = _open_root(root)
    try:
        where = root
        for part in parts:
            where = where / part
            following = _step(fd, part, where, create=create)
            os.close(fd)
            fd = following
        yield fd
    finally:
        os.close(fd)


def open_regular(root: Path, relative: str) -> int | None:
    """A read descriptor of the regular file at ``relative`` under ``root``; None when there is
    none (or a folder on its way is missing); Refused when it, or a folder on its way, is a link
    or anything but a regular file."""
    *folders, name = relative.split("/")
    try:
        with directory(root, tuple(folders)) as parent:
            try:
                fd = os.open(name, _READ, dir_fd=parent)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                    raise Refused(root / relative, _found(parent, name), "a regular file") from None
                raise
    except FileNotFoundError:
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Refused(root / relative, kind(mode), "a regular file")
    os.set_blocking(fd, True)
    return fd


def walk_under(root: str | int, parts: list[str]) -> tuple[int, bool] | None:
    """(descriptor, is a directory) of ``parts`` under ``root`` (a path, whose own link is followed,
    or a directory descriptor); None when one is missing, a link, or neither a directory nor (the
    last) a regular file: what a server answers 404 for."""
    try:
        fd = (
            os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            if isinstance(root, str)
            else os.dup(root)
        )
    except OSError:
        return None
    try:
        for index, part in enumerate(parts):
            following = os.open(part, _READ, dir_fd=fd)
            os.close(fd)
            fd = following
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) and index == len(parts) - 1:
                os.set_blocking(fd, True)
                return fd, False
            if not stat.S_ISDIR(mode):
                os.close(fd)
                return None
        return fd, True
    except OSError:
        os.close(fd)
        return None
