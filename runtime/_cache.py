"""The on-disk JIT cache: directory safety, the OS lock, completion records, atomic publish.

Layout under ``<cache>/torch_extensions/``::

    <key>/                 a finished build: the .so, complete.json (sha256 + size), build.log
    <key>.lock             flock()ed by the one process building <key>; never deleted
    <key>.tmp-<pid>-<rnd>  a build in progress; renamed to <key> when complete
    <key>.stale-<...>      a rejected entry on its way out
    <key>.error.log        the log of the last failed build

flock() locks belong to the open file, so the kernel drops them when the holder dies, even by
SIGKILL: a killed build never leaves a lock that hangs the next run. The lock fd is
close-on-exec so compiler children never hold it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from ._errors import UnsafeCacheDirError

__all__ = [
    "COMPLETE_FILE",
    "CompletionRecord",
    "FileLock",
    "check_private_dir",
    "clean_stale_entries",
    "discard_entry",
    "ensure_private_dir",
    "entry_dir_problem",
    "new_temp_dir",
    "open_private_file",
    "private_dir_problem",
    "publish_entry",
    "sha256_file",
    "verify_entry",
]

COMPLETE_FILE = "complete.json"
ELF_MAGIC = b"\x7fELF"
COMPLETION_SCHEMA = 1


def private_dir_problem(path: Path, mode: int, owner: int, me: int, env_var: str) -> str | None:
    """Pure: why a directory with this mode/owner must not hold libraries we load, or None."""
    if owner != me:
        return (
            f"refusing to use cache directory {path}: it is owned by uid {owner}, not by this user "
            f"(uid {me}), who could replace the libraries loaded from it. Fix: set {env_var} to a "
            f"directory you own, or `chown {me} {path} && chmod 700 {path}`"
        )
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        writers = " and ".join(
            who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if mode & bit
        )
        return (
            f"refusing to use cache directory {path}: it is writable by {writers}"
            f" (mode {stat.S_IMODE(mode):04o}), so another user could plant a library that this process "
            f"would load. Fix: `chmod 700 {path}` (or set {env_var} to a private directory)"
        )
    return None


def check_private_dir(path: Path, env_var: str) -> None:
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheDirError(
            f"cache path {path} is not a directory. Fix: remove it or set {env_var}"
        )
    problem = private_dir_problem(path, st.st_mode, st.st_uid, os.geteuid(), env_var)
    if problem is not None:
        raise UnsafeCacheDirError(problem)


def ensure_private_dir(path: Path, env_var: str) -> None:
    """Create ``path`` (mode 0700) if needed, then refuse it unless only we can write to it."""
    longest = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096
    if len(os.fsencode(str(path))) >= longest:  # os.makedirs would recurse past Python's limit
        raise UnsafeCacheDirError(
            f"cache directory path is {len(os.fsencode(str(path)))} bytes long, over this system's limit "
            f"of {longest}. Fix: set {env_var} to a shorter path"
        )
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UnsafeCacheDirError(
            f"cannot create cache directory {path}: {exc}. Fix: set {env_var} to a writable directory"
        ) from exc
    check_private_dir(path, env_var)


class FileLock:
    """An exclusive flock() on ``path``: released by close or by the death of the process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        try:
            fd = os.open(
                self.path,
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                0o600,
            )
        except OSError as exc:
            raise UnsafeCacheDirError(
                f"cannot use the lock file {self.path} ({exc.strerror}). Fix: remove it; the next load makes it again"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UnsafeCacheDirError(
                f"the lock path {self.path} is not a regular file. Fix: remove it; the next load makes it again"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:  # (hashlib.file_digest is 3.11+; kernel wheels serve 3.9+)
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


RECORD_SIZE_CAP = 64 * 1024  # a completion record is ~300 bytes: more is not one of ours


class UnsafeEntryFile(Exception):
    """A file in a cache entry that is not a plain, private file of ours: never read, never loaded."""


def _not_private(st: os.stat_result) -> str | None:
    """Why a file or directory with this status is not ours alone to write, or None."""
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by this user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _safe_mode_problem(st: os.stat_result) -> str | None:
    return "not a regular file" if not stat.S_ISREG(st.st_mode) else _not_private(st)


def open_private_file(path: Path) -> int:
    """An fd of ``path`` read-only, when it is a regular file of ours that only we can write; raises
    UnsafeEntryFile otherwise. Never follows a symlink and never blocks: a FIFO or a device (or a
    link to /dev/zero) is refused by what it is, before a byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntryFile(f"{path} is a symlink") from None
        raise UnsafeEntryFile(f"{path} cannot be opened ({exc.strerror})") from None
    problem = _safe_mode_problem(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise UnsafeEntryFile(f"{path} is {problem}")
    return fd


def read_private_file(path: Path, cap: int) -> bytes:
    """The bytes of a private regular file (see open_private_file), at most ``cap`` of them."""
    fd = open_private_file(path)
    try:
        if os.fstat(fd).st_size > cap:
            raise UnsafeEntryFile(f"{path} is larger than {cap} bytes")
        return os.read(fd, cap + 1)[:cap]
    finally:
        os.close(fd)


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return digest.hexdigest()
        digest.update(block)


def entry_dir_problem(entry: Path) -> str | None:
    """Why a cache entry directory must not be trusted (as the cache root: a real directory of ours
    that only we can write), or None."""
    try:
        st = os.lstat(entry)
    except OSError as exc:
        return f"the entry cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "the entry is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "the entry is not a directory"
    problem = _not_private(st)
    return None if problem is None else f"the entry is {problem}"


def plain_library_name(name: str) -> bool:
    """A record's library: one plain file name inside its entry (not ".", "..", a path, or empty)."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and "\x00" not in name
        and name != COMPLETE_FILE
    )


class CompletionRecord(NamedTuple):
    """Written last into a finished build: what a later load verifies before dlopen."""

    library: str
    sha256: str
    size: int
    namespace: str
    key: str
    seconds: float = 0.0

    def write(self, directory: Path) -> None:
        data = {"schema": COMPLETION_SCHEMA, **self._asdict()}
        path = directory / COMPLETE_FILE
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())

    @classmethod
    def read(cls, directory: Path) -> CompletionRecord:
        data = json.loads(
            read_private_file(directory / COMPLETE_FILE, RECORD_SIZE_CAP).decode("utf-8")
        )
        if not isinstance(data, dict) or data.get("schema") != COMPLETION_SCHEMA:
            raise ValueError(f"unknown completion record schema in {directory / COMPLETE_FILE}")
        return cls(
            library=str(data["library"]),
            sha256=str(data["sha256"]),
            size=int(data["size"]),
            namespace=str(data["namespace"]),
            key=str(data["key"]),
            seconds=float(data.get("seconds", 0.0)),
        )


