"""``wheelfactory export --hf-layout DIR``: the Hugging Face kernels layout, from the built wheels.

    DIR/build/<variant id>/metadata.json          what the `kernels` loader validates
    DIR/build/<variant id>/<package>/__init__.py  the wheel's package, unpacked (with _C, record, runtime)

``kernels.get_local_kernel(DIR)`` picks the variant of the running torch by the same names our
variant ids use, and imports ``<package>/__init__.py`` under the metadata's ``id``: we use the
build's op namespace (``_mykernels_cpu_1a2b3c4d``), unique per variant as that loader needs. Only
cp39-abi3 wheels are exported: the layout has no place for a per-CPython build. Each variant
directory is written under a temp name and renamed into place: a loader finds the old directory
or the new one (for an instant, none), never half of one.

The Hub accepts only libraries that pass its checker, kernel-abi-check (publish/abi_conformance.py:
manylinux_2_28 and Python 3.9 abi3). Every ``*.so`` of a variant is checked in the temp directory,
before anything is renamed: a variant that fails is refused (with the checker's findings) and an
earlier export of it in DIR stays as it was. ``abi_check=False`` exports them anyway, for local use.

A wheel is outside input: one with a member name that would land outside its variant's directory
(``..``, an absolute name; support/paths.py) stops the export with a ConfigError (exit 2) before
any of its files is written, and its temp directory is removed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.project.keys import file_digest
from wheelfactory.project.noarch import KERNEL_BUILDER_NAMES
from wheelfactory.publish.abi_conformance import check_package, require_checker
from wheelfactory.publish.collect import REBUILD, IndexedWheel, build_record, collect
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import declared_kernel_depends, git_states, provenance_path
from wheelfactory.runner.refusals import LeftOut, is_pure_python
from wheelfactory.support import atomic, paths
from wheelfactory.support.paths import StrPath, safe_member
from wheelfactory.verify.wheel_identity import ZIP_ERRORS

BUILD_DIR = "build"
ABI_REFUSAL = "fails kernel-abi-check: "  # how a refusal for the Hub's ABI rules begins
METADATA = "metadata.json"


@dataclass(frozen=True)
class Exported:
    variant_id: str
    path: Path


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote (``exported``) and left out: ``skipped``, what the layout has no place
    for or was not built; ``refused``, a variant whose libraries fail the Hub's ABI check (the
    reason names each failing library and the checker's findings) or whose wheel is not what the
    manifest says it is (publish/collect.py ``collect``)."""

    exported: tuple[Exported, ...]
    skipped: tuple[LeftOut, ...]
    refused: tuple[LeftOut, ...]
    unattested: tuple[str, ...] = ()  # exported without a provenance record (--allow-unattested)
    manifest: Path | None = None  # the manifest exported from (``export_hf``)

    @property
    def refused_by_abi_check(self) -> bool:
        """Every refusal (there is one) is kernel-abi-check's: a base to change, not a build."""
        abi = [left for left in self.refused if left.reason.startswith(ABI_REFUSAL)]
        return bool(abi) and len(abi) == len(self.refused)


def metadata_for(
    wheel: IndexedWheel,
    record: dict[str, object] | None,
    license_: str,
    python_depends: list[str] | None = None,
) -> dict[str, object]:
    namespace = (
        str(record["namespace"])
        if record and record.get("namespace")
        else f"_{wheel.project.replace('-', '_')}_{wheel.variant.backend.kind}_{wheel.sha256[:8]}"
    )
    backend: dict[str, object] = {"type": wheel.variant.backend.kind}
    listed = (record or {}).get("arch_list")
    archs = [str(a) for a in listed] if isinstance(listed, list) else []
    if archs:
        backend["archs"] = archs
    return {
        "id": namespace,
        "name": wheel.project.replace("_", "-"),
        "version": Version(wheel.version).major,  # the loader's "version" is the API major
        "license": license_,
        "python-depends": list(python_depends or []),
        "backend": backend,
    }


