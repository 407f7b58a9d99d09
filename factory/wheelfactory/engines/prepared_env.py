"""Prepared build environments: torch (and, apart, the build tools) installed once per (image,
interpreter, wheelhouse content) into a host directory that every container needing it mounts
read-only, instead of pip-installing torch into each build and smoke container.

Why a mounted directory and not an image layer: a layer would have to be committed from a
container (the SDK cannot bind-mount the wheelhouse into a build), a CUDA torch is a 5 GB
snapshot per image, and the smoke/test container would inherit the build tools with torch. As
two directories, the build container sees both (tools first on PYTHONPATH), the smoke
container only torch, nothing can change them during a build (read-only mounts), and cleanup is
removing a directory (``wheelfactory gc``).

Hermetic: the install runs in a container from the build image with ``--network none``, from the
variant's wheel set mounted read-only. A directory is keyed by the image id, the interpreter,
the requirements and the sha256 of every wheel in the set: a changed wheelhouse makes a new one.
It appears by a rename only when complete (its ``env.json`` written inside first); a use touches
``env.json``, which is what ``gc`` reads as "last used".

Environments share their identical large files by hard links (support/linkstore.py, the store in
``.blobs``): the nvidia-* libraries of one CUDA torch build are on disk once, however many
interpreters and images use them. This is safe because environments are never written after
they are made (mounted read-only).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock

from wheelfactory.project.keys import json_digest
from wheelfactory.support.linkstore import Removed, collect_unused_trees, share_identical_files

MOUNT_ROOT = "/opt/wheelfactory"  # inside containers: the same path when made and when used
COMPLETE = "env.json"
BLOBS = ".blobs"  # the link store the environments share files through
Role = Literal["torch", "tools", "build", "deps", "test"]


@dataclass(frozen=True)
class EnvRequest:
    """What one prepared environment holds, and from what."""

    role: Role  # "torch": torch and its dependencies (+ toolkit wheels); "tools": the factory's build
    # and repair tools; "build": the project's build system (its [build-system] requires); "deps":
    # what the wheel requires at run time (smoke and tests); "test": [test] requires
    image_id: str
    python: str  # the /opt/python entry that installs and later runs it
    requirements: tuple[str, ...]
    wheels: tuple[tuple[str, str], ...]  # the mounted wheel set's content: (file name, sha256)

    @property
    def key(self) -> str:
        return f"{self.role}-{json_digest(asdict(self))[:16]}"

    @property
    def mount(self) -> str:
        """Where containers see it: what goes on PYTHONPATH (and ``/bin`` on PATH)."""
        return f"{MOUNT_ROOT}/{self.role}"


@dataclass(frozen=True)
class PreparedEnv:
    path: Path  # on the host
    mount: str  # in containers
    key: str
    created: bool  # False: an existing one was reused
    shared_bytes: int = 0  # of a new one: the bytes it shares with environments made before it


# Fills the (empty) host directory with the request's packages: it runs the install in a
# container where that directory is mounted read-write at ``request.mount``.
Installer = Callable[[EnvRequest, Path], None]


class PreparedEnvs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def ensure(self, request: EnvRequest, install: Installer) -> PreparedEnv:
        found = self._complete(request)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / f".{request.key}.lock")):  # parallel variants make one, once
            found = self._complete(request)
            if found is not None:
                return found
            staged = self.root / f".{request.key}.{os.getpid()}.partial"
            shutil.rmtree(staged, ignore_errors=True)
            staged.mkdir(parents=True)
            try:
                install(request, staged)
                shared = share_identical_files(staged, self.root / BLOBS)
                (staged / COMPLETE).write_text(json.dumps({**asdict(request), "key": request.key}, indent=2))
                target = self.root / request.key
                shutil.rmtree(target, ignore_errors=True)
                os.replace(staged, target)
            finally:
                shutil.rmtree(staged, ignore_errors=True)
            return PreparedEnv(target, request.mount, request.key, True, shared.bytes)

    def _complete(self, request: EnvRequest) -> PreparedEnv | None:
        target = self.root / request.key
        marker = target / COMPLETE
        if not marker.is_file():
            return None
        try:
            os.utime(marker)  # last used: what gc reads
        except OSError:
            pass
        return PreparedEnv(target, request.mount, request.key, False)


def collect_garbage(root: Path, *, unused_for_s: float, now: float | None = None,
                    dry_run: bool = False) -> list[Removed]:
    """Remove the prepared environments under ``root`` not used for ``unused_for_s`` seconds, and
    partial ones a killed run left, then the shared files no remaining environment links to."""
    return collect_unused_trees(root, root / BLOBS, marker=COMPLETE, unused_for_s=unused_for_s, now=now,
                                dry_run=dry_run, lock=lambda entry: FileLock(str(root / f".{entry.name}.lock")))
