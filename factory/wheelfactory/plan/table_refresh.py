"""What the torch files an index lists show that the compatibility table in use lacks, and the
TOML that adds it (pure; ``wheelfactory compat refresh``, ci/compat_refresh.py, fetches and writes):

- a torch release the table lacks gets a ready ``[torch."X.Y"]`` fragment: its newest patch, the
  CPython tags and CUDA / ROCm builds its file names show, the manylinux floor of its x86_64
  wheels, its aarch64 builds; what file names cannot tell (the C++ ABI, the build PyPI serves when
  every file carries a label) is carried over from the newest known release and marked
  ``unverified`` in ``source``;
- for a release the table knows: a newer patch, builds (local version labels such as ``+cu132``
  on a per-backend index), Pythons and a platform floor it does not list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from wheelfactory.plan.compat import CompatTable, TorchRelease
from wheelfactory.plan.identity import Backend
from wheelfactory.plan.torch_releases import ReleaseFacts, build_of_label, manylinux_floor


@dataclass(frozen=True)
class Finding:
    """One thing the table does not know."""

    minor: str
    what: str  # release, patch, build, python, platform, toolkit
    text: str


@dataclass(frozen=True)
class Refresh:
    findings: tuple[Finding, ...]
    fragments: tuple[tuple[str, str], ...] = field(default=())  # (minor, TOML) per new release
    # (CUDA version, TOML stub) the table lacks
    toolkits: tuple[tuple[str, str], ...] = field(default=())

    @property
    def behind(self) -> bool:
        return bool(self.findings)


def _floor_name(floor: tuple[int, int]) -> str:
    return f"manylinux_{floor[0]}_{floor[1]}"


def compare(
    table: CompatTable,
    facts: Sequence[ReleaseFacts],
    default_builds: Mapping[str, tuple[str, str]] | None = None,
    aarch64_builds: Mapping[str, tuple[str, str]] | None = None,
) -> Refresh:
    """What ``facts`` show that ``table`` lacks, with a fragment per new release. ``default_builds``
    (``aarch64_builds``): release -> (build, evidence) of its unlabelled x86_64 (aarch64) wheel,
    read from its METADATA where the index serves that (build_of_metadata)."""
    findings: list[Finding] = []
    fragments: list[tuple[str, str]] = []
    stubs: dict[str, str] = {}
    known_cuda = {c.version for c in table.cuda}
    newest_known = table.releases[-1] if table.releases else None
    for fact in facts:
        release = table.release(fact.minor)
        if release is None:
            if newest_known is not None and Version(fact.minor) < newest_known.version:
                continue  # an old release the table chose not to carry
            findings.append(
                Finding(fact.minor, "release", f"torch {fact.newest} is not in the table")
            )
            fragments.append(
                (
                    fact.minor,
                    fragment(
                        fact,
                        newest_known,
                        (default_builds or {}).get(fact.minor),
                        (aarch64_builds or {}).get(fact.minor),
                    ),
                )
            )
        else:
            findings.extend(_known_release(release, fact))
        for version in fact.cuda:
            if version not in known_cuda and version not in stubs:
                findings.append(
                    Finding(
                        fact.minor,
                        "toolkit",
                        f"CUDA {version} (torch {fact.minor}'s +{Backend('cuda', version).tag} "
                        f'build) has no [cuda."{version}"] entry',
                    )
                )
                stubs[version] = toolkit_stub(table, version)
    return Refresh(
        tuple(findings), tuple(fragments), tuple(sorted(stubs.items(), key=lambda i: Version(i[0])))
    )


def _known_release(release: TorchRelease, fact: ReleaseFacts) -> list[Finding]:
    found = []
    if Version(fact.newest) > Version(release.build_version):
        found.append(
            Finding(
                fact.minor,
                "patch",
                f"torch {fact.newest} is out; the table builds "
                f"{release.build_version} (build_version)",
            )
        )
    for kind, seen, listed in (
        ("CUDA", fact.cuda, release.cuda),
        ("ROCm", fact.rocm, release.rocm),
    ):
        missing = [v for v in seen if v not in listed]
        if missing:
            found.append(
                Finding(
                    fact.minor,
                    "build",
                    f"torch {fact.minor} has {kind} {', '.join(missing)} builds "
                    f"the table does not list ({kind.lower()} = {list(listed)})",
                )
            )
    pythons = [p for p in fact.pythons if p not in release.python]
    if pythons:
        found.append(
            Finding(
                fact.minor,
                "python",
                f"torch {fact.minor} has wheels for Python {', '.join(pythons)} "
                f"the table does not list (python = {list(release.python)})",
            )
        )
    listed_floor = manylinux_floor(release.wheel_platform)
    if (
        fact.x86_64_floor is not None
        and listed_floor is not None
        and fact.x86_64_floor != listed_floor
    ):
        found.append(
            Finding(
                fact.minor,
                "platform",
                f"torch {fact.minor}'s x86_64 wheels are "
                f"{_floor_name(fact.x86_64_floor)}; the table says "
                f"{release.wheel_platform} (wheel_platform)",
            )
        )
    return found


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def fragment(
    fact: ReleaseFacts,
    previous: TorchRelease | None,
    default: tuple[str, str] | None = None,
    aarch64_default: tuple[str, str] | None = None,
) -> str:
    """A ``[torch."X.Y"]`` table for a release the table lacks, each value with where it came from.
    ``default`` (``aarch64_default``): (build, evidence) of the unlabelled x86_64 (aarch64) wheel,
    from its METADATA."""
    inferred = []
    read = []
    builds = [Backend("cuda", v).build_name for v in fact.cuda]
    builds += [Backend("rocm", v).build_name for v in fact.rocm]
    if default is not None:
        pypi_default = default[0]
        read.append(f"pypi_default from the unlabelled wheel's METADATA ({default[1]})")
    elif fact.unlabelled and not builds and previous is not None:
        pypi_default = previous.pypi_default  # only unlabelled files: PyPI's own build, not named
        inferred.append(
            f"pypi_default (carried over from {previous.minor}: file names do not name the build)"
        )
    elif previous is not None and previous.pypi_default in builds + ["cpu"]:
        pypi_default = previous.pypi_default
        inferred.append(f"pypi_default (as {previous.minor})")
    else:
        pypi_default = next(
            iter(sorted((b for b in builds if b.startswith("cu")), reverse=True)), "cpu"
        )
        inferred.append("pypi_default (the newest CUDA build)")
    cuda = list(fact.cuda)
    default_build = build_of_label(pypi_default)
    default_cuda = default_build.version if default_build and default_build.kind == "cuda" else None
    if default_cuda is not None and default_cuda not in cuda:  # PyPI's wheel is that build
        cuda = sorted([*cuda, default_cuda], key=Version)
    platform = (
        _floor_name(fact.x86_64_floor)
        if fact.x86_64_floor
        else (previous.wheel_platform if previous else "manylinux_2_28")
    )
    if fact.x86_64_floor is None:
        inferred.append("wheel_platform")
    pypi_aarch64 = ""
    if aarch64_default is not None:
        pypi_aarch64 = aarch64_default[0]
        read.append(
            f"pypi_aarch64 from the unlabelled aarch64 wheel's METADATA ({aarch64_default[1]})"
        )
    elif "" in fact.aarch64 and previous is not None and previous.pypi_aarch64:
        pypi_aarch64 = previous.pypi_aarch64
        inferred.append(f"pypi_aarch64 (carried over from {previous.minor})")
    aarch64 = sorted({label or pypi_aarch64 or pypi_default for label in fact.aarch64})
    inferred.append(
        f"abi (cxx11 only, as {previous.minor})" if previous is not None else "abi (cxx11 only)"
    )
    if not fact.pythons:
        inferred.append("python")
    source = (
        f"compat refresh: {', '.join(fact.indexes)} ({fact.example}): patch, python, cuda, rocm, "
        f"wheel_platform and aarch64 from file names; {''.join(r + '; ' for r in read)}"
        f"unverified: {'; '.join(inferred)}"
    )
    return (
        "\n".join(
            [
                f'[torch."{fact.minor}"]',
                f'build_version = "{fact.newest}"',
                f"python = {_toml_list(fact.pythons or (previous.python if previous else ()))}",
                f"cuda = {_toml_list(cuda)}",
                f"rocm = {_toml_list(fact.rocm)}",
                f'pypi_default = "{pypi_default}"',
                f'wheel_platform = "{platform}"',
                f"aarch64 = {_toml_list(aarch64)}",
                *([f'pypi_aarch64 = "{pypi_aarch64}"'] if pypi_aarch64 else []),
                'abi.cxx11 = { builds = "all" }',
                f"source = {json.dumps(source)}",
            ]
        )
        + "\n"
    )


def toolkit_stub(table: CompatTable, version: str) -> str:
    """A ``[cuda."X.Y"]`` entry for a toolkit the table lacks: the nearest older one's facts, marked
    unverified (a new CUDA keeps the architectures of the last and may add some)."""
    older = [c for c in table.cuda if Version(c.version) < Version(version)]
    base = max(older, key=lambda c: Version(c.version)) if older else None
    if base is None:
        raise ValueError(f"no CUDA toolkit older than {version} in the table to start from")
    lines = [
        f'[cuda."{version}"]',
        f'arch_list = "{";".join(base.arch_list)}"',
        f'min_arch = "{base.min_arch}"',
        f'max_arch = "{base.max_arch}"',
        f"source = {json.dumps(f'compat refresh: copied from CUDA {base.version} (unverified)')}",
    ]
    return "\n".join(lines) + "\n"


def merged_table(text: str, refresh: Refresh) -> str:
    """The table's text with the new releases' and toolkits' tables appended (TOML lets a table
    come anywhere once); known releases are not edited: their findings are for a person."""
    parts = [text.rstrip("\n") + "\n"]
    if refresh.fragments or refresh.toolkits:
        parts.append(
            "\n# ---- added by `wheelfactory compat refresh` (check the unverified facts) ----\n"
        )
    for _, toml in refresh.fragments:
        parts.append("\n" + toml)
    for _, toml in refresh.toolkits:
        parts.append("\n" + toml)
    return "".join(parts)
