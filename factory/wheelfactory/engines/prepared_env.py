"""Prepared build environments: torch (and, apart, the build tools) installed once per (image,
interpreter, wheelhouse content) into a host directory that every container needing it mounts
read-only, instead of pip-installing torch into each build and smoke container.

Why a mounted directory and not an image layer: a layer would have to be committed from a
container (the SDK cannot bind-mount the wheelhouse into a build), a CUDA torch is a 5 GB
snapshot per image, and the smoke/test container would inherit the build tools with torch. As
two directories, the build container sees both (tools first on PYTHONPATH), the smoke
container only torch, nothing can change them during a build (read-only mounts), and cleanup is
removing a directory (``wheelfactory gc``).

Made on the host, for the container's interpreter, by uv (``install_from_set``): it resolves
against the variant's wheel set only (offline, no index) for the image's Python version, arch and
glibc, and hard-links each wheel's files from its unpacked copy in the wheelhouse's ``unpacked/``
(uv's cache). So a wheel is unpacked once however many environments hold it: the nvidia-*
wheels of a CUDA torch (~3 GB) are shared by every interpreter and torch release that pins them,
and a second environment of the same torch takes a second, not a minute. Nothing of the target's
arch runs: an aarch64 environment is made natively on an x86-64 machine (pip under QEMU took
100-200 s). Bytecode is compiled by the host's interpreter when it is the container's Python
version (the same .pyc), else in a container of the image. Entry-point scripts are pointed at the
container's interpreter, as pip inside it would write them.

A directory is keyed by the image id, the interpreter, the requirements and the sha256 of every
wheel in the set: a changed wheelhouse makes a new one. It appears by a rename only when complete
(its ``env.json`` written inside first); a use touches ``env.json``, which is what ``gc`` reads as
"last used". Environments are never written after they are made (mounted read-only), which is
what makes sharing files by hard links safe; what uv did not link (bytecode) is shared through
support/linkstore.py's store in ``.blobs``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock
from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.engines.target_resolution import uv_platform
from wheelfactory.engines.wheelhouse import ContainerPython
from wheelfactory.errors import WheelhouseError
from wheelfactory.project.keys import json_digest
from wheelfactory.support.linkstore import Removed, collect_unused_trees, share_identical_files
from wheelfactory.support.proc import CommandFailed, Runner, run

MOUNT_ROOT = "/opt/wheelfactory"  # inside containers: the same path when made and when used
# where a container sees the wheel set a "deps" request names files of
WHEELHOUSE_MOUNT = "/wheelhouse"
COMPLETE = "env.json"
BLOBS = ".blobs"  # the link store the environments share files through
UNPACKED = "unpacked"  # beside the environments' folder: uv's cache of unpacked wheels they link to
Role = Literal["torch", "tools", "build", "deps", "test"]


@dataclass(frozen=True)
class EnvRequest:
    """What one prepared environment holds, and from what."""

    # "torch": torch and its dependencies (+ toolkit wheels); "tools": the factory's build
    role: Role
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
    def names_files(self) -> bool:
        """The requirements are the set's files (resolved already: installed without dependencies)."""
        return bool(self.requirements) and all(
            r.startswith(f"{WHEELHOUSE_MOUNT}/") for r in self.requirements
        )

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
                # what uv did not link: the bytecode
                share_identical_files(staged, self.root / BLOBS)
                (staged / COMPLETE).write_text(
                    json.dumps({**asdict(request), "key": request.key}, indent=2)
                )
                target = self.root / request.key
                shutil.rmtree(target, ignore_errors=True)
                os.replace(staged, target)
            finally:
                shutil.rmtree(staged, ignore_errors=True)
            return PreparedEnv(target, request.mount, request.key, True, shared_by_earlier(target))

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


def shared_by_earlier(tree: Path) -> int:
    """The bytes of ``tree``'s files that an earlier environment holds too: a file has one link in
    this tree and one in its unpacked wheel (or the blob store); a third is another tree's."""
    return sum(info.st_size for info in _files(tree) if info.st_nlink > 2)