def variant_digest(directory: Path) -> dict[str, object]:
    """metadata.json's ``digest``: each file of a variant directory by its path there, with the
    base64 of its sha256, as `kernels` hashes a variant to check it (``Digest.hash_variant``:
    metadata.json, its signature and bytecode caches left out)."""
    files = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        skipped = (
            relative.as_posix() in (METADATA, METADATA + ".sigstore")
            or "__pycache__" in relative.parts
        )
        if path.is_dir() or skipped:
            continue
        files[relative.as_posix()] = base64.b64encode(file_digest(path)).decode()
    return {"algorithm": "sha256", "files": files}


def hub_provenance(record: Path | None) -> dict[str, object] | None:
    """metadata.json's ``provenance`` from the wheel's provenance record (None without one): the
    kernel checkout's commit and dirty flag, and the builder's version (and commit, from a
    checkout). The Hub's schema names its builder's entry ``kernel-builder``; wheelfactory fills it
    with its own and says so in ``builder`` (readers ignore keys they do not know)."""
    if record is None:
        return None
    try:
        document = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    source, factory = git_states(document)
    run_details = (
        document.get("predicate", {}).get("runDetails", {}) if isinstance(document, dict) else {}
    )
    versions = (
        run_details.get("builder", {}).get("version", {}) if isinstance(run_details, dict) else {}
    )
    version = versions.get("wheelfactory") if isinstance(versions, dict) else None
    if not isinstance(version, str):  # not a record wheelfactory wrote
        return None
    builder: dict[str, object] = {"version": version}
    if factory is not None:
        builder.update(commit=factory.commit, dirty=factory.dirty)
    provenance: dict[str, object] = {"builder": "wheelfactory", "kernel-builder": builder}
    if source is not None:
        provenance["kernel"] = {"commit": source.commit, "dirty": source.dirty}
    return provenance


def _with_digest_and_provenance(
    metadata: Mapping[str, object], directory: Path, record: Path | None
) -> dict[str, object]:
    """``metadata`` with the variant directory's digest and, from the wheel's provenance record,
    its provenance and the Hub kernels the project declared it needs (``kernel-depends``)."""
    provenance = hub_provenance(record)
    depends = _recorded_kernel_depends(record) if "kernel-depends" not in metadata else []
    return {
        **metadata,
        **({"kernel-depends": depends} if depends else {}),
        "digest": variant_digest(directory),
        **({"provenance": provenance} if provenance else {}),
    }


