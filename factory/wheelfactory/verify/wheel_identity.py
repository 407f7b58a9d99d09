"""Is a built wheel what the manifest says it is? One pure check for every command that publishes.

``index``, ``export`` (publish/) and ``merge`` (ci/) list a wheel under a manifest entry's variant
id; the manifest is a file anyone can edit. Before a wheel is listed, its own facts must name that
entry: a torch 2.13 wheel moved to a torch 2.14 id would otherwise be served to torch 2.14 users.

What is checked against the variant (``VariantId``) and the entry's torch release and toolkit:

- the file name: its platform tags end with the variant's arch, its python/abi tags fit the
  variant's python (abi3: ``cp3X-abi3``; "3.11": ``cp311-cp311``);
- the version's local label ends with the variant's (``VariantId.local_label``; a VCS version
  may come before it: ``0.3.2.dev2+gb4153aeb6.cputorch2.13``);
- each package's build record (``<package>/_build.json``, ``read_build_record``: at most
  1 MiB, each field it holds checked by the runtime's own rule), where the wheel has one: the
  fields it holds name the same variant id, torch major.minor, backend, toolkit, C++ ABI, python
  and arch;
- every shared library in it is an ELF for the variant's machine (its e_machine: AArch64 for an
  aarch64 variant), not only named for it;
- RECORD (PEP 376/427): every member is listed with its sha256 and size and matches them, and no
  member is unlisted (RECORD itself and its signatures excepted). Members are hashed in chunks:
  memory stays bounded whatever the wheel holds.

``wheel_identity_problems`` returns the problems found (empty: the wheel is what the entry says),
each one line; it raises nothing for a damaged zip (that is a problem too).
"""

from __future__ import annotations

import base64
import csv
import io
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from wheelfactory._runtime._errors import RecordError
from wheelfactory._runtime._record import load_record_json, partial_record, record_member
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.images.emulation import ELF_MACHINE
from wheelfactory.plan.identity import VariantId
from wheelfactory.support.digests import stream_sha256

RECORD_LIMIT = 64 << 20  # a RECORD lists a few thousand files at most: larger is not a wheel's
BUILD_RECORD_LIMIT = 1 << 20
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
# What reading a damaged or hostile zip can raise (bad headers, bad deflate data, an unsupported
# compression or encryption, a member that claims more bytes than it has): every reader of wheels.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    OSError,
)


def wheel_identity_problems(
    wheel: Path, variant: VariantId, torch_version: str | None, toolkit: str | None
) -> list[str]:
    """Every way ``wheel`` (a file) is not a wheel of ``variant`` built against ``torch_version``
    ("2.13.0") with ``toolkit`` ("13.0"; None for cpu), one line each; [] when it is."""
    problems = _name_problems(wheel.name, variant)
    try:
        with zipfile.ZipFile(wheel) as archive:
            problems += _build_record_problems(archive, variant, torch_version, toolkit)
            problems += elf_machine_problems(
                {
                    name: _head(archive, name)
                    for name in archive.namelist()
                    if is_shared_library(name)
                },
                variant.arch,
            )
            problems += record_problems(archive)
    except ZIP_ERRORS as exc:
        problems.append(
            f"is not a readable wheel ({' '.join(str(exc).split()) or type(exc).__name__})"
        )
    return problems


ELF_HEADER_BYTES = 20  # e_ident (16), e_type (2), e_machine (2)


def _head(archive: zipfile.ZipFile, name: str) -> bytes:
    with archive.open(name) as member:
        return member.read(ELF_HEADER_BYTES)


_MACHINE_NAMES = {number: arch for arch, number in ELF_MACHINE.items()}


def elf_machine_problems(libraries: Mapping[str, bytes], arch: str) -> list[str]:
    """The shared libraries (member -> its bytes, or at least their first 20) that are not 64-bit
    little-endian ELF files for ``arch``'s machine: a wheel named for one arch holding another's
    code installs everywhere it is named for and fails at import."""
    want = ELF_MACHINE.get(arch)
    problems = []
    for name, head in sorted(libraries.items()):
        if len(head) < ELF_HEADER_BYTES or head[:4] != b"\x7fELF":
            problems.append(f"{name} is named as a shared library and is not an ELF file")
            continue
        machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
        if head[4] != 2 or head[5] != 1 or machine != want:
            found = _MACHINE_NAMES.get(machine, f"machine {machine:#x}")
            bits = {1: " (32-bit)", 2: ""}.get(head[4], "")
            problems.append(f"{name} is an ELF file for {found}{bits}, not for {arch}")
    return problems


def _name_problems(filename: str, variant: VariantId) -> list[str]:
    try:
        _, version, _, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion) as exc:
        return [f"{filename} is not a wheel's file name ({' '.join(str(exc).split())})"]
    problems = []
    label = variant.local_label
    local = version.local or ""
    if local != label and not local.endswith("." + label):
        problems.append(
            f"local version label {local or '(none)'!r} does not end with {label!r}, "
            f"the label of {variant}"
        )
    platforms = sorted({tag.platform for tag in tags})
    if not all(platform.endswith("_" + variant.arch) for platform in platforms):
        problems.append(f"platform tag {'.'.join(platforms)} is not one for {variant.arch}")
    abis = sorted({tag.abi for tag in tags})
    interpreters = sorted({tag.interpreter for tag in tags})
    if variant.python == "abi3":
        fits = abis == ["abi3"] and all(i.startswith("cp3") for i in interpreters)
        wanted = "cp3X-abi3"
    else:
        cp = "cp" + variant.python.replace(".", "")
        fits = interpreters == [cp] and abis == [cp]
        wanted = f"{cp}-{cp}"
    if not fits:
        problems.append(
            f"python tag {'.'.join(interpreters)}-{'.'.join(abis)} is not {wanted}, "
            f"what python {variant.python} builds carry"
        )
    return problems


