"""Paths read from dist input kept inside the directory they belong to.

A manifest's ``wheel`` and ``log``, noarch.json's ``wheel`` and a wheel's member names come from
files anyone can edit (a downloaded CI artifact, a hostile wheel). Before such a path is joined
onto a directory it goes through ``inside`` (a file a manifest names: a ConfigError otherwise) or
``safe_member`` (a zip member: None otherwise), so that nothing outside that directory is read,
published or written (no ``..``, absolute names, backslashes, NUL, or symlinks leading out).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from wheelfactory.errors import ConfigError

StrPath = str | os.PathLike[str]  # a path as the API takes one


def _parts(text: str) -> tuple[str, ...] | None:
    """The components of ``text`` as a relative POSIX path without ``..``; None when it is not one."""
    # JSON may hold anything
    if not isinstance(text, str) or not text or "\x00" in text or "\\" in text:
        return None
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path.parts


def safe_member(name: str) -> PurePosixPath | None:
    """A zip member name as a relative path to join onto a directory; None when it is unsafe
    (absolute, ``..``, a backslash, NUL, empty)."""
    parts = _parts(name)
    return None if parts is None else PurePosixPath(*parts)


def inside(root: Path, relative: str, *, what: str, file: str | None = None) -> Path:
    """``root / relative``, where ``relative`` (read from ``file``, shown as ``what``) must be a
    relative path whose resolved location (symlinks that exist followed) lies under ``root``.
    Raises ConfigError (exit 2), one line naming the file and the value."""
    hint = "rebuild it, or fix the file: its paths are relative to that directory, without '..'"
    parts = _parts(relative)
    if parts is None:
        raise ConfigError(
            f"{what} {relative!r}, which is not a path inside {root}", file=file, hint=hint
        )
    path = root.joinpath(*parts)
    try:
        base = root.resolve()
        target = path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConfigError(
            f"{what} {relative!r}, which cannot be resolved ({reason})", file=file, hint=hint
        ) from None
    if not target.is_relative_to(base):
        raise ConfigError(
            f"{what} {relative!r}, which is not a path inside {root} (it leads to {target})",
            file=file,
            hint=hint,
        )
    return path
