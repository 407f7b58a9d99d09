"""``wheelfactory new NAME``: a factory-native kernel library to start from.

``plan_scaffold`` is pure: NAME in, ``{relative path: text}`` out (kernel.toml, one op with CPU and
CUDA sources, the Python package with its reference op and sample inputs, tests run against the
built wheels, a matrix.toml and a README). ``write_scaffold`` lays the files out in a hidden
directory beside the target and moves them into place when complete, so a run that fails or is
interrupted leaves nothing that looks like a finished project, and it never writes into a
directory that holds files.

The files are package data, wheelfactory/data/templates/native/, with their real names and
extensions (C++ as .cpp, CUDA as .cu): ``${word}`` in a file's text or path is filled in from NAME
(``string.Template``: ``$$`` is a literal ``$``, any other ``$`` is an error), so C++ braces need
no escaping. Tokens: ``name`` (the package), ``prefix`` (its environment variable prefix),
``macro`` (the namespace macro), ``ns`` (the C++ namespace), ``op`` (the example op).
"""

from __future__ import annotations

import errno
import keyword
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from string import Template
from typing import TYPE_CHECKING

from wheelfactory.errors import UsageError, WriteFailed

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# kernel.toml's own [kernel].name rule
from wheelfactory.project.kernel_toml import _NAME as KERNEL_NAME

OP = "scaled_add"  # the one example op: generic, so an author renames nothing but their own code
# A distribution name starts and ends with a letter or digit (PEP 508); kernel.toml allows more.
_DISTRIBUTION = re.compile(r"^[a-z0-9](?:[a-z0-9_]*[a-z0-9])?$", re.ASCII)
# Names the package would shadow when installed, or that the runtime and tests import beside it.
_TAKEN = frozenset({"torch", "wheelfactory", "pytest", "numpy", "setuptools", "tests"})
TEMPLATES = ("templates", "native")  # in wheelfactory.data: the files of a new kernel library


class InvalidName(UsageError):
    """NAME cannot name a kernel library (exit 2)."""


@dataclass(frozen=True)
class Scaffold:
    """What ``wheelfactory new NAME`` writes: relative POSIX paths to file texts."""

    name: str
    files: Mapping[str, str]


def check_name(name: str) -> str:
    """NAME, or InvalidName saying which rule it breaks and how to pick another."""
    hint = "pick another, e.g. `wheelfactory new my_kernels`"
    if not KERNEL_NAME.fullmatch(name):
        problem = (
            "is not a lower-case Python identifier (a-z, 0-9 and _, not starting with a digit)"
        )
    elif not _DISTRIBUTION.fullmatch(name):
        problem = (
            "must start and end with a letter or digit (it is also the wheel's distribution name)"
        )
    elif keyword.iskeyword(name):
        problem = "is a Python keyword"
    elif name in sys.stdlib_module_names or name in _TAKEN:
        problem = "would shadow a module of the same name when installed"
    else:
        return name
    raise InvalidName(f"NAME {name!r} {problem}; {hint}")


def plan_scaffold(name: str) -> Scaffold:
    """The files of a new kernel library called ``name`` (pure: nothing is read or written)."""
    check_name(name)
    values = {
        "name": name,
        "prefix": name.upper(),
        "macro": f"{name.upper()}_NAMESPACE",
        "ns": f"{name}_ops",
        "op": OP,
    }
    files = {_fill(path, values): _fill(text, values) for path, text in _template_files()}
    return Scaffold(name, files)


def _template_files() -> Iterator[tuple[str, str]]:
    """(relative POSIX path, text) of every template file."""
    return _walk(resources.files("wheelfactory.data").joinpath(*TEMPLATES), "")


def _walk(folder: Traversable, prefix: str) -> Iterator[tuple[str, str]]:
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name == "__pycache__":  # what an installer byte-compiled beside the templates
            continue
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        else:  # as bytes: the text exactly as shipped, no newline translation
            yield f"{prefix}{entry.name}", entry.read_bytes().decode("utf-8")


