"""support/atomic.py: a unique temp file per call, refusals of non-regular targets, and no partial
file (and the old target intact) when a write fails."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from tests.testkit import race
from wheelfactory.errors import ConfigError, WriteFailed
from wheelfactory.support import atomic

THREADS = 16
WRITES = 100


def no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(atomic.TEMP_SUFFIX)]


def test_writes_text_bytes_and_through_a_temp_path(tmp_path: Path) -> None:
    atomic.write_text(tmp_path / "a.txt", "héllo\n")
    atomic.write_bytes(tmp_path / "b.bin", b"\x00\x01")
    with atomic.replacing(tmp_path / "c.whl") as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".c.whl.") and temp.name.endswith(".tmp")
        assert not (tmp_path / "c.whl").exists()  # nothing appears before the block ends
        temp.write_bytes(b"zip")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01" and (tmp_path / "c.whl").read_bytes() == b"zip"
    assert no_temp_files(tmp_path)


def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        atomic._umask.cache_clear()
        atomic.write_text(tmp_path / "new", "x")
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o644  # not mkstemp's 0600
        (tmp_path / "old").write_text("x")
        (tmp_path / "old").chmod(0o755)
        atomic.write_text(tmp_path / "old", "y")
        assert stat.S_IMODE((tmp_path / "old").stat().st_mode) == 0o755
    finally:
        os.umask(previous)
        atomic._umask.cache_clear()


def test_every_call_has_its_own_temp_file_under_many_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """16 threads x 100 writes of one target: each write must use a temp name no other call uses
    (a per-process name makes one thread rename another's temp file away: FileNotFoundError)."""
    target = tmp_path / "shared.json"
    seen: list[str] = []
    lock = threading.Lock()
    real_replace = os.replace

    def recording_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        with lock:
            seen.append(os.fspath(src))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", recording_replace)
    errors = race(lambda n, i: atomic.write_text(target, f"{n}:{i}\n" * 50), THREADS, WRITES)
    assert errors == []
    assert len(seen) == THREADS * WRITES
    assert len(set(seen)) == len(seen)  # not one temp name used twice
    lines = set(target.read_text().splitlines())
    assert len(lines) == 1  # one whole write, never a mix of two
    assert no_temp_files(tmp_path)


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_symlink(path: Path) -> None:
    (path.parent / "real.txt").write_text("real\n")
    path.symlink_to("real.txt")


def make_directory(path: Path) -> None:
    path.mkdir()
    (path / "inside.txt").write_text("kept\n")


@pytest.mark.parametrize(("make", "kind"), [(make_directory, "a directory"), (make_symlink, "a symlink"),
                                            (make_fifo, "a fifo")])
def test_a_target_that_is_not_a_regular_file_is_refused(tmp_path: Path, make: object, kind: str) -> None:
    target = tmp_path / "out.json"
    make(target)  # type: ignore[operator]
    before = os.lstat(target)
    for write in (lambda: atomic.write_text(target, "x"), lambda: atomic.write_bytes(target, b"x")):
        with pytest.raises(ConfigError) as caught:
            write()
        message = str(caught.value)
        assert caught.value.exit_code == 2 and "\n" not in message
        assert str(target) in message and kind in message and "move it away" in message
    with pytest.raises(ConfigError), atomic.replacing(target) as temp:
        temp.write_text("never")  # pragma: no cover (refused before the block)
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert no_temp_files(tmp_path)
    if kind == "a symlink":
        assert (tmp_path / "real.txt").read_text() == "real\n"  # not written through the link
    if kind == "a directory":
        assert (target / "inside.txt").read_text() == "kept\n"


def test_a_device_like_dev_full_is_refused(tmp_path: Path) -> None:
    """A character device made in tmp_path (1, 7 is /dev/full); needs CAP_MKNOD, else skipped."""
    target = tmp_path / "full"
    try:
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    with pytest.raises(ConfigError, match="a character device"):
        atomic.write_text(target, "x")
    assert stat.S_ISCHR(os.lstat(target).st_mode) and no_temp_files(tmp_path)


def enospc(*_: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["replace", "fsync", "write"])
def test_a_failure_mid_write_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            where: str) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old\n")
    if where == "replace":
        monkeypatch.setattr(os, "replace", enospc)
    elif where == "fsync":
        monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(WriteFailed) as caught:
        if where == "write":
            with atomic.replacing(target, what="the manifest") as temp:
                temp.write_text("half")
                enospc()  # the writer (a zip, a copy) runs out of space
        else:
            atomic.write_text(target, "new\n" * 1000, what="the manifest")
    message = str(caught.value)
    assert caught.value.exit_code == 9 and "\n" not in message
    assert message.startswith(f"cannot write the manifest {target}: No space left on device")
    assert "free some space" in message
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_a_read_only_directory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes into a 0555 directory: refuse the temp file as the kernel would
        real_mkstemp = tempfile.mkstemp

        def refused(*args: object, dir: str | None = None, **kwargs: object) -> tuple[int, str]:
            if dir is not None and Path(dir) == folder:
                raise PermissionError(errno.EACCES, "Permission denied", str(folder))
            return real_mkstemp(*args, dir=dir, **kwargs)  # type: ignore[call-overload,no-any-return]

        monkeypatch.setattr(tempfile, "mkstemp", refused)
    try:
        with pytest.raises(WriteFailed, match=f"cannot write {folder / 'x.json'}: Permission denied; make"):
            atomic.write_text(folder / "x.json", "{}")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_an_exception_in_the_block_removes_the_temp_and_passes_through(tmp_path: Path) -> None:
    target = tmp_path / "w.whl"
    with pytest.raises(KeyError), atomic.replacing(target) as temp:
        temp.write_bytes(b"half")
        raise KeyError("not an OSError: not wrapped")
    assert list(tmp_path.iterdir()) == []


