"""Which wheels of a dist the index (and ``export``, ``publish``) may list, and which it refuses.

``collect`` reads dist/manifest.json's entries: a built or cached entry whose wheel is present,
has the manifest's sha256 and is what the entry says it is (runner/refusals.py) becomes an
``IndexedWheel``; any other is left out (``LeftOut``), refused where a check failed. The wheels a
publish target already holds come from its listing (publish/listing.py), as IndexedWheel too.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from wheelfactory._runtime._errors import RecordError
from wheelfactory.errors import ConfigError, IndexBuildError
from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.project.keys import file_sha256
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import provenance_path
from wheelfactory.runner.refusals import LeftOut, is_pure_python, wheel_refusal
from wheelfactory.support import paths
from wheelfactory.verify.wheel_identity import ZIP_ERRORS, read_build_record

# A torch release as the manifest records it (PEP 440, normalized; a local label allowed): it
# becomes part of a page's file name, so nothing else (no '/', no '..') may pass.
TORCH_VERSION = re.compile(
    r"[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
    r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?"
)
TOOLKIT_VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)*")  # CUDA 13.0, ROCm 6.4
REBUILD = "rebuild it with `wheelfactory build`"


@dataclass(frozen=True)
class IndexedWheel:
    """One release of a variant's wheel, as the index lists it."""

    variant: VariantId
    project: str  # canonical name, "mykernels"
    version: str  # "0.1.0+cputorch2.13"
    filename: str
    sha256: str
    # dist/<variant>/<wheel>; None: already on the publish target (wheels_from_listing)
    source: Path | None
    torch_version: str  # "2.13.0" (or "2.13" where the manifest did not say)
    toolkit: str | None
    requires_python: str | None
    provenance: Path | None = None  # dist/<variant>/<wheel>.intoto.json (runner/provenance.py)
    # sha256 of the wheel's .dist-info/METADATA as stored in the zip (PEP 658); None: not offered
    # (the variant-labelled copies).
    core_metadata_sha256: str | None = field(kw_only=True)
    size: int = field(kw_only=True)  # the wheel's bytes (PEP 700)
    # Those METADATA bytes, to publish as <wheel>.metadata; None for a wheel already on the target.
    core_metadata: bytes | None = field(default=None, kw_only=True, repr=False)
    # the target lists <wheel>.intoto.json
    provenance_listed: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        # A page must never advertise a .metadata file whose bytes the plan does not carry or the
        # target does not hold, nor a hash that is not of those bytes.
        if (
            self.core_metadata is not None
            and hashlib.sha256(self.core_metadata).hexdigest() != self.core_metadata_sha256
        ):
            raise ValueError(f"{self.filename}: core_metadata does not match core_metadata_sha256")
        if (
            self.source is not None
            and self.core_metadata_sha256 is not None
            and self.core_metadata is None
        ):
            raise ValueError(
                f"{self.filename}: a local wheel offering core metadata must carry its bytes"
            )

    @property
    def has_provenance(self) -> bool:
        """A provenance record is published beside the wheel (made here, or already on the target)."""
        return self.provenance is not None or self.provenance_listed

    @property
    def local_file(self) -> Path:
        """``source``, for the steps that read the wheel itself (variant metadata, the HF layout);
        IndexBuildError for a wheel listed from a target, which is not here to read."""
        if self.source is None:
            raise IndexBuildError(
                f"{self.path} is listed by the target, not in this dist: it cannot be read here"
            )
        return self.source

    @property
    def public_version(self) -> str:
        return Version(self.version).public

    @property
    def variant_id(self) -> str:
        return str(self.variant)

    @property
    def simple(self) -> str:
        return f"{self.variant_id}/simple"

    @property
    def path(self) -> str:
        """Where the wheel lies in the generation (its URL path)."""
        return f"{self.simple}/{self.project}/{self.filename}"

    @property
    def findlinks_page(self) -> str:
        """PyG's naming, torch-2.4.0+cu121.html; the pre-cxx11 ABI gets its own page because
        wheel tags cannot tell the two ABIs apart (pip would pick either)."""
        backend = self.variant.backend.tag
        head = (
            f"torch-stable-abi{self.variant.torch}"
            if self.variant.stable_abi
            else f"torch-{self.torch_version}"
        )
        return f"whl/{head}+{backend}{'' if self.variant.cxx11_abi else '-cxx98'}.html"


