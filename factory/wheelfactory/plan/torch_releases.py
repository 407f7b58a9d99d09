"""What a package index says about torch, against the compatibility table in use (pure).

``wheelfactory compat refresh`` (ci/compat_refresh.py) fetches the torch project page of one or
more indexes; this module reads those pages (PEP 691 JSON or PEP 503 HTML) into torch wheel files,
compares them with the table and renders what is new:

- a torch release the table lacks gets a ready ``[torch."X.Y"]`` fragment: its newest patch, the
  CPython tags and CUDA / ROCm builds its file names show, the manylinux floor of its x86_64
  wheels, its aarch64 builds; what file names cannot tell (the C++ ABI, the build PyPI serves when
  every file carries a label) is carried over from the newest known release and marked
  ``unverified`` in ``source``;
- for a release the table knows: a newer patch, builds (local version labels such as ``+cu132``
  on a per-backend index), Pythons and a platform floor it does not list.

Wheel file names are parsed with ``packaging`` (a name it refuses is not a torch wheel and is left
out); nothing here touches the network or the disk.
"""

from __future__ import annotations

import html.parser
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.plan.compat import CompatTable, TorchRelease

JSON_CONTENT = "application/vnd.pypi.simple.v1+json"
CUDA_LABEL = re.compile(r"cu(\d+)(\d)")  # cu132 -> 13.2, cu118 -> 11.8
ROCM_LABEL = re.compile(r"rocm(\d+\.\d+)(?:\.\d+)*")
MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)")
LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}


class InvalidPage(ValueError):
    """A project page that is neither PEP 691 JSON nor PEP 503 HTML listing files."""


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
            if match := MANYLINUX.fullmatch(tag.platform):
                found.add((match.group(3), (int(match.group(1)), int(match.group(2)))))
            else:
                legacy, _, arch = tag.platform.partition("_")
                if legacy in LEGACY_MANYLINUX and arch in ("x86_64", "aarch64"):
                    found.add((arch, LEGACY_MANYLINUX[legacy]))
        return tuple(sorted(found))


def _python_key(text: str) -> tuple[int, int, str]:
    major, _, rest = text.partition(".")
    return int(major), int(rest.rstrip("t")), rest[-1:] if rest.endswith("t") else ""


@dataclass(frozen=True)
class ListedFile:
    """One file a project page lists, and where the index serves its core metadata apart from
    the wheel (PEP 658 / PEP 714), when it does."""

    name: str
    metadata_url: str | None = None
    # the hash the page gives (JSON ``hashes``, an HTML ``#sha256=`` fragment)
    sha256: str | None = None
    url: str = ""  # the file's URL, absolute


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _sha256_or_none(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and _SHA256.fullmatch(value.lower()) else None


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []  # (href, metadata offered)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)  # an attribute without a value is present: offered (PEP 714)
            offered = any(
                key in found and found[key] != "false"
                for key in ("data-core-metadata", "data-dist-info-metadata")
            )
            self.links.append((found.get("href") or "", offered))


def listed_files(body: bytes, content_type: str, page_url: str) -> list[ListedFile]:
    """The files a project page lists: PEP 691 JSON (``files[].filename``) when the server says
    so, else PEP 503 HTML (the last path segment of each anchor's href). A file's metadata URL is
    set where the page says the index serves it (``core-metadata``, or the older
    ``dist-info-metadata``): a wheel's Requires-Dist without downloading the wheel. InvalidPage
    when the page is neither format."""
    from urllib.parse import unquote, urljoin

    if content_type.split(";")[0].strip().lower() == JSON_CONTENT or body.lstrip()[:1] == b"{":
        try:
            document = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InvalidPage(f"not PEP 691 JSON ({exc})") from None
        entries = document.get("files") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise InvalidPage("a PEP 691 page needs a files list")
        found = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
                continue
            offered = entry.get("core-metadata", entry.get("dist-info-metadata"))
            url = entry.get("url")
            where = urljoin(page_url, url.split("#", 1)[0]) if isinstance(url, str) else ""
            metadata = where + ".metadata" if offered and where else None
            hashes = entry.get("hashes")
            found.append(
                ListedFile(
                    entry["filename"],
                    metadata,
                    _sha256_or_none(hashes.get("sha256") if isinstance(hashes, dict) else None),
                    where,
                )
            )
        return found
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPage(f"neither PEP 691 JSON nor PEP 503 HTML ({exc})") from None
    if "<" not in text:
        raise InvalidPage("neither PEP 691 JSON nor PEP 503 HTML")
    parser = _Anchors()
    parser.feed(text)
    listed = []
    for href, offered in parser.links:
        path, _, fragment = href.partition("#")
        name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
        algorithm, _, digest = fragment.partition("=")
        if name:
            where = urljoin(page_url, path)
            listed.append(
                ListedFile(
                    name,
                    where + ".metadata" if offered else None,
                    _sha256_or_none(digest) if algorithm == "sha256" else None,
                    where,
                )
            )
    return listed


# The requirements that say which CUDA a torch wheel was built with (PyPI's own build carries no
# local version label in its file name: its METADATA does say it).
CUDA_REQUIREMENTS = (
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu13",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime-cu11",
)


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
                    version = Version(spec.version.replace(".*", ""))
                except InvalidVersion:
                    continue
                return f"cu{version.major}{version.minor}", f"{requirement.name}{spec}"
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


def _build_of(label: str) -> tuple[str, str] | None:
    """cu132 -> ("cuda", "13.2"); rocm7.1 -> ("rocm", "7.1"); cpu -> ("cpu", ""); else None."""
    if label == "cpu":
        return "cpu", ""
    if match := CUDA_LABEL.fullmatch(label):
        return "cuda", f"{match.group(1)}.{match.group(2)}"
    if match := ROCM_LABEL.fullmatch(label):
        return "rocm", match.group(1)
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
        builds = {b for f in members if f.label and (b := _build_of(f.label)) is not None}
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
                tuple(sorted((v for k, v in builds if k == "cuda"), key=Version)),
                tuple(sorted((v for k, v in builds if k == "rocm"), key=Version)),
                any(f.label is None for f in members),
                min(floors) if floors else None,
                tuple(sorted(aarch64)),
                tuple(sorted({f.index for f in members})),
                example.filename,
            )
        )
    return facts


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


def _floor_of(platform: str) -> tuple[int, int] | None:
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)", platform)
    return (int(match.group(1)), int(match.group(2))) if match else LEGACY_MANYLINUX.get(platform)


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
                        f"CUDA {version} (torch {fact.minor}'s +cu"
                        f'{version.replace(".", "")} build) has no [cuda."{version}"] entry',
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
    listed_floor = _floor_of(release.wheel_platform)
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


def _label(kind: str, version: str) -> str:
    return (
        "cpu"
        if kind == "cpu"
        else f"cu{version.replace('.', '')}"
        if kind == "cuda"
        else f"rocm{version}"
    )


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
    builds = [_label("cuda", v) for v in fact.cuda] + [_label("rocm", v) for v in fact.rocm]
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
    cuda_build = CUDA_LABEL.fullmatch(pypi_default)
    default_cuda = f"{cuda_build.group(1)}.{cuda_build.group(2)}" if cuda_build else None
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