def collect_garbage(
    root: Path, *, unused_for_s: float, now: float | None = None, dry_run: bool = False
) -> list[Removed]:
    """Remove the prepared environments under ``root`` not used for ``unused_for_s`` seconds, and
    partial ones a killed run left, then the shared files no remaining environment links to, and
    the unpacked wheels (``root``'s sibling ``unpacked/``) no remaining environment links to. The
    unpacked wheels still linked stay, so that the next environment of the same wheel (the
    nvidia-* wheels of every torch that pins them, the same torch for another image) shares them
    with the environments left."""
    removed = collect_unused_trees(
        root,
        root / BLOBS,
        marker=COMPLETE,
        unused_for_s=unused_for_s,
        now=now,
        dry_run=dry_run,
        lock=lambda entry: FileLock(str(root / f".{entry.name}.lock")),
    )
    unpacked = root.parent / UNPACKED
    if removed and unpacked.is_dir():
        with unpacked_lock(unpacked, exclusive=True):  # after any install that is reading it
            freed = remove_unlinked_wheels(unpacked, dry_run=dry_run)
        if freed:
            removed.append(Removed(unpacked, freed))
    return removed


def remove_unlinked_wheels(unpacked: Path, *, dry_run: bool = False) -> int:
    """Remove from uv's cache ``unpacked`` each unpacked wheel no environment links a file of, and
    the entries that point uv to it (a later install unpacks it again); the bytes freed.

    Why not ``uv cache clean <package>``: it drops every unpacked wheel of a package, so cleaning
    the torch of a removed environment would drop the torch other environments still link, and
    the next environment of that torch would take a second copy of it. uv's cache keeps an unpacked
    wheel as ``archive-v*/<id>/`` and each entry that leads to it (``wheels-v*/**``) names the id."""
    garbage = {}
    for archive in sorted(unpacked.glob("archive-v*/*")):
        if archive.is_dir() and not archive.is_symlink():
            files = list(_files(archive))
            if not any(info.st_nlink > 1 for info in files):
                garbage[archive] = sum(info.st_size for info in files)
    if not garbage or dry_run:
        return sum(garbage.values())
    ids = [archive.name.encode() for archive in garbage]
    for entry in sorted(unpacked.glob("wheels-v*/**/*")):
        try:
            if (
                entry.is_file()
                and not entry.is_symlink()
                and entry.stat().st_size < 1 << 20
                and any(archive_id in entry.read_bytes() for archive_id in ids)
            ):
                entry.unlink()
        except OSError:
            continue
    for archive in garbage:
        shutil.rmtree(archive, ignore_errors=True)
    return sum(garbage.values())


