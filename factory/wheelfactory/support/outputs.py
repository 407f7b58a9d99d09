"""Output files named on the command line, checked before a command does any work.

A command that writes one file (``report --html/--svg``, ``bake --file``, ``ci github --workflow``)
also reads files (the matrix, the compatibility table, the manifest and what it names). An output
that is one of those inputs would replace it; two outputs that are one file would overwrite each
other. ``check_outputs`` refuses both (UsageError, exit 2), and, through ``atomic.check_replaceable``,
a target that exists and is not a regular file (a directory, a device such as /dev/full, a fifo:
ConfigError, exit 2), before anything is read or written. ``-`` means standard output.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from wheelfactory.errors import UsageError, WriteFailed
from wheelfactory.support import atomic

STDOUT = "-"


def is_stdout(path: Path | str | None) -> bool:
    """``-``: the file goes to standard output."""
    return path is not None and str(path) == STDOUT


def same_file(a: Path, b: Path) -> bool:
    """One file (hard links and symlinks included) where both exist; else the same resolved path."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except (OSError, ValueError):  # a name too long, a NUL: not comparable by inode
        pass
    return _resolved(a) == _resolved(b)


def check_outputs(
    outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | None], *, writes: str
) -> None:
    """Refuse outputs that would clobber something. ``outputs``: the option (or a description of a
    default, e.g. "the default SVG") -> its path, None when not written, ``-`` for stdout;
    ``inputs``: what the command reads ("the manifest") -> its path; ``writes``: what the command
    writes, for the hint ("the report")."""
    seen: dict[str, Path] = {}
    for option, path in outputs.items():
        if path is None or is_stdout(path):
            continue
        for what, source in inputs.items():
            if source is not None and not is_stdout(source) and same_file(path, source):
                raise UsageError(
                    f"{option} {path} is {what} this command reads: write {writes} elsewhere"
                )
        for earlier, other in seen.items():
            if same_file(path, other):
                raise UsageError(
                    f"{option} {path} is the file {earlier} names too: give each output its own path"
                )
        seen[option] = path
        _check_parent(option, path)
        if os.path.isdir(path):  # the common slip among non-files: say which file to name instead
            raise UsageError(
                f"{option} {path}: it is a directory; name a file for {writes} (in it, or elsewhere)"
            )
        atomic.check_replaceable(path, what=option)


def check_output_directory(option: str, path: Path) -> None:
    """``path`` (an output directory, made if missing) is a directory or can become one: the
    nearest existing one of it and its ancestors is a directory (a file there: ENOTDIR later)."""
    _check_nearest(option, path, (path.absolute(), *path.absolute().parents))


def _check_parent(option: str, path: Path) -> None:
    """The nearest existing ancestor must be a directory (a file there: ENOTDIR at the write)."""
    _check_nearest(option, path, path.absolute().parents)


def _check_nearest(option: str, path: Path, candidates: Iterable[Path]) -> None:
    """The first of ``candidates`` that exists must be a directory."""
    for parent in candidates:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:  # a file further up: the loop reaches it
                continue
            raise WriteFailed(f"cannot write {option} {path}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise UsageError(
                f"{option} {path}: {parent} is not a directory; name a path inside a directory"
            )
        return


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long
        return os.path.abspath(path)


FOLDER, FILE = "a folder", "a regular file"


def check_output_entries(out: Path, expected: Mapping[str, str]) -> None:
    """What a run writes under its output directory (relative path -> FOLDER or FILE) is absent or
    that, never a link or a special file: a dist copied from elsewhere (a CI artifact) may hold a
    link planted where a log, the manifest or a variant's folder belongs, and writing there would
    write, truncate or delete what it names. UsageError (exit 2) naming the first one found."""
    from wheelfactory.support.confined import kind

    for relative, belongs in expected.items():
        path = out / relative
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read ({exc.strerror}); remove it") from None
        if not (stat.S_ISDIR(mode) if belongs == FOLDER else stat.S_ISREG(mode)):
            raise UsageError(
                f"{path} is {kind(mode)}, where {belongs} belongs: a build never writes through a "
                "link or into a special file; remove it (the build makes its own)"
            )