def write_scaffold(scaffold: Scaffold, target: Path) -> Path:
    """Write ``scaffold`` as the directory ``target`` (made, with its parents, if missing; an
    existing one must be empty). All files go into a hidden directory beside it first and move into
    place only when complete; on any failure, Ctrl-C included, what was written is removed and
    nothing of the author's is touched. Returns ``target``."""
    target = Path(os.path.abspath(target))
    _check_target(target)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        temp = _make_temp_dir(parent, target.name)
    except OSError as exc:
        raise _write_failed(target, exc) from None
    try:
        for relative, text in scaffold.files.items():
            path = temp / PurePosixPath(relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        _move_into_place(temp, target)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            _check_target(target)  # something of the author's appeared there meanwhile: say so
        raise _write_failed(target, exc) from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def _move_into_place(temp: Path, target: Path) -> None:
    """A missing ``target``: one rename of the whole tree. An existing empty one is kept (a shell
    may be in it, the author may have set its mode): each top-level entry moves in, kernel.toml
    last, so an interrupted move never looks like a project; on failure the moved ones are taken
    back out. Neither way replaces a file: rename(2) refuses a directory that has files, and files
    are hard-linked, which refuses an existing name."""
    if not os.path.lexists(target):
        os.rename(temp, target)
        return
    # recorded before each move, so an interrupt cannot lose one
    started: list[tuple[Path, Path]] = []
    try:
        for entry in sorted(temp.iterdir(), key=lambda p: (p.name == "kernel.toml", p.name)):
            destination = target / entry.name
            started.append((entry, destination))
            if entry.is_dir():
                if os.path.lexists(destination):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(destination))
                os.rename(entry, destination)
            else:
                os.link(entry, destination)
                entry.unlink()
    except BaseException:
        for entry, destination in reversed(started):
            _take_back(entry, destination)
        raise
    temp.rmdir()


def _take_back(entry: Path, destination: Path) -> None:
    """Undo one move of ``_move_into_place``, whichever step it reached; never touches a name that
    is not the scaffold's own."""
    try:
        # moved: back into the temp directory (the caller removes it)
        if not os.path.lexists(entry):
            os.rename(destination, entry)
        elif (
            entry.is_file()
            and os.path.lexists(destination)
            and os.path.samefile(entry, destination)
        ):
            destination.unlink()  # linked, not yet unlinked from the temp directory
    except OSError:
        pass


def _check_target(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        kind = "a symlink" if target.is_symlink() else "a file"
        raise UsageError(
            f"{target} exists and is {kind}, not a directory; give --path a new or empty directory"
        )
    try:
        has_files = target.is_dir() and any(target.iterdir())
    except OSError as exc:  # a directory we may not list
        raise _write_failed(target, exc) from None
    if has_files:
        raise UsageError(
            f"{target} is not empty: wheelfactory new never writes over files; "
            "give --path a new or empty directory"
        )


def _make_temp_dir(parent: Path, name: str) -> Path:
    """A new hidden directory in ``parent`` (made with the umask's mode, as the target would be)."""
    while True:
        temp = parent / f".{name}.wheelfactory-new-{secrets.token_hex(4)}"
        try:
            temp.mkdir()
        except FileExistsError:
            continue
        return temp


def _write_failed(target: Path, exc: OSError) -> WriteFailed:
    reason = exc.strerror or str(exc)
    return WriteFailed(
        f"cannot write {target}: {reason}; nothing was written there: "
        f"make {target.parent} writable, free some space or give another --path"
    )


def _fill(text: str, values: Mapping[str, str]) -> str:
    return Template(text).substitute(values)


# The sample variant `new`'s matrix.toml plans that any Docker engine builds (a CPU build).
DOCKER_FIRST_BUILD = "torch213-cxx11-cpu-*"


def first_build_command(torch: str | None, known_releases: tuple[str, ...], compiler: bool) -> str:
    """The first build `new` tells its author to run, as it works when typed on this machine:
    the host engine where this interpreter's torch is a CPU build of a release the table knows and
    a C++ compiler is there (the host builds the variant its torch is, whether or not `new`'s
    matrix lists that release); otherwise a CPU variant in Docker, ``--setup`` making an engine
    answer first where the machine allows (a CUDA torch asks for nvcc and its toolkit on the
    host, a torch the table does not know for `compat refresh`)."""
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(torch) if torch else None
    except InvalidVersion:
        version = None
    if (
        version is not None
        and version.local == "cpu"
        and compiler
        and f"{version.major}.{version.minor}" in known_releases
    ):
        return "wheelfactory build --engine host"
    return f"wheelfactory build --setup --only '{DOCKER_FIRST_BUILD}'  # in Docker"