def test_leftovers_are_temp_files_only(tmp_path: Path) -> None:
    (tmp_path / ".manifest.json.abc123.tmp").write_text("{")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / ".wheelfactory.lock").write_text("")
    (tmp_path / ".d.tmp").mkdir()
    assert atomic.leftovers(tmp_path) == [tmp_path / ".manifest.json.abc123.tmp"]
    assert atomic.leftovers(tmp_path / "missing") == []


@pytest.mark.parametrize("failure", [OSError(errno.EROFS, "Read-only file system"), KeyError("not an OSError")])
def test_a_cleanup_that_fails_does_not_hide_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      failure: BaseException) -> None:
    """The temp file cannot be removed either (the directory went read-only mid-write): the caller
    still gets the write's own error, one line, not a traceback from the cleanup."""
    target = tmp_path / "bake.json"
    target.write_text("old\n")
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(atomic.TEMP_SUFFIX):
            raise OSError(errno.EROFS, "Read-only file system")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    expected = WriteFailed if isinstance(failure, OSError) else KeyError
    with pytest.raises(expected) as caught, atomic.replacing(target, what="the bake file") as temp:
        temp.write_text("half")
        raise failure
    if isinstance(failure, OSError):
        assert str(caught.value) == (f"cannot write the bake file {target}: Read-only file system; {tmp_path} is on "
                                     "a read-only filesystem: write somewhere else")
    assert target.read_text() == "old\n"


def test_a_name_too_long_and_a_file_for_a_directory_are_one_line(tmp_path: Path) -> None:
    long = tmp_path / ("x" * 300)
    with pytest.raises(WriteFailed) as caught:
        atomic.write_text(long, "x", what="the report")
    assert str(caught.value) == f"cannot write the report {long}: File name too long; name a shorter path"
    (tmp_path / "file").write_text("")
    under = tmp_path / "file" / "x.html"
    with pytest.raises(WriteFailed) as caught:
        atomic.write_text(under, "x", what="the report")
    assert str(caught.value) == (f"cannot write the report {under}: Not a directory; {under.parent} is not a "
                                 "directory: write somewhere else")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_leftovers_include_a_killed_writers_symlinks_and_never_follow_them(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    work = tmp_path / "dist"
    work.mkdir()
    (work / ".index.4242.tmp").symlink_to(outside)
    (work / ".manifest.json.x.tmp").symlink_to(outside / "keep")
    found = atomic.leftovers(work)
    assert found == [work / ".index.4242.tmp", work / ".manifest.json.x.tmp"]
    for leftover in found:
        leftover.unlink()
    assert (outside / "keep").read_text() == "keep"
