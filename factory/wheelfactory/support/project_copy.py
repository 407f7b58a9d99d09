"""Project inputs never leave the project: the one rule for listing and copying a project's files.

Every kind stages its build from here (sources, the Python package, include dirs, [test] sources),
so that no file outside the project root reaches a build directory, a wheel or an index:

* a symlink whose target resolves inside the project is followed: it is copied as the file (or
  directory) it points to. A staged copy is self-contained that way: the stage is mounted into a
  container or zipped into a wheel, where a link would dangle (its target not staged) or be
  followed by the build anyway;
* a symlink that resolves outside the project (a chain of links included, /dev/zero included),
  or nowhere, or back into a directory being walked (a loop), is refused;
* a FIFO, a device or a socket is refused (reading one blocks or never ends);
* a name with a control character (newline, tab, escape, DEL) or undecodable bytes is refused:
  it is not portable, and it breaks the one-line messages and the wheel's RECORD.

Each refusal is one ConfigError line naming the file (and a link's target), raised before
anything is copied: ``project_files`` checks a whole tree first, the copies check again.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from wheelfactory.errors import ConfigError

# shutil.ignore_patterns' shape: (directory, names) -> the names to leave out (never inspected).
Ignore = Callable[[str, list[str]], Iterable[str]]

LINK_HINT = "copy the file into the project instead of linking to it"
_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _is_portable(name: str) -> bool:
    return not any(ord(c) < 0x20 or ord(c) == 0x7F or 0xDC80 <= ord(c) <= 0xDCFF for c in name)


def _special_kind(mode: int) -> str:
    return next((what for test, what in _SPECIAL if test(mode)), "not a regular file or directory")


class _Rule:
    """The checks of one project root; ``declared_in``: the declaration errors name (file=)."""

    def __init__(self, root: Path, declared_in: str | None) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.declared_in = declared_in

    def refuse(self, message: str, hint: str) -> ConfigError:
        return ConfigError(message, file=self.declared_in, hint=hint)

    def check_name(self, path: Path) -> None:
        relative = path.relative_to(self.root) if path.is_relative_to(self.root) else path
        if not all(_is_portable(part) for part in relative.parts):
            raise self.refuse(
                f"{str(path)!r} has a control character or undecodable bytes in its name",
                "rename it: file names a build copies must be printable",
            )

    def resolve(self, link: Path) -> Path:
        """Where ``link`` leads; refused when that is outside the project or nowhere."""
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # a broken link, a loop of links
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise self.refuse(
                f"{link} is a symlink that cannot be followed ({reason})",
                "fix or remove the broken link",
            ) from None
        if not target.is_relative_to(self.real_root):
            raise self.refuse(
                f"{link} is a symlink that leads outside the project {self.root} (to {target})",
                LINK_HINT,
            )
        return target

    def kind_of(self, path: Path) -> int:
        """``path``'s mode (links followed; each link on the way checked); refused when special."""
        self.check_name(path)
        for prefix in (*reversed(path.relative_to(self.root).parents), path.relative_to(self.root)):
            if prefix.parts and (self.root / prefix).is_symlink():
                self.resolve(self.root / prefix)  # the first link that leads out is named
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise self.refuse(
                f"{path} cannot be read ({exc.strerror or exc})", "list files that exist"
            ) from None
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise self.refuse(
                f"{path} is {_special_kind(mode)}", "list regular files and directories only"
            )
        return mode

    def walk(
        self, directory: Path, relative: Path, ignore: Ignore | None, ancestors: frozenset[Path]
    ) -> Iterator[tuple[Path, bool]]:
        """(path shown as in the project, is a directory) for everything under ``directory``
        (shown as ``relative``), sorted, a directory before what it holds, links followed."""
        with os.scandir(directory) as found:
            entries = sorted(found, key=lambda e: e.name)
        skip = set(ignore(str(directory), [e.name for e in entries])) if ignore else set()
        for entry in entries:
            if entry.name in skip:
                continue
            path = Path(entry.path)
            self.check_name(path)
            mode = entry.stat(follow_symlinks=False).st_mode
            real = path
            if stat.S_ISLNK(mode):
                real = self.resolve(path)
                mode = os.stat(real).st_mode
            if stat.S_ISDIR(mode):
                real = real.resolve()
                if real in ancestors:
                    raise self.refuse(
                        f"{path} is a symlink loop (back to {real})", "remove the link"
                    )
                yield relative / entry.name, True
                yield from self.walk(path, relative / entry.name, ignore, ancestors | {real})
            elif stat.S_ISREG(mode):
                yield relative / entry.name, False
            else:
                raise self.refuse(
                    f"{path} is {_special_kind(mode)}",
                    "remove it from the project, or leave it out of what the build copies",
                )


def _entries(
    root: Path, top: Path | str, ignore: Ignore | None, declared_in: str | None
) -> list[tuple[Path, bool]]:
    rule = _Rule(root, declared_in)
    start = root / top
    mode = rule.kind_of(start)
    relative = start.relative_to(root)
    if stat.S_ISREG(mode):
        return [(relative, False)]
    return [(relative, True), *rule.walk(start, relative, ignore, frozenset({start.resolve()}))]


def project_files(
    root: Path,
    top: Path | str = ".",
    *,
    ignore: Ignore | None = None,
    declared_in: str | None = None,
) -> list[Path]:
    """The regular files under ``root/top`` (``top`` itself where it is a file), relative to
    ``root``, sorted, inside symlinks followed. ConfigError (one line) for anything the rule
    above refuses; ``ignore``d names are left out unread."""
    return [path for path, is_dir in _entries(root, top, ignore, declared_in) if not is_dir]


def checked_file(root: Path, relative: Path | str, *, declared_in: str | None = None) -> Path:
    """``root/relative`` resolved, where it is a regular file the rule lets a build read."""
    rule = _Rule(root, declared_in)
    path = root / relative
    if not stat.S_ISREG(rule.kind_of(path)):
        raise rule.refuse(f"{path} is a directory, not a file", "list files")
    return path.resolve()


def copy_project_file(
    root: Path, relative: Path | str, target: Path, *, declared_in: str | None = None
) -> None:
    """Copy ``root/relative`` to ``target`` (parents made): the bytes of the file it is, or points to."""
    source = checked_file(root, relative, declared_in=declared_in)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def copy_project_tree(
    root: Path,
    top: Path | str,
    dest: Path,
    *,
    ignore: Ignore | None = None,
    declared_in: str | None = None,
) -> list[Path]:
    """Copy ``root/top`` to ``dest`` (a file or a directory tree; inside links as what they point
    to); every file is checked before the first is copied. Returns the files, relative to ``root``."""
    entries = _entries(root, top, ignore, declared_in)
    start = Path(top)
    for relative, is_dir in entries:
        inner = relative.relative_to(start)
        if is_dir:
            # empty ones too, as copytree made them
            (dest / inner).mkdir(parents=True, exist_ok=True)
        else:
            copy_project_file(root, relative, dest / inner, declared_in=declared_in)
    return [path for path, is_dir in entries if not is_dir]