def is_shared_library(member: str) -> bool:
    """A wheel member named as a shared library: ``_C.abi3.so``, ``libfoo-1a2b3c.so.1``."""
    name = member.rsplit("/", 1)[-1]
    return name.endswith(".so") or ".so." in name


def _packages(archive: zipfile.ZipFile) -> list[str]:
    tops = {name.split("/", 1)[0] for name in archive.namelist() if "/" in name}
    return sorted(t for t in tops if not t.endswith((".dist-info", ".data")))


def read_build_record(archive: zipfile.ZipFile, package: str) -> dict[str, object] | None:
    """The build record of the wheel's top-level package ``package`` (None: it has none), read by
    the runtime's reader: at most ``BUILD_RECORD_LIMIT`` bytes, each field it holds as the runtime's
    full rule takes it (a partial record too: ``partial_record``). RecordError naming the member
    otherwise; what ``ZIP_ERRORS`` lists when the archive is damaged."""
    member = record_member(package)
    try:
        size = archive.getinfo(member).file_size  # reading stops there too: zipfile holds to it
    except KeyError:
        return None
    if size > BUILD_RECORD_LIMIT:
        raise RecordError(f"{member} is larger than {BUILD_RECORD_LIMIT >> 20} MiB")
    return partial_record(load_record_json(archive.read(member), member), member)


def _build_record_problems(
    archive: zipfile.ZipFile, variant: VariantId, torch_version: str | None, toolkit: str | None
) -> list[str]:
    problems: list[str] = []
    for package in _packages(archive):
        try:
            record = read_build_record(archive, package)
        except RecordError as exc:
            problems.append(str(exc))
            continue
        if record is not None:
            problems += [
                f"{record_member(package)}: {problem}"
                for problem in record_field_problems(record, variant, torch_version, toolkit)
            ]
    return problems


def record_field_problems(
    record: dict[str, object], variant: VariantId, torch_version: str | None, toolkit: str | None
) -> list[str]:
    """The fields a build record holds that name another variant than ``variant`` (a partial
    record is checked for the fields it has)."""
    expected: dict[str, object] = {"variant": str(variant), **variant.axes()}
    problems = []
    for key, want in expected.items():
        if key in record and record[key] != want:
            problems.append(f"{key} is {record[key]!r}, the manifest entry's is {want!r}")
    if "toolkit" in record and variant.backend.kind != "cpu":
        want_toolkit = _minor(toolkit or variant.backend.version)
        if want_toolkit is None or _minor(record["toolkit"]) != want_toolkit:
            problems.append(
                f"toolkit is {record['toolkit']!r}, the manifest entry's is {str(want_toolkit)!r}"
            )
    built_with = record.get("built_with_torch")
    if isinstance(built_with, str) and torch_version and not variant.stable_abi:
        built = _minor(built_with)
        if built is None or built != _minor(torch_version):
            problems.append(
                f"built_with_torch is {built_with!r}, "
                f"the manifest entry's torch is {torch_version!r}"
            )
    return problems


def _minor(version: object) -> MajorMinor | None:
    """The major.minor of a version as the runtime reads it; None for what it cannot read."""
    try:
        return MajorMinor.parse(version) if isinstance(version, str) else None
    except ValueError:
        return None


def record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def record_problems(archive: zipfile.ZipFile) -> list[str]:
    """RECORD against the members: each listed with a matching sha256 and size, none unlisted."""
    records = [
        n for n in archive.namelist() if n.endswith(".dist-info/RECORD") and n.count("/") == 1
    ]
    if len(records) != 1:
        return [f"has {len(records)} .dist-info/RECORD files (a wheel has one)"]
    record = records[0]
    info_dir = record[: -len("RECORD")]
    exempt = {record} | {info_dir + name for name in SIGNATURES}
    if archive.getinfo(record).file_size > RECORD_LIMIT:
        return [f"{record} is larger than {RECORD_LIMIT >> 20} MiB"]
    listed: dict[str, tuple[str, str]] = {}
    try:
        rows = list(csv.reader(io.StringIO(archive.read(record).decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        return [f"{record} is not a CSV file ({exc})"]
    for row in rows:
        if not row:
            continue
        if len(row) != 3:
            return [f"{record}: a line with {len(row)} fields (expected path,hash,size)"]
        listed[row[0]] = (row[1], row[2])
    problems = []
    for info in archive.infolist():
        name = info.filename
        if name.endswith("/") or name in exempt:
            continue
        if name not in listed:
            problems.append(f"{name} is not in {record}")
            continue
        hash_, size = listed.pop(name)
        if not hash_.startswith("sha256="):
            problems.append(f"{record} gives {name} no sha256")
            continue
        with archive.open(info) as member:
            digest = stream_sha256(member)
        if record_hash(digest) != hash_ or size != str(info.file_size):
            problems.append(f"{name} does not match its {record} line (sha256 or size)")
    missing = sorted(name for name in listed if name not in exempt)
    if missing:
        problems.append(
            f"{record} lists {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}, "
            "which the wheel does not hold"
        )
    return problems