def collect(
    dist: Path, entries: Mapping[str, manifest.Entry], *, allow_unattested: bool = False
) -> tuple[list[IndexedWheel], list[LeftOut]]:
    """The wheels the index may list: built or cached, present, with the manifest's sha256, and
    what the entry says they are (verify/wheel_identity.py: file name tags, local label, build
    record, RECORD) with a provenance record of these bytes for this variant. An entry that was not
    built is left out; one that fails a check is refused (``LeftOut.refused``): the caller
    publishes the rest and then fails. ``allow_unattested`` lists a wheel that has no provenance
    record (an older wheelfactory's build); one whose record names other bytes or another variant
    is refused all the same. A listed wheel outside ``dist`` or a torch_version that is not a torch
    release is a ConfigError naming the manifest (support/paths.py): nothing is published from
    such a manifest."""
    wheels: list[IndexedWheel] = []
    left_out: list[LeftOut] = []
    for vid, entry in sorted(entries.items()):
        if is_pure_python(entry):
            left_out.append(
                LeftOut(
                    vid,
                    "a pure-Python (noarch) build: `wheelfactory export --hf-layout` lays it out",
                )
            )
            continue
        try:
            key = VariantId.parse(vid)
        except InvalidVariantId as exc:
            left_out.append(LeftOut(vid, str(exc), refused=True))
            continue
        if entry.status not in ("built", "cached") or not entry.wheel or not entry.sha256:
            error = f": {entry.error}" if entry.error else ""
            left_out.append(LeftOut(vid, f"status {entry.status}{error}"))
            continue
        listed = str(dist / manifest.MANIFEST)
        source = paths.inside(dist, entry.wheel, what=f"{vid} names the wheel", file=listed)
        torch_version = entry.torch_version or key.torch
        # It names a find-links page (whl/torch-<it>+cpu.html): a torch release and nothing else.
        if not isinstance(torch_version, str) or not TORCH_VERSION.fullmatch(torch_version):
            raise ConfigError(
                f"{vid}: torch_version {torch_version!r} is not a torch release (e.g. 2.13.0)",
                file=listed,
                hint=REBUILD,
            )
        # Published in index.json, where select.py reads it as a toolkit release.
        if entry.toolkit is not None and not TOOLKIT_VERSION.fullmatch(entry.toolkit):
            raise ConfigError(
                f"{vid}: toolkit {entry.toolkit!r} is not a toolkit release (e.g. 13.0)",
                file=listed,
                hint=REBUILD,
            )
        refusal = _refusal(vid, key, entry, source, allow_unattested)
        if refusal is not None:
            left_out.append(LeftOut(vid, refusal, refused=True))
            continue
        # parsed by the identity check already
        name, version, _, _ = parse_wheel_filename(source.name)
        try:
            metadata = core_metadata(source)
        except ConfigError as exc:
            left_out.append(LeftOut(vid, f"{entry.wheel}: {exc.detail}", refused=True))
            continue
        provenance = provenance_path(source)
        wheels.append(
            IndexedWheel(
                key,
                canonicalize_name(name),
                str(version),
                source.name,
                entry.sha256,
                source,
                torch_version,
                entry.toolkit,
                requires_python(metadata),
                provenance if provenance.is_file() else None,
                core_metadata_sha256=hashlib.sha256(metadata).hexdigest(),
                size=source.stat().st_size,
                core_metadata=metadata,
            )
        )
    return wheels, left_out


def _refusal(
    vid: str, key: VariantId, entry: manifest.Entry, source: Path, allow_unattested: bool
) -> str | None:
    """Why the wheel ``entry`` names may not be listed under ``vid`` (one line); None: it may."""
    if not source.is_file():
        return f"{entry.wheel} is missing"
    if file_sha256(source) != entry.sha256:
        return f"{entry.wheel} does not match the manifest's sha256 (rebuild it)"
    return wheel_refusal(source, vid, key, entry, allow_unattested=allow_unattested, verb="list")


def one_line(exc: BaseException) -> str:
    """An error's message as one line (its type's name where it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def build_record(archive: zipfile.ZipFile, package: str, wheel: Path) -> dict[str, object] | None:
    """The build record of the wheel's package ``package`` (None: it has none), as
    verify/wheel_identity.py reads it (capped); ConfigError naming the wheel otherwise. Raises
    what ZIP_ERRORS lists when the archive is damaged."""
    try:
        return read_build_record(archive, package)
    except RecordError as exc:
        raise ConfigError(str(exc), file=str(wheel), hint=REBUILD) from None


def core_metadata(wheel: Path) -> bytes:
    """The wheel's ``<name>-<version>.dist-info/METADATA``, byte for byte as stored (PEP 658 serves
    exactly these), after checking that it is a zip whose build records can be read: ConfigError
    naming the wheel otherwise."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            found = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise ConfigError(
                    f"has {len(found)} top-level .dist-info/METADATA files, not one: not a wheel",
                    file=str(wheel),
                )
            metadata = archive.read(found[0])
            tops = {n.split("/", 1)[0] for n in names if "/" in n}
            for top in sorted(tops):
                build_record(archive, top, wheel)
    except ZIP_ERRORS as exc:
        raise ConfigError(f"is not a readable wheel ({one_line(exc)})", file=str(wheel)) from None
    return metadata


def requires_python(metadata: bytes) -> str | None:
    """The Requires-Python of METADATA's bytes."""
    requires = (
        HeaderParser().parsestr(metadata.decode("utf-8", errors="replace")).get("Requires-Python")
    )
    return requires if isinstance(requires, str) else None