def verify_entry(entry: Path, key: str, namespace: str) -> tuple[CompletionRecord | None, str]:
    """(record, "") when ``entry`` holds a finished, intact build of ``key``; else (None, why not).
    Everything is checked as the cache root is (a private directory, private regular files, never
    through a symlink) and nothing read can block: a hostile entry is a stale one, rebuilt."""
    problem = entry_dir_problem(entry)
    if problem is not None:
        return None, problem
    try:
        record = CompletionRecord.read(entry)
    except FileNotFoundError:
        return None, "no completion record"
    except UnsafeEntryFile as exc:
        return None, f"unsafe completion record: {exc}"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"corrupt completion record: {exc}"
    if not plain_library_name(record.library):
        return (
            None,
            f"the completion record names {record.library!r}, not a library file in the entry",
        )
    if record.key != key or record.namespace != namespace:
        return (
            None,
            f"completion record is for {record.key}/{record.namespace}, expected {key}/{namespace}",
        )
    library = entry / record.library
    try:
        fd = open_private_file(library)
    except FileNotFoundError:
        return None, f"the library {library} is missing"
    except UnsafeEntryFile as exc:
        return None, f"unsafe library: {exc}"
    try:
        size = os.fstat(fd).st_size
        if size != record.size:
            return (
                None,
                f"the library is {size} bytes, its record says {record.size} (truncated or replaced)",
            )
        # A record may name another file of the entry (its build.log) with that file's true hash:
        # what is not a shared object would fail dlopen on every load, never rebuilt.
        if os.pread(fd, len(ELF_MAGIC), 0) != ELF_MAGIC:
            return None, f"{library.name} is not a shared library (no ELF header)"
        digest = _sha256_fd(fd)
    finally:
        os.close(fd)
    if digest != record.sha256:
        return (
            None,
            f"the library's sha256 {digest[:12]}... does not match its record {record.sha256[:12]}...",
        )
    return record, ""


def new_temp_dir(root: Path, key: str) -> Path:
    path = root / f"{key}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    path.mkdir(mode=0o700)
    return path


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_entry(temp: Path, final: Path) -> None:
    """Atomically make a finished temp dir visible as ``final`` (the caller holds the key's lock)."""
    for child in temp.iterdir():
        if child.is_file():
            with open(child, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(temp)
    os.rename(temp, final)
    _fsync_dir(final.parent)


def discard_entry(entry: Path) -> None:
    """Move a rejected entry out of the way first (rename is atomic), then delete it.

    Processes that already mapped its library keep their mapping: unlinking does not change it.
    """
    if not os.path.lexists(entry):
        return
    doomed = entry.with_name(f"{entry.name}.stale-{os.getpid()}-{os.urandom(4).hex()}")
    os.rename(entry, doomed)
    if os.path.islink(doomed) or not os.path.isdir(doomed):
        os.unlink(doomed)  # a link (never followed) or a file in the entry's place
    else:
        shutil.rmtree(doomed, ignore_errors=True)


def clean_stale_entries(root: Path, held_key: str) -> list[Path]:
    """Delete temp/stale dirs nobody is building: ours (we hold its lock) and any whose lock is free."""
    removed: list[Path] = []
    for entry in root.iterdir():
        name = entry.name
        marker = ".tmp-" if ".tmp-" in name else ".stale-" if ".stale-" in name else None
        if marker is None or not entry.is_dir():
            continue
        key = name.split(marker, 1)[0]
        if key == held_key:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
            continue
        lock = FileLock(root / f"{key}.lock")
        if lock.acquire(blocking=False):  # nobody builds that key now: its temp dirs are leftovers
            try:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
            finally:
                lock.release()
    return removed
