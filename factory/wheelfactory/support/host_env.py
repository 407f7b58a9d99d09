"""Host-side tool environments: packages installed with the host's pip configuration into a
directory that a host process puts on PYTHONPATH (``pip install --target``), made once per
(interpreter, requirements, constraints) and reused.

What needs one: the host engine's build of a project whose build backend is not in the host
interpreter (scikit-build-core, setuptools-scm, ...), and the project's own version tool, run on
the checkout to learn the version its git history gives (project/vcs_version.py). The host engine
is not hermetic: these come from the host's pip index, as a developer's ``pip install`` would.
A directory appears by a rename only when complete, so a killed install never looks made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from wheelfactory.errors import EnvironmentProblem
from wheelfactory.support.linkstore import PARTIAL_SUFFIX, Removed, collect_unused_trees
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.timeline import note

COMPLETE = ".complete"


@dataclass(frozen=True)
class HostEnvRequest:
    requirements: tuple[str, ...]
    # e.g. ("torch==2.13.0",): a dependency on torch takes that one
    constraints: tuple[str, ...] = ()
    python: str = sys.executable  # the interpreter that installs and later imports them
    purpose: str = "the build"  # for messages: what needs these packages
    find_links: tuple[str, ...] = ()  # directories of wheels beside the host's pip index

    @property
    def key(self) -> str:
        keyed = [
            self.requirements,
            self.constraints,
            self.python,
            *([list(self.find_links)] if self.find_links else []),
        ]
        return hashlib.sha256(json.dumps(keyed).encode()).hexdigest()[:16]


def find_links_args(directories: Iterable[str]) -> list[str]:
    """pip's ``--find-links`` for each of ``directories`` ([build] / [test] find_links)."""
    return [arg for directory in directories for arg in ("--find-links", directory)]


def ensure_host_env(root: Path, request: HostEnvRequest, *, log: Path | None = None) -> Path:
    """The directory holding ``request``'s packages (made now if needed); EnvironmentProblem
    naming the requirements when pip cannot install them."""
    target = root / request.key
    if _reuse(target):
        _say_reused(target, request, log)
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{request.key}.lock")):
        if _reuse(target):
            _say_reused(target, request, log)
            return target
        staged = root / f".{request.key}.{os.getpid()}{PARTIAL_SUFFIX}"
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        try:
            command = [
                request.python,
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                "--no-warn-script-location",
                "--target",
                str(staged),
                *find_links_args(request.find_links),
            ]
            if request.constraints:
                constraints = staged.parent / f".{request.key}.constraints.txt"
                constraints.write_text("".join(f"{c}\n" for c in request.constraints))
                command += ["--constraint", str(constraints)]
            try:
                run([*command, *request.requirements], log=log)
            except CommandFailed as exc:
                raise EnvironmentProblem(
                    f"installing {', '.join(request.requirements)} for {request.purpose} with "
                    f"the host's pip failed: {exc.last_line}"
                ) from None
            (staged / COMPLETE).write_text(" ".join(request.requirements) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staged, target)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
            (root / f".{request.key}.constraints.txt").unlink(missing_ok=True)
    return target


def _say_reused(target: Path, request: HostEnvRequest, log: Path | None) -> None:
    """The log of a build that reuses an environment says which, as one that made it shows the install."""
    if log is not None:
        note(log, f"reusing {target} for {request.purpose}: {shlex.join(request.requirements)}")


def _reuse(target: Path) -> bool:
    """Whether ``target`` is complete; a reuse is its last use, what gc reads."""
    try:
        os.utime(target / COMPLETE)
    except OSError:
        return False
    return True


def collect_garbage(
    root: Path, *, unused_for_s: float, now: float | None = None, dry_run: bool = False
) -> list[Removed]:
    """Remove the tool environments under ``root`` no build used for ``unused_for_s`` seconds, and
    what a killed install left half-made."""
    return collect_unused_trees(
        root,
        None,
        marker=COMPLETE,
        unused_for_s=unused_for_s,
        now=now,
        dry_run=dry_run,
        lock=lambda entry: FileLock(str(root / f".{entry.name}.lock")),
    )
