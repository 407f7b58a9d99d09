"""What a package index's torch files say, release by release (pure).

``wheelfactory compat refresh`` (ci/compat_refresh.py) fetches the torch project page of one or
more indexes and reads it (plan/index_pages.py); this module reads the wheel file names into
torch files (parsed with ``packaging``: a name it refuses is not a torch wheel and is left out)
and those into what each release shows: its newest patch, the CPython tags and CUDA / ROCm
builds (local version labels such as ``+cu132``), the manylinux floor of its x86_64 wheels, its
aarch64 builds; and, from a wheel's METADATA, the CUDA of a build its file name does not label.
plan/table_refresh.py compares them with the table. Nothing here touches the network or the disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.plan.identity import ARCHES, Backend, InvalidBackend
from wheelfactory.plan.versions import major_minor, minor_of

LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
# The requirements that say which CUDA a torch wheel was built with (PyPI's own build carries no
# local version label in its file name: its METADATA does say it).
CUDA_REQUIREMENTS = (
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
)


@dataclass(frozen=True)
class TorchFile:
    """One torch wheel an index lists."""

    filename: str
    index: str  # the page it was listed on
    version: Version  # 2.15.0+cu132

    @property
    def minor(self) -> str:
        return f"{self.version.major}.{self.version.minor}"

    @property
    def label(self) -> str | None:
        """The build of a labelled wheel (cu132, cpu, rocm7.1); None: unlabelled (PyPI's default)."""
        return self.version.local

    @property
    def pythons(self) -> tuple[str, ...]:
        """CPython versions of its tags: cp312 -> 3.12 (free-threaded cp314t kept apart, as 3.14t)."""
        _, _, _, tags = parse_wheel_filename(self.filename)
        found = set()
        for tag in tags:
            match = re.fullmatch(
                r"cp(\d)(\d+)(t?)", tag.abi if tag.abi.startswith("cp") else tag.interpreter
            )
            if match:
                found.add(f"{match.group(1)}.{match.group(2)}{match.group(3)}")
        return tuple(sorted(found, key=_python_key))

    @property
    def platforms(self) -> tuple[tuple[str, tuple[int, int]], ...]:
        """(arch, glibc floor) of each manylinux tag."""
        _, _, _, tags = parse_wheel_filename(self.filename)
        found = set()
        for tag in tags:
            for arch in ARCHES:
                head, _, tail = tag.platform.rpartition("_" + arch)
                if not tail and (floor := manylinux_floor(head)) is not None:
                    found.add((arch, floor))
        return tuple(sorted(found))


def manylinux_floor(platform: str) -> tuple[int, int] | None:
    """``manylinux_2_28`` -> (2, 28), ``manylinux2014`` -> (2, 17): the glibc a platform tag (less
    its arch) needs; None for any other tag."""
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)", platform)
    return (int(match.group(1)), int(match.group(2))) if match else LEGACY_MANYLINUX.get(platform)


def _python_key(text: str) -> tuple[int, int, str]:
    """``3.14t`` sorts after 3.14 and before 3.15."""
    free_threaded = text.endswith("t")
    return (*major_minor(text.rstrip("t")), "t" if free_threaded else "")


def build_of_metadata(text: str, machine: str = "x86_64") -> tuple[str, str] | None:
    """(local-version-style build, the requirement that says so) of a torch wheel's METADATA, as
    it installs on Linux ``machine``: ("cu132", "cuda-toolkit==13.2.2"); ("cpu", "no CUDA
    requirement") when it requires none of them there (torch 2.4-2.10's aarch64 wheels list their
    nvidia-* requirements with ``platform_machine == "x86_64"``); None when the text is not METADATA."""
    from email.parser import HeaderParser

    from packaging.requirements import InvalidRequirement, Requirement

    headers = HeaderParser().parsestr(text)
    if not headers.get("Name"):
        return None
    where = {
        "platform_machine": machine,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "extra": "",
    }
    for line in headers.get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() not in CUDA_REQUIREMENTS:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(where):
            continue
        for spec in requirement.specifier:
            if spec.operator in ("==", "~=", ">="):
                try:
                    build = Backend("cuda", spec.version.replace(".*", "")).tag
                except InvalidVersion:
                    continue
                return build, f"{requirement.name}{spec}"
    return "cpu", "no CUDA requirement"


def torch_files(names: Iterable[str], index: str) -> list[TorchFile]:
    """The torch wheels among ``names`` (sdists, other projects and unparsable names left out)."""
    found = []
    for name in names:
        if not name.endswith(".whl"):
            continue
        try:
            project, version, _, _ = parse_wheel_filename(name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if project == "torch" and not version.is_prerelease:
            found.append(TorchFile(name, index, version))
    return found


def build_of_label(label: str) -> Backend | None:
    """cu132 -> CUDA 13.2; rocm7.1 -> ROCm 7.1; cpu; None for a label that names no build."""
    try:
        return Backend.parse(label)
    except InvalidBackend:
        return None


@dataclass(frozen=True)
class ReleaseFacts:
    """What the files of one torch release show."""

    minor: str
    newest: str  # the newest patch release, 2.16.0
    pythons: tuple[str, ...]
    cuda: tuple[str, ...]
    rocm: tuple[str, ...]
    unlabelled: bool  # files without a local label: the build an index serves by default
    x86_64_floor: tuple[int, int] | None
    aarch64: tuple[str, ...]  # labels of aarch64 files ("" for unlabelled)
    indexes: tuple[str, ...]
    example: str  # one file name, for the source line


def release_facts(files: Sequence[TorchFile]) -> list[ReleaseFacts]:
    by_minor: dict[str, list[TorchFile]] = {}
    for file in files:
        by_minor.setdefault(file.minor, []).append(file)
    facts = []
    for minor, members in sorted(by_minor.items(), key=lambda item: Version(item[0])):
        builds = {b for f in members if f.label and (b := build_of_label(f.label)) is not None}
        cuda, rocm = (
            {minor_of(b.version or "") for b in builds if b.kind == k} for k in ("cuda", "rocm")
        )
        floors = [floor for f in members for arch, floor in f.platforms if arch == "x86_64"]
        aarch64 = {
            f.label or "" for f in members if any(arch == "aarch64" for arch, _ in f.platforms)
        }
        newest = max(members, key=lambda f: Version(f.version.public))
        # the source line's example: a Linux x86_64 wheel of the newest patch where there is one
        example = min(
            (f for f in members if f.version.public == newest.version.public),
            key=lambda f: (not any(arch == "x86_64" for arch, _ in f.platforms), f.filename),
        )
        facts.append(
            ReleaseFacts(
                minor,
                Version(newest.version.public).public,
                tuple(
                    sorted(
                        {p for f in members for p in f.pythons if not p.endswith("t")},
                        key=_python_key,
                    )
                ),
                tuple(sorted(cuda, key=Version)),
                tuple(sorted(rocm, key=Version)),
                any(f.label is None for f in members),
                min(floors) if floors else None,
                tuple(sorted(aarch64)),
                tuple(sorted({f.index for f in members})),
                example.filename,
            )
        )
    return facts
