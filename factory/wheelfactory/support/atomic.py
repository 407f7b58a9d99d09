"""Atomic output files: a reader sees the old file or the new one, never half of one.

Every file wheelfactory writes into an output (the manifest, index pages, the report, the bake
file, the workflow, wheels copied or rewritten into dist/) goes through here:

1. a temp file with a name unique to the call (``tempfile`` in the target's directory, a dot-name
   ending in ``.tmp`` so it never looks like a finished file);
2. the content written, flushed and fsynced;
3. ``os.replace`` onto the target, then the directory fsynced so the rename survives a crash.

A target that exists and is not a regular file (a directory, a device, a symlink, a fifo) is
refused with a ConfigError (exit 2). Any failure (no space left, a read-only directory) removes
the temp file, leaves the old target as it was and raises WriteFailed (exit 9), one line.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from wheelfactory.errors import ConfigError, UsageError, WriteFailed
from wheelfactory.support.inputs import kind_of

TEMP_SUFFIX = ".tmp"
# of the 255 bytes a file name may have: room for the dot, the random part and the suffix
_NAME_ROOM = 200
# fsync of a directory is not offered everywhere; the rename itself has been done.
_DIR_SYNC_UNSUPPORTED = {
    errno.EINVAL,
    errno.ENOTSUP,
    errno.EOPNOTSUPP,
    errno.EBADF,
    errno.EACCES,
    errno.EPERM,
}


def write_text(path: Path, text: str, *, encoding: str = "utf-8", what: str | None = None) -> None:
    """Replace ``path`` with ``text`` (no newline translation). ``what`` names the file in errors,
    e.g. "the bake file"."""
    write_bytes(path, text.encode(encoding), what=what)


def make_parent(path: Path, *, what: str) -> None:
    """Make the directory ``path`` goes in: a file in the way is a UsageError, any other failure
    WriteFailed (one line each)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(
            f"cannot write {what} {path}: {path.parent} is not a directory (a file is in the way)"
        ) from None
    except OSError as exc:
        raise WriteFailed(
            f"cannot write {what} {path}: cannot make {path.parent} ({exc.strerror or exc})"
        ) from None


def write_bytes(path: Path, data: bytes, *, what: str | None = None) -> None:
    """Replace ``path`` with ``data``."""
    with replacing(path, what=what) as temp, open(temp, "wb") as handle:
        handle.write(data)


@contextmanager
def replacing(path: Path, *, what: str | None = None) -> Iterator[Path]:
    """A temp path beside ``path`` for a writer that makes the file itself (a zip, a copy). When
    the block ends cleanly the temp file is fsynced and renamed onto ``path``; when it raises, the
    temp file is removed and ``path`` is untouched (an OSError becomes WriteFailed)."""
    path = Path(path)
    mode = check_replaceable(path, what=what)
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{path.name[:_NAME_ROOM]}.", suffix=TEMP_SUFFIX, dir=path.parent
        )
    except OSError as exc:
        raise _failed(path, what, exc) from None
    temp = Path(name)
    try:
        try:
            os.fchmod(fd, mode)  # mkstemp makes 0600: give the file the mode a plain write would
        finally:
            os.close(fd)
        yield temp
        _sync_file(temp)
        os.replace(temp, path)
    except OSError as exc:
        _discard(temp)
        raise _failed(path, what, exc) from None
    except BaseException:
        _discard(temp)
        raise
    _sync_dir(path, what)


def _discard(temp: Path) -> None:
    """Remove the temp file on the way out of a failed write. Its own failure (EROFS, EIO) must
    not replace the error being reported: the caller's one line says what went wrong."""
    try:
        temp.unlink(missing_ok=True)
    except OSError:
        pass


def swap_directory(temp: Path, target: Path) -> None:
    """Put the finished directory ``temp`` at ``target`` by renames: a reader finds the old
    directory or the new one (for an instant, none), never half of one. ``temp`` must be a sibling."""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists() or target.is_symlink():
        os.rename(target, old)
    os.rename(temp, target)
    shutil.rmtree(old, ignore_errors=True)


def check_replaceable(path: Path, *, what: str | None = None) -> int:
    """Refuse a target that exists and is not a regular file; returns the mode the new file gets
    (the old file's, else 0666 less the umask)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0o666 & ~_umask()
    except OSError as exc:
        raise _failed(path, what, exc) from None
    if stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode)
    kind = kind_of(info.st_mode)
    raise ConfigError(
        f"cannot write {_label(path, what)}: it exists and is {kind}, not a regular file; "
        "move it away or name another path"
    )


def leftovers(directory: Path) -> list[Path]:
    """Temp files a killed writer left in ``directory`` (never a finished file: they are dot-names
    ending in .tmp), symlinks included (unlinking one never touches what it points at). Remove them
    only while holding the lock of whatever writes there."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f".*{TEMP_SUFFIX}") if p.is_symlink() or p.is_file())


def _sync_file(temp: Path) -> None:
    fd = os.open(temp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: Path, what: str | None) -> None:
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_SYNC_UNSUPPORTED:
            raise _failed(path, what, exc) from None
    finally:
        os.close(fd)


def _failed(path: Path, what: str | None, exc: OSError) -> WriteFailed:
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "free some space and run again",
        errno.EDQUOT: "free some space and run again",
        errno.EROFS: f"{path.parent} is on a read-only filesystem: write somewhere else",
        errno.EACCES: f"make {path.parent} writable or write somewhere else",
        errno.EPERM: f"make {path.parent} writable or write somewhere else",
        errno.ENOENT: f"check that {path.parent} exists",
        errno.ENOTDIR: f"{path.parent} is not a directory: write somewhere else",
        errno.ENAMETOOLONG: "name a shorter path",
    }.get(exc.errno or 0)
    return WriteFailed(
        f"cannot write {_label(path, what)}: {reason}" + (f"; {hint}" if hint else "")
    )


def _label(path: Path, what: str | None) -> str:
    return f"{what} {path}" if what else str(path)


@cache
def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)  # no /proc: the one moment the umask is touched, then put back
    os.umask(current)
    return current
