"""The JIT cache's safety pieces: private directories, the flock lock, verification, cleanup."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory._runtime._cache import (
    CompletionRecord,
    FileLock,
    check_private_dir,
    clean_stale_entries,
    discard_entry,
    ensure_private_dir,
    private_dir_problem,
    publish_entry,
    sha256_file,
    verify_entry,
)
from wheelfactory._runtime._errors import UnsafeCacheDirError

ME = os.geteuid()


@pytest.mark.parametrize(
    ("mode", "owner", "words"),
    [
        (0o700, ME, None),
        (0o755, ME, None),
        (0o750, ME, None),
        (0o770, ME, "writable by group (mode 0770)"),
        (0o707, ME, "writable by others (mode 0707)"),
        (0o777, ME, "writable by group and others (mode 0777)"),
        (0o1777, ME, "writable by group and others (mode 1777)"),
        (0o700, ME + 1, f"owned by uid {ME + 1}, not by this user"),
    ],
)
def test_private_dir_problem(mode: int, owner: int, words: str | None) -> None:
    problem = private_dir_problem(Path("/c/fusedops"), stat.S_IFDIR | mode, owner, ME, "FUSEDOPS_CACHE_DIR")
    if words is None:
        assert problem is None
    else:
        assert problem is not None and words in problem
        assert "/c/fusedops" in problem and "FUSEDOPS_CACHE_DIR" in problem
        assert "chmod 700 /c/fusedops" in problem


def test_ensure_private_dir_creates_0700_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        ensure_private_dir(tmp_path / "a" / "cache", "X_CACHE_DIR")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "cache").stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o722])
def test_writable_cache_dir_is_refused(tmp_path: Path, mode: int) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(mode)
    with pytest.raises(
        UnsafeCacheDirError, match=f"refusing to use cache directory {cache}.*chmod 700 {cache}"
    ):
        ensure_private_dir(cache, "X_CACHE_DIR")


def test_file_in_place_of_cache_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("")
    with pytest.raises(UnsafeCacheDirError):
        ensure_private_dir(tmp_path / "cache", "X_CACHE_DIR")


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a directory's owner needs root")
def test_cache_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 12345, -1)
    with pytest.raises(UnsafeCacheDirError, match="owned by uid 12345"):
        check_private_dir(cache, "X_CACHE_DIR")


# A holder that takes the lock, starts a grandchild that outlives it, reports, and waits.
HOLDER = r"""
import subprocess, sys, time
sys.path.insert(0, sys.argv[2])
from wheelfactory._runtime._cache import FileLock
lock = FileLock(__import__("pathlib").Path(sys.argv[1]))
assert lock.acquire(blocking=False)
child = subprocess.Popen(["sleep", "60"])   # inherits nothing: the lock fd is close-on-exec
print(child.pid, flush=True)
time.sleep(60)
"""


def test_lock_is_released_when_its_holder_is_sigkilled(tmp_path: Path) -> None:
    lock_path = tmp_path / "key.lock"
    repo = str(REPO)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_path), repo], stdout=subprocess.PIPE, text=True
    )
    grandchild = int(holder.stdout.readline())  # type: ignore[union-attr]
    try:
        assert not FileLock(lock_path).acquire(blocking=False)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        os.kill(grandchild, 0)  # still alive, yet it must not hold the lock
        lock = FileLock(lock_path)
        started = time.monotonic()
        assert lock.acquire(blocking=False)
        assert time.monotonic() - started < 1
        lock.release()
    finally:
        for pid in (grandchild,):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        holder.stdout.close()  # type: ignore[union-attr]


def test_lock_is_exclusive_within_a_process_too(tmp_path: Path) -> None:
    with FileLock(tmp_path / "k.lock"):
        assert not FileLock(tmp_path / "k.lock").acquire(blocking=False)
    assert FileLock(tmp_path / "k.lock").acquire(blocking=False)


def make_entry(
    root: Path, key: str = "k", namespace: str = "_x_jit_k", payload: bytes = b"\x7fELF" + b"x" * 1000
) -> Path:
    entry = root / key
    entry.mkdir(parents=True)
    (entry / "lib.so").write_bytes(payload)
    CompletionRecord("lib.so", sha256_file(entry / "lib.so"), len(payload), namespace, key).write(entry)
    return entry


def test_verify_entry_accepts_an_intact_build(tmp_path: Path) -> None:
    record, problem = verify_entry(make_entry(tmp_path), "k", "_x_jit_k")
    assert record is not None and problem == ""


def test_verify_entry_detects_truncation(tmp_path: Path) -> None:
    entry = make_entry(tmp_path)
    with open(entry / "lib.so", "r+b") as handle:
        handle.truncate(100)
    record, problem = verify_entry(entry, "k", "_x_jit_k")
    assert record is None and "100 bytes, its record says 1004" in problem


def test_verify_entry_detects_same_size_corruption(tmp_path: Path) -> None:
    entry = make_entry(tmp_path)
    data = bytearray((entry / "lib.so").read_bytes())
    data[500] ^= 0xFF
    (entry / "lib.so").write_bytes(bytes(data))
    record, problem = verify_entry(entry, "k", "_x_jit_k")
    assert record is None and "sha256" in problem


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda e: (e / "complete.json").unlink(), "no completion record"),
        (lambda e: (e / "complete.json").write_text("{"), "corrupt completion record"),
        (lambda e: (e / "lib.so").unlink(), "is missing"),
    ],
)
def test_verify_entry_other_damage(tmp_path: Path, damage: object, words: str) -> None:
    entry = make_entry(tmp_path)
    damage(entry)  # type: ignore[operator]
    record, problem = verify_entry(entry, "k", "_x_jit_k")
    assert record is None and words in problem


def test_verify_entry_checks_it_is_the_expected_build(tmp_path: Path) -> None:
    record, problem = verify_entry(make_entry(tmp_path), "k", "_other_ns")
    assert record is None and "expected k/_other_ns" in problem


def test_publish_is_a_rename_and_never_overwrites(tmp_path: Path) -> None:
    temp = tmp_path / "k.tmp-1-ab"
    temp.mkdir()
    (temp / "f").write_text("x")
    publish_entry(temp, tmp_path / "k")
    assert (tmp_path / "k" / "f").read_text() == "x" and not temp.exists()
    other = tmp_path / "k.tmp-2-cd"
    other.mkdir()
    (other / "f").write_text("y")
    with pytest.raises(OSError):
        publish_entry(other, tmp_path / "k")


def test_discard_entry_moves_then_deletes(tmp_path: Path) -> None:
    entry = make_entry(tmp_path)
    discard_entry(entry)
    assert list(tmp_path.iterdir()) == []


def test_clean_stale_entries_spares_builds_in_progress(tmp_path: Path) -> None:
    ours = tmp_path / "mine.tmp-111-aa"
    abandoned = tmp_path / "other.tmp-222-bb"
    stale = tmp_path / "other.stale-333-cc"
    in_progress = tmp_path / "busy.tmp-444-dd"
    for path in (ours, abandoned, stale, in_progress):
        path.mkdir()
    finished = make_entry(tmp_path, key="done")
    with FileLock(tmp_path / "busy.lock"):  # someone is building "busy" right now
        removed = clean_stale_entries(tmp_path, held_key="mine")
    assert sorted(removed) == sorted([ours, abandoned, stale])
    assert in_progress.exists() and finished.exists()


# Hostile entries (issue: the runtime reads only regular files it owns). Each check must end, not
# block: run under a guard that fails the test if the call is still inside after 20 s.
def verdict(entry: Path, key: str = "k", namespace: str = "_x_jit_k") -> tuple[CompletionRecord | None, str]:
    import threading

    found: list[tuple[CompletionRecord | None, str]] = []
    worker = threading.Thread(target=lambda: found.append(verify_entry(entry, key, namespace)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), f"verify_entry blocked on {entry}"
    return found[0]


def rewrite_record(entry: Path, **fields: object) -> None:
    import json

    data = json.loads((entry / "complete.json").read_text())
    data.update(fields)
    (entry / "complete.json").write_text(json.dumps(data))


def test_a_fifo_or_a_dev_zero_link_as_the_record_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo_entry = make_entry(tmp_path / "a")
    (fifo_entry / "complete.json").unlink()
    os.mkfifo(fifo_entry / "complete.json")
    record, problem = verdict(fifo_entry)
    assert record is None and "unsafe completion record" in problem and "not a regular file" in problem
    zero_entry = make_entry(tmp_path / "b")
    (zero_entry / "complete.json").unlink()
    (zero_entry / "complete.json").symlink_to("/dev/zero")
    record, problem = verdict(zero_entry)
    assert record is None and "is a symlink" in problem


def test_a_fifo_library_is_refused_without_blocking(tmp_path: Path) -> None:
    entry = make_entry(tmp_path)
    (entry / "lib.so").unlink()
    os.mkfifo(entry / "lib.so")
    record, problem = verdict(entry)
    assert record is None and "unsafe library" in problem and "not a regular file" in problem


def test_a_library_linked_to_a_matching_file_outside_the_cache_is_refused(tmp_path: Path) -> None:
    entry = make_entry(tmp_path / "cache")
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes((entry / "lib.so").read_bytes())  # same bytes: the record matches it
    (entry / "lib.so").unlink()
    (entry / "lib.so").symlink_to(outside)
    record, problem = verdict(entry)
    assert record is None and "unsafe library" in problem and "symlink" in problem


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_an_entry_others_can_write_is_refused_like_the_root(tmp_path: Path, mode: int) -> None:
    entry = make_entry(tmp_path)
    entry.chmod(mode)
    record, problem = verdict(entry)
    assert record is None and "writable by others" in problem


def test_an_entry_that_is_a_symlink_is_refused_and_discarding_it_spares_its_target(tmp_path: Path) -> None:
    target = make_entry(tmp_path / "real")
    link = tmp_path / "cache" / "k"
    link.parent.mkdir()
    link.symlink_to(target)
    record, problem = verdict(link)
    assert record is None and "the entry is a symlink" in problem
    discard_entry(link)
    assert not os.path.lexists(link) and (target / "lib.so").is_file()


@pytest.mark.parametrize(("library", "words"), [
    (".", "names '.', not a library file"),
    ("..", "names '..', not a library file"),
    ("", "names '', not a library file"),
    ("sub/lib.so", "names 'sub/lib.so', not a library file"),
    ("complete.json", "names 'complete.json', not a library file"),
    ("build.log", "bytes, its record says"),  # a plain file of the entry, but not the library built
])
def test_a_record_naming_no_library_file_is_a_stale_entry(tmp_path: Path, library: str, words: str) -> None:
    entry = make_entry(tmp_path)
    (entry / "build.log").write_text("log\n")
    rewrite_record(entry, library=library)
    record, problem = verdict(entry)
    assert record is None and words in problem
    discard_entry(entry)  # what the loader does with a stale entry before it rebuilds
    assert not os.path.lexists(entry)


def test_an_oversized_record_is_refused_unread(tmp_path: Path) -> None:
    entry = make_entry(tmp_path)
    with open(entry / "complete.json", "a") as handle:
        handle.write(" " * (1 << 20))
    record, problem = verdict(entry)
    assert record is None and "larger than" in problem


def test_a_lock_path_that_is_a_directory_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "k.lock").mkdir()
    with pytest.raises(UnsafeCacheDirError, match=r"the lock file .*k\.lock .*Fix: remove it"):
        FileLock(tmp_path / "k.lock").acquire()
    (tmp_path / "j.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeCacheDirError, match="Fix: remove it"):
        FileLock(tmp_path / "j.lock").acquire()
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed to create its target


def test_a_cache_path_past_the_systems_limit_is_one_clear_error(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a"] * 2500)
    with pytest.raises(UnsafeCacheDirError, match=r"cache directory path is \d+ bytes long.*Fix: set X_CACHE_DIR"):
        ensure_private_dir(deep, "X_CACHE_DIR")


def test_a_record_naming_its_build_log_with_the_logs_true_hash_is_stale_and_heals(tmp_path: Path) -> None:
    """complete.json names build.log with build.log's own size and sha256: every check of the
    record passes, and dlopen would fail on every load, never rebuilt. It is refused (no ELF
    header), so the loader discards the entry and builds it again."""
    entry = make_entry(tmp_path)
    log = entry / "build.log"
    log.write_text("c++ -O3 ... -o lib.so\n")
    rewrite_record(entry, library="build.log", sha256=sha256_file(log), size=log.stat().st_size)
    record, problem = verdict(entry)
    assert record is None and problem == "build.log is not a shared library (no ELF header)"
    discard_entry(entry)
    assert not os.path.lexists(entry)