@contextmanager
def unpacked_lock(unpacked: Path, *, exclusive: bool) -> Iterator[None]:
    """Installs read the unpacked wheels together (a shared flock), gc removes them alone."""
    unpacked.parent.mkdir(parents=True, exist_ok=True)
    with open(unpacked.parent / f".{unpacked.name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield  # closing the file drops the lock


def _files(tree: Path) -> Iterator[os.stat_result]:
    for base, _, names in os.walk(tree):
        for name in names:
            try:
                info = (Path(base) / name).lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                yield info


def install_from_set(
    request: EnvRequest,
    target: Path,
    *,
    wheels: Path,
    python: ContainerPython,
    unpacked: Path,
    store: Path | None = None,
    log: Path | None = None,
    runner: Runner = run,
) -> None:
    """Install ``request`` into ``target`` for the container's interpreter, from the wheel set at
    ``wheels`` only: uv, offline and with no index, for ``python``'s version and platform, each
    file hard-linked from its wheel's unpacked copy in ``unpacked``. A request that names the
    set's files ("deps", "test") (as the container sees them), resolved already: installed without dependencies,
    each pinned by name and version (as a path, uv would unpack a second copy of the same wheel).

    uv keys an unpacked wheel by the folder it was found in, and every set is its own folder: the
    same nvidia-* wheel in the sets of two Pythons would be unpacked (3 GB) and kept twice. When the
    set's files are the wheelhouse ``store``'s (hard links, as Wheelhouse makes them), uv looks in
    the store instead, held to the set by a constraint per wheel and a check of what it installed."""
    from uv import find_uv_bin

    def pinned(requirement: str) -> str:
        if not requirement.startswith(f"{WHEELHOUSE_MOUNT}/"):
            return requirement
        name, version, _, _ = parse_wheel_filename(requirement.rsplit("/", 1)[1])
        return f"{name}=={version}"

    in_set = (
        wheel_releases(name for name, _ in request.wheels)
        if request.wheels
        else wheel_releases(path.name for path in wheels.glob("*.whl"))
    )
    source = store if store is not None and _all_stored(wheels, store) else wheels
    requirements = [pinned(r) for r in request.requirements]
    target.mkdir(parents=True, exist_ok=True)
    constraints = target.parent / f".{target.name}.constraints.txt"
    constraints.write_text(
        "".join(
            f"{name}=={version}\n"
            for name, versions in sorted(in_set.items())
            if len(versions) == 1
            for version in versions
        )
    )
    command = [
        find_uv_bin(),
        "pip",
        "install",
        "--no-config",
        "--offline",
        "--no-index",
        "--quiet",
        "--find-links",
        str(source),
        "--constraint",
        str(constraints),
        "--target",
        str(target),
        "--python",
        sys.executable,
        "--python-version",
        python.version,
        "--python-platform",
        uv_platform(python),
        "--link-mode",
        "hardlink",
        "--cache-dir",
        str(unpacked),
        *(["--no-deps"] if request.names_files else []),
        *requirements,
    ]
    try:
        with unpacked_lock(unpacked, exclusive=False):
            runner(command, log=log)
    except CommandFailed as exc:
        raise WheelhouseError(
            f"preparing the {request.role} environment ({' '.join(request.requirements)}) from "
            f"the wheel set {wheels} failed: {exc.last_line}"
        ) from None
    finally:
        constraints.unlink(missing_ok=True)
    outside = sorted(
        f"{name} {version}"
        for name, version in installed_releases(target)
        if version not in in_set.get(name, ())
    )
    if outside:
        raise WheelhouseError(
            f"preparing the {request.role} environment from the wheel set {wheels} installed "
            f"{', '.join(outside)}, which the set does not hold: remove the set (wheelfactory gc) "
            "so that the next build downloads it whole"
        )


def wheel_releases(filenames: Iterable[str]) -> dict[NormalizedName, set[Version]]:
    """Each distribution among these wheel file names -> its versions there."""
    found: dict[NormalizedName, set[Version]] = {}
    for filename in filenames:
        name, version, _, _ = parse_wheel_filename(filename)
        found.setdefault(name, set()).add(version)
    return found


def _all_stored(wheels: Path, store: Path) -> bool:
    """Every wheel of the set is the store's file (one inode): uv may take them from the store."""
    files = sorted(wheels.glob("*.whl"))
    try:
        return bool(files) and all(os.path.samefile(f, store / f.name) for f in files)
    except OSError:
        return False


def installed_releases(target: Path) -> Iterator[tuple[NormalizedName, Version]]:
    """(name, version) of each distribution installed in ``target`` (a site-packages or a
    ``--target`` tree), read from its ``*.dist-info`` directory names."""
    for info in target.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        try:
            yield canonicalize_name(name), Version(version)
        except InvalidVersion:
            continue


def point_scripts_at(target: Path, interpreter: str) -> None:
    """The entry-point scripts uv wrote name the host's interpreter: name the container's, as pip
    inside the container would have. Each is replaced, never written in place (a file may be a
    hard link that other trees share)."""
    for script in sorted((target / "bin").glob("*")) if (target / "bin").is_dir() else ():
        if script.is_symlink() or not script.is_file():
            continue
        with script.open("rb") as handle:
            first = handle.readline()
            rest = handle.read()
        if not (first.startswith(b"#!") and b"python" in first):
            continue
        staged = script.with_name(f".{script.name}.script")
        staged.write_bytes(f"#!{interpreter}\n".encode() + rest)
        staged.chmod(script.stat().st_mode)
        os.replace(staged, script)


def link_unversioned_cudart(target: Path) -> None:
    """NVIDIA's toolkit wheels ship ``libcudart.so.<major>`` only and the link step asks for
    ``-lcudart``: the unversioned link is made here, as the environment is read-only when used."""
    for versioned in target.glob("nvidia/*/lib/libcudart.so.*"):
        plain = versioned.with_name("libcudart.so")
        if not plain.exists() and not plain.is_symlink():
            plain.symlink_to(versioned.name)


def compile_bytecode_here(
    target: Path, mount: str, version: str, log: Path | None = None, runner: Runner = run
) -> bool:
    """Compile ``target``'s modules with this interpreter when it is the container's Python
    ``version`` (the same bytecode, recorded under ``mount`` where containers see it): containers
    read them from a read-only mount, so without .pyc every import compiles again. False: this
    interpreter cannot, the image's must. A module that does not compile is left to its import."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != version:
        return False
    try:
        runner(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                "-j",
                "0",
                "-s",
                str(target),
                "-p",
                mount,
                str(target),
            ],
            log=log,
        )
    except CommandFailed:
        pass  # as the image's own compileall: the rest is compiled, the failures are in the log
    return True
