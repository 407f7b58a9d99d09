"""Content hashes: the build cache key and the per-build op namespace id."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.support.digests import stream_sha256
from wheelfactory.support.proc import CommandFailed, Runner, TimeoutExpired, run


def tree_digest(root: Path, files: Iterable[Path]) -> str:
    """sha256 over (relative path, content) of each file, in sorted order."""
    digest = hashlib.sha256()
    for rel in sorted(set(files)):
        digest.update(str(rel).encode() + b"\0")
        digest.update(file_digest(root / rel))
    return digest.hexdigest()


def python_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def json_digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    return file_digest(path).hex()


def file_digest(path: Path) -> bytes:
    """The sha256 of a file's bytes."""
    with path.open("rb") as handle:
        return stream_sha256(handle)


@dataclass(frozen=True)
class GitState:
    """The git state a project was built from: its HEAD commit, and whether tracked files under it
    had changes not committed (then the commit does not name the sources on its own)."""

    commit: str
    dirty: bool


def git_state(root: Path, *, runner: Runner = run) -> GitState | None:
    """``root``'s git state; None where it is not in a git checkout (or git is missing)."""
    try:
        commit = (
            runner(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=30)
            .strip()
            .rpartition("\n")[2]
        )
        changed = runner(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "."],
            timeout=60,
        )
    except (OSError, CommandFailed, TimeoutExpired):
        return None
    if not re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", commit):
        return None
    # the output holds stderr too: a warning is not a change
    return GitState(
        commit, any(re.match(r"[ MTADRCU?!]{2} ", line) for line in changed.splitlines())
    )


# The zip format's earliest date (1980-01-01T00:00:00Z): the epoch of a project that has no
# history to take one from. A fixed default keeps such wheels reproducible (hatchling does the same).
DEFAULT_SOURCE_DATE_EPOCH = 315532800


def source_date_epoch(root: Path, *, runner: Runner = run) -> int:
    """SOURCE_DATE_EPOCH for the wheels of the project at ``root`` (every file in a wheel gets this
    time, so two builds of the same sources give the same bytes): the environment's, where the
    caller set one; else the time of the last git commit that touched the project (the same in
    every clone, and unchanged by commits elsewhere in the repository, so it does not spoil the
    build cache); else DEFAULT_SOURCE_DATE_EPOCH."""
    import os

    given = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if given.isdigit():
        return int(given)
    return _git_epoch(root.resolve()) if runner is run else _epoch_from_git(root.resolve(), runner)


@functools.cache
def _git_epoch(root: Path) -> int:
    return _epoch_from_git(root, run)  # one git call per project and process


def _epoch_from_git(root: Path, runner: Runner) -> int:
    try:
        found = runner(["git", "-C", str(root), "log", "-1", "--format=%ct", "--", "."], timeout=30)
    except (OSError, CommandFailed, TimeoutExpired):
        return DEFAULT_SOURCE_DATE_EPOCH  # no git, or no history to read
    text = found.strip().rpartition("\n")[2]  # the last line: a warning on stderr may come first
    return int(text) if text.isdigit() else DEFAULT_SOURCE_DATE_EPOCH