def _recorded_kernel_depends(record: Path | None) -> list[object]:
    if record is None:
        return []
    try:
        return declared_kernel_depends(json.loads(record.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []


def _package_files(archive: zipfile.ZipFile, wheel: Path) -> tuple[str, list[str]]:
    """(top-level package, its members): the wheel's one importable package, not its .dist-info.
    A wheel with a member name that would leave the directory it is unpacked into is refused
    (ConfigError) before anything of it is written."""

    def bad(message: str, hint: str = REBUILD) -> ConfigError:
        return ConfigError(message, file=str(wheel), hint=hint)

    unsafe = [name for name in archive.namelist() if safe_member(name) is None]
    if unsafe:
        raise bad(
            f"member {unsafe[0]!r} is not a path inside the wheel",
            "a wheel wheelfactory built has none; rebuild it with `wheelfactory build`",
        )
    tops = {PurePosixPath(n).parts[0] for n in archive.namelist() if "/" in n}
    packages = sorted(t for t in tops if not t.endswith((".dist-info", ".data")))
    if len(packages) != 1:
        raise bad(f"expected one package in the wheel, found {packages or 'none'}")
    members = [
        n for n in archive.namelist() if n.startswith(packages[0] + "/") and not n.endswith("/")
    ]
    if not members:
        raise bad(f"package {packages[0]!r} has no files")
    return packages[0], members


def _metadata_headers(archive: zipfile.ZipFile) -> Message | None:
    name = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
    if name is None:
        return None
    return HeaderParser().parsestr(archive.read(name).decode("utf-8", errors="replace"))


def _license(headers: Message | None) -> str:
    if headers is None:
        return "unknown"
    return headers.get("License-Expression") or headers.get("License") or "unknown"


def python_depends(headers: Message | None) -> list[str]:
    """The names of the wheel's ``Requires-Dist`` other than torch, in order, without duplicates
    (the kernels loader's ``python-depends`` is a list of names). Requirements only an extra pulls
    in are not dependencies of the kernel; a line that is not a requirement is left out."""
    names: dict[str, str] = {}
    for line in (headers.get_all("Requires-Dist") or []) if headers is not None else []:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        key = canonicalize_name(requirement.name)
        if key != "torch":  # the loader knows some distributions by kernel-builder's name
            names.setdefault(key, KERNEL_BUILDER_NAMES.get(key, requirement.name))
    return list(names.values())


def _unpack(wheel: IndexedWheel, temp: Path) -> tuple[str, dict[str, object]]:
    """Write the wheel's package under ``temp``; its name and the variant's metadata.json."""
    try:
        with zipfile.ZipFile(wheel.local_file) as archive:
            package, members = _package_files(archive, wheel.local_file)
            for member in members:
                path = paths.inside(temp, member, what="the member", file=str(wheel.source))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(member))
                mode = (archive.getinfo(member).external_attr >> 16) & 0o777
                if mode:
                    path.chmod(mode)
            record = build_record(archive, package, wheel.local_file)
            headers = _metadata_headers(archive)
    except ZIP_ERRORS as exc:
        raise ConfigError(
            f"is not a readable wheel ({' '.join(str(exc).split())})",
            file=str(wheel.source),
            hint=REBUILD,
        ) from None
    return package, metadata_for(wheel, record, _license(headers), python_depends(headers))


def export_hf_layout(
    wheels: list[IndexedWheel], dest: Path, *, abi_check: bool = True
) -> ExportResult:
    """Write each cp39-abi3 wheel's variant under ``dest/build/``; see the module docstring.
    Raises PublishError (before writing anything) when ``abi_check`` and kernel-abi-check is missing."""
    if abi_check:
        require_checker()
    exported: list[Exported] = []
    skipped: list[LeftOut] = []
    refused: list[LeftOut] = []
    build = dest / BUILD_DIR
    build.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        if wheel.variant.python != "abi3":
            skipped.append(
                LeftOut(
                    wheel.variant_id,
                    "a per-CPython build: the Hugging Face layout holds cp39-abi3 builds only",
                )
            )
            continue
        if wheel.variant.gpu:
            # `kernels` loads build/<torch>-<abi>-<backend>-<arch>-<os>/ and knows no GPU part; no
            # part holds the other archs' code (verify/fatbin.py), so none can stand for the whole
            whole = str(wheel.variant).replace(f"-{wheel.variant.gpu}-", "-")
            skipped.append(
                LeftOut(
                    wheel.variant_id,
                    f"a part of a build split by GPU architecture: the Hugging Face "
                    f"layout has one directory per build ({whole}) holding every "
                    "arch; build it whole for the Hub ([cuda] split_archs = false)",
                )
            )
            continue
        target = build / wheel.variant_id
        # A fresh directory per variant, renamed into place whole: its files are written plainly.
        temp = build / f".{wheel.variant_id}.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        try:
            package, metadata = _unpack(wheel, temp)
            findings = check_package(temp, package) if abi_check else []
            if not findings:
                metadata = _with_digest_and_provenance(metadata, temp, wheel.provenance)
                (temp / METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        if findings:  # nothing of it reaches DEST: an earlier export of the variant stays as it was
            shutil.rmtree(temp, ignore_errors=True)
            findings_text = " | ".join(str(finding) for finding in findings)
            refused.append(LeftOut(wheel.variant_id, ABI_REFUSAL + findings_text, refused=True))
            continue
        atomic.swap_directory(temp, target)
        exported.append(Exported(wheel.variant_id, target))
    return ExportResult(tuple(exported), tuple(skipped), tuple(refused))


# A pure-Python build's variant id is its layout directory: torch-cpu, torch-universal.
PURE_PYTHON_VARIANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def export_dist(
    dist: Path,
    entries: Mapping[str, manifest.Entry],
    dest: Path,
    *,
    abi_check: bool = True,
    allow_unattested: bool = False,
) -> ExportResult:
    """Every exportable variant of ``dist``'s manifest under ``dest/build/``: the pure-Python builds
    (entries with ``hub_metadata``) as ``wheelfactory build`` made them, the compiled ones through
    collect's checks and ``export_hf_layout`` (kernel-abi-check only where something is compiled).
    A wheel collect refuses (not what its entry says it is, no provenance record unless
    ``allow_unattested``) is in ``refused``, as one that fails kernel-abi-check."""
    compiled = {vid: entry for vid, entry in entries.items() if not is_pure_python(entry)}
    if compiled and abi_check:
        require_checker()  # before anything is written
    exported, skipped = export_pure_python(
        dist, {vid: entry for vid, entry in entries.items() if is_pure_python(entry)}, dest
    )
    if not compiled:
        return ExportResult(exported, skipped, ())
    wheels, not_collected = collect(dist, compiled, allow_unattested=allow_unattested)
    result = export_hf_layout(wheels, dest, abi_check=abi_check)
    refused = tuple(s for s in not_collected if s.refused)
    done = {item.variant_id for item in result.exported}
    return ExportResult(
        exported + result.exported,
        skipped + tuple(s for s in not_collected if not s.refused) + result.skipped,
        refused + result.refused,
        tuple(w.variant_id for w in wheels if w.provenance is None and w.variant_id in done),
    )


def export_pure_python(
    dist: Path, entries: Mapping[str, manifest.Entry], dest: Path
) -> tuple[tuple[Exported, ...], tuple[LeftOut, ...]]:
    """A noarch kernel's wheels (the manifest's entries with ``hub_metadata``) as
    ``dest/build/torch-<backend>/``: the package unpacked from the wheel ``wheelfactory build``
    made, beside the metadata recorded with it. Pure Python: nothing for kernel-abi-check. Every
    entry is checked before anything is written: a variant id that is not one directory name, a
    wheel outside ``dist`` or one whose sha256 changed is a ConfigError naming the manifest."""
    from wheelfactory.project.keys import file_sha256
    from wheelfactory.project.noarch import unpack_package

    listed = str(dist / manifest.MANIFEST)
    built: list[tuple[str, Path, dict[str, object]]] = []
    skipped: list[LeftOut] = []
    for vid, entry in sorted(entries.items()):
        if not PURE_PYTHON_VARIANT.fullmatch(vid):
            raise ConfigError(
                f"variant {vid!r} is not a layout directory name (e.g. torch-cpu)",
                file=listed,
                hint="rebuild with `wheelfactory build`",
            )
        if entry.status not in ("built", "cached") or not entry.wheel or not entry.sha256:
            error = f": {entry.error}" if entry.error else ""
            skipped.append(LeftOut(vid, f"status {entry.status}{error}"))
            continue
        wheel = paths.inside(dist, entry.wheel, what="the wheel", file=listed)
        if not wheel.is_file() or file_sha256(wheel) != entry.sha256:
            raise ConfigError(
                f"{entry.wheel} is missing or does not match its sha256",
                file=listed,
                hint="rebuild with `wheelfactory build`",
            )
        built.append((vid, wheel, entry.hub_metadata or {}))
    exported = []
    build = dest / BUILD_DIR
    for vid, wheel, metadata in built:
        build.mkdir(parents=True, exist_ok=True)
        target = build / vid
        temp = build / f".{vid}.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        try:
            with zipfile.ZipFile(wheel) as archive:
                package, _ = _package_files(archive, wheel)
            unpack_package(wheel, package, temp)
            record = provenance_path(wheel)
            metadata = _with_digest_and_provenance(
                metadata, temp, record if record.is_file() else None
            )
            (temp / METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        atomic.swap_directory(temp, target)
        exported.append(Exported(vid, target))
    return tuple(exported), tuple(skipped)


def export_hf(
    out: StrPath, dest: StrPath, *, abi_check: bool = True, allow_unattested: bool = False
) -> ExportResult:
    """``wheelfactory export --hf-layout DEST``: ``export_dist`` of ``out``'s manifest under the
    output directory's lock. UsageError when the manifest lists nothing."""
    shown = Path(out)
    dist = shown.resolve()
    entries = manifest.read_listed(dist, shown=shown)
    with manifest.locked(dist):
        result = export_dist(
            dist,
            entries,
            Path(dest).resolve(),
            abi_check=abi_check,
            allow_unattested=allow_unattested,
        )
    return replace(result, manifest=dist / manifest.MANIFEST)
