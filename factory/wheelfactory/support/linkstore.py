"""A content-addressed store of hard links: identical files in different trees share one inode.

Why: prepared environments (engines/prepared_env.py) hold the same torch and nvidia-* libraries
many times over, once per interpreter and build image. A CUDA torch is ~5 GB installed, so four
Pythons of one torch build are 20 GB where one copy would do. Linking each large file to a blob
named by its content (and mode) keeps every tree whole and independent for readers, while the
disk holds each distinct file once. The trees must not be written to afterwards (prepared
environments are mounted read-only): a write through one link would show in every tree.

A blob whose only link is the store's own is garbage: ``prune`` removes those.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.support.digests import stream_sha256

# Below this, a file's bytes matter less than the syscalls that linking it costs.
MIN_SIZE = 32 * 1024


@dataclass(frozen=True)
class Shared:
    files: int  # files now linked to a blob some earlier tree already held
    bytes: int  # the disk those files no longer take


def share_identical_files(tree: Path, store: Path, *, min_size: int = MIN_SIZE) -> Shared:
    """Link every regular file of at least ``min_size`` bytes under ``tree`` to its blob in
    ``store`` (same filesystem), making the blob from the file when it is the first of its kind.
    Best effort: a file that cannot be linked (another filesystem, a link limit) stays as it is."""
    files = shared = 0
    for base, _, names in os.walk(tree):
        for name in names:
            path = Path(base) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_size < min_size or info.st_nlink > 1:
                continue
            blob = store / _blob_name(path, info.st_mode)
            try:
                if _adopt(path, blob, info.st_size):
                    files += 1
                    shared += info.st_size
            except OSError:
                continue
    return Shared(files, shared)


def _blob_name(path: Path, mode: int) -> str:
    with path.open("rb") as handle:
        digest = stream_sha256(handle).hex()
    # The mode is part of the identity: an executable and a data file with equal bytes must not
    # share one inode's permission bits.
    return f"{digest[:2]}/{digest}-{stat.S_IMODE(mode):o}"


def _adopt(path: Path, blob: Path, size: int) -> bool:
    """True when ``path`` now shares an existing blob; False when it became the blob."""
    try:
        if blob.stat().st_size == size:
            staged = path.with_name(f".{path.name}.link")
            os.link(blob, staged)
            os.replace(staged, path)  # the tree never lacks the file, not even for a moment
            return True
    except FileNotFoundError:
        pass  # no such blob yet (or prune just took it): this file becomes it
    blob.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, blob)
    except FileExistsError:  # a tree made at the same time got there first: share theirs
        return _adopt(path, blob, size) if blob.stat().st_size == size else False
    return False


def prune(store: Path) -> int:
    """Remove the blobs no tree links to any more; the bytes freed."""
    freed = 0
    if not store.is_dir():
        return freed
    for base, _, names in os.walk(store):
        for name in names:
            path = Path(base) / name
            try:
                info = path.lstat()
                if info.st_nlink == 1:
                    path.unlink()
                    freed += info.st_size
            except OSError:
                continue
    return freed


def unshared_bytes(tree: Path) -> int:
    """What removing ``tree`` (and then pruning) frees: the files no other tree links to."""
    total = 0
    for base, _, names in os.walk(tree):
        for name in names:
            try:
                info = (Path(base) / name).lstat()
            except OSError:
                continue
            # One link: the tree's own. Two: the tree's and the store's (freed by prune).
            if info.st_nlink <= 2:
                total += info.st_size
    return total


@dataclass(frozen=True)
class Removed:
    path: Path
    bytes: int  # what removing it (and pruning the store after) freed


# A tree whose name ends so, older than this, was left by a killed run (a live one may be filling it).
PARTIAL_SUFFIX = ".partial"
STALE_PARTIAL_S = 3600


def collect_unused_trees(
    root: Path,
    store: Path | None,
    *,
    marker: str,
    unused_for_s: float,
    lock: Callable[[Path], AbstractContextManager[object]],
    now: float | None = None,
    dry_run: bool = False,
) -> list[Removed]:
    """Remove the complete trees under ``root`` (those holding ``marker``, whose mtime is their
    last use) not used for ``unused_for_s`` seconds, and the partial ones a killed run left, then
    the blobs of ``store`` (if any) no remaining tree links to. ``lock(tree)``: held while a tree goes, so
    that no build makes or takes it meanwhile. Directories without the marker are not ours: kept."""
    now = time.time() if now is None else now
    removed: list[Removed] = []
    if not root.is_dir():
        return removed
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            continue
        if entry.name.endswith(PARTIAL_SUFFIX):
            stale = now - entry.stat().st_mtime > STALE_PARTIAL_S
        elif (entry / marker).is_file():
            stale = now - (entry / marker).stat().st_mtime > unused_for_s
        else:
            continue
        if stale:
            size = unshared_bytes(entry)
            if not dry_run:
                with lock(entry):
                    shutil.rmtree(entry, ignore_errors=True)
            removed.append(Removed(entry, size))
    if removed and not dry_run and store is not None:
        prune(store)
    return removed
