"""Package indexes over the output directory, from dist/manifest.json.

``plan_index`` is pure given the wheels: it decides every page and every file. ``write_index``
publishes a plan as one *generation*: a directory under ``dist/.index/`` holding the pages and
hard links to the wheels, which then becomes ``dist/index`` by an atomic symlink swap. A reader
(pip, a browser, ``wheelfactory serve``) sees the old index or the new one, never a mix; a page
never links a wheel that is not in its own generation (a rebuild that replaces
``dist/<variant>/<wheel>`` leaves the indexed inode alone); the previous generation is kept so
that a download started from it completes.

A plan may list several releases of a variant: the wheels ``collect`` found in this dist, plus
the ones a publish target already holds, read back from its index.json by ``wheels_from_listing``
(``source`` None: the pages list them, the plan carries no file for them). Every page is made from
the whole list, so an earlier release stays listed.

Layout of a generation (URLs are relative to what ``wheelfactory serve`` serves)::

    index.html                              every wheel, with its pip commands
    index.json                              the same for programs (``wheelfactory which``): one entry per wheel
    <variant>/simple/index.html             PEP 503 root: the project(s)
    <variant>/simple/index.json             the same as PEP 691 JSON (api-version 1.1)
    <variant>/simple/<project>/index.html   PEP 503 page: every release's wheel, oldest first, with
                                            #sha256=, data-requires-python and PEP 658/714 data-core-metadata
    <variant>/simple/<project>/index.json   the same as PEP 691 JSON: versions, files with size,
                                            core-metadata hashes and the provenance record (_provenance)
    <variant>/simple/<project>/<wheel>      the wheel
    <variant>/simple/<project>/<wheel>.metadata      its .dist-info/METADATA, byte for byte (PEP 658)
    <variant>/simple/<project>/<wheel>.intoto.json   its provenance record, where the build wrote one
    <variant>/requirements.txt              name==version --hash=sha256:... of the newest release (pip --require-hashes)
    <variant>/requirements-<version>.txt    the same for each release (its public version, e.g. 0.1.0)
    whl/torch-<torch>+<backend>[-cxx98].html   find-links pages (PyG / mmcv style)
    variants/...                            wheel-variant metadata (factory/wheelfactory/publish/variant_metadata.py)

Links are relative and their file names percent-encoded (``+`` is ``%2B``): a static host that
reads S3-style keys takes a raw ``+`` for a space.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import time
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import quote

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory._runtime._errors import RecordError
from wheelfactory._runtime._record import load_record_json, partial_record, record_member
from wheelfactory.errors import ConfigError, IndexBuildError
from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.project.keys import file_sha256
from wheelfactory.publish.which import InvalidListing, check_listing, quoted
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import SUFFIX as PROVENANCE_SUFFIX
from wheelfactory.runner.provenance import InvalidProvenance, provenance_path, read_provenance
from wheelfactory.support import paths
from wheelfactory.support.inputs import read_input
from wheelfactory.verify.wheel_identity import wheel_identity_problems

INDEX_LINK = "index"  # dist/index: the current generation (a symlink)
GENERATIONS = ".index"  # dist/.index/<generation>/
KEEP_GENERATIONS = 2  # the current one and the one before it (downloads in flight)
DIGEST_FILE = ".content-sha256"
SCHEMA = 1
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# A torch release as the manifest records it (PEP 440, normalized; a local label allowed): it
# becomes part of a page's file name, so nothing else (no '/', no '..') may pass.
TORCH_VERSION = re.compile(
    r"[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
    r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?"
)

TOOLKIT_VERSION = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)*")  # CUDA 13.0, ROCm 6.4


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


@dataclass(frozen=True)
class Skipped:
    """An entry not listed: not built (``refused`` False), or refused: a check failed, and the
    command that publishes fails after writing the rest (PublishError, exit 7)."""

    variant_id: str
    reason: str
    refused: bool = False


@dataclass(frozen=True)
class IndexPlan:
    wheels: tuple[IndexedWheel, ...]
    skipped: tuple[Skipped, ...]
    pages: tuple[tuple[str, str], ...]  # (relative path, text)
    # (relative path, file to hard-link): only wheels with a source
    links: tuple[tuple[str, Path], ...]
    # (relative path, bytes): the <wheel>.metadata files (PEP 658)
    blobs: tuple[tuple[str, bytes], ...]
    # over pages, blobs and linked files' hashes: unchanged -> same digest
    digest: str = field(default="")
    # each link's sha256, by its path: a wheel's is the manifest's (collect checked it), the rest
    # are read once here; publishing compares them with a target's without reading the files again
    link_sha256: Mapping[str, str] = field(default_factory=dict)


UNATTESTED_FLAG = "--allow-unattested"


def collect(
    dist: Path, entries: Mapping[str, manifest.Entry], *, allow_unattested: bool = False
) -> tuple[list[IndexedWheel], list[Skipped]]:
    """The wheels the index may list: built or cached, present, with the manifest's sha256, and
    what the entry says they are (verify/wheel_identity.py: file name tags, local label, build
    record, RECORD) with a provenance record of these bytes for this variant. An entry that was not
    built is skipped; one that fails a check is refused (``Skipped.refused``): the caller publishes
    the rest and then fails. ``allow_unattested`` lists a wheel that has no provenance record
    (an older wheelfactory's build); one whose record names other bytes or another variant is
    refused all the same. A listed wheel outside ``dist`` or a torch_version that is not a torch
    release is a ConfigError naming the manifest (support/paths.py): nothing is published from
    such a manifest."""
    wheels: list[IndexedWheel] = []
    skipped: list[Skipped] = []
    for vid, entry in sorted(entries.items()):
        if entry.hub_metadata is not None:
            skipped.append(
                Skipped(
                    vid,
                    "a pure-Python (noarch) build: `wheelfactory export --hf-layout` lays it out",
                )
            )
            continue
        try:
            key = VariantId.parse(vid)
        except InvalidVariantId as exc:
            skipped.append(Skipped(vid, str(exc), refused=True))
            continue
        if entry.status not in ("built", "cached") or not entry.wheel or not entry.sha256:
            skipped.append(
                Skipped(vid, f"status {entry.status}" + (f": {entry.error}" if entry.error else ""))
            )
            continue
        listed = str(dist / manifest.MANIFEST)
        source = paths.inside(dist, entry.wheel, what=f"{vid} names the wheel", file=listed)
        torch_version = entry.torch_version or key.torch
        # It names a find-links page (whl/torch-<it>+cpu.html): a torch release and nothing else.
        if not isinstance(torch_version, str) or not TORCH_VERSION.fullmatch(torch_version):
            raise ConfigError(
                f"{vid}: torch_version {torch_version!r} is not a torch release (e.g. 2.13.0)",
                file=listed,
                hint="rebuild it with `wheelfactory build`",
            )
        # Published in index.json, where select.py reads it as a toolkit release.
        if entry.toolkit is not None and not TOOLKIT_VERSION.fullmatch(entry.toolkit):
            raise ConfigError(
                f"{vid}: toolkit {entry.toolkit!r} is not a toolkit release (e.g. 13.0)",
                file=listed,
                hint="rebuild it with `wheelfactory build`",
            )
        refusal = _refusal(vid, key, entry, source, torch_version, allow_unattested)
        if refusal is not None:
            skipped.append(Skipped(vid, refusal, refused=True))
            continue
        # parsed by the identity check already
        name, version, _, _ = parse_wheel_filename(source.name)
        try:
            metadata = core_metadata(source)
        except ConfigError as exc:
            skipped.append(Skipped(vid, f"{entry.wheel}: {exc.detail}", refused=True))
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
    return wheels, skipped


def _refusal(
    vid: str,
    key: VariantId,
    entry: manifest.Entry,
    source: Path,
    torch_version: str,
    allow_unattested: bool,
) -> str | None:
    """Why the wheel ``entry`` names may not be listed under ``vid`` (one line); None: it may."""
    if not source.is_file():
        return f"{entry.wheel} is missing"
    if file_sha256(source) != entry.sha256:
        return f"{entry.wheel} does not match the manifest's sha256 (rebuild it)"
    problems = wheel_identity_problems(
        source, key, torch_version if entry.torch_version else None, entry.toolkit
    )
    if problems:
        return f"{entry.wheel} is not a wheel of {vid}: {'; '.join(problems)}"
    try:
        if read_provenance(source, entry.sha256 or "", vid) is None and not allow_unattested:
            return (
                f"{entry.wheel} has no provenance record ({provenance_path(source).name}): rebuild it with "
                f"`wheelfactory build`, or pass {UNATTESTED_FLAG} to list it without one"
            )
    except InvalidProvenance as exc:
        return f"{provenance_path(source).name}: {exc} (rebuild it)"
    return None


# What reading a damaged or hostile zip can raise (bad headers, bad deflate data, an unsupported
# compression or encryption, a member that claims more bytes than it has).
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    OSError,
)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def wheel_build_record(
    archive: zipfile.ZipFile, package: str, wheel: Path
) -> dict[str, object] | None:
    """The build record of the wheel's package ``package`` (None: it has none), read and checked
    by the runtime's reader (``partial_record``); ConfigError naming the wheel otherwise. Raises
    what ZIP_ERRORS lists when the archive is damaged."""
    name = record_member(package)
    if name not in archive.namelist():
        return None
    try:
        return partial_record(load_record_json(archive.read(name), name), name)
    except RecordError as exc:
        raise ConfigError(
            str(exc), file=str(wheel), hint="rebuild it with `wheelfactory build`"
        ) from None


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
                wheel_build_record(archive, top, wheel)
    except ZIP_ERRORS as exc:
        raise ConfigError(f"is not a readable wheel ({_one_line(exc)})", file=str(wheel)) from None
    return metadata


def requires_python(metadata: bytes) -> str | None:
    """The Requires-Python of METADATA's bytes."""
    requires = (
        HeaderParser().parsestr(metadata.decode("utf-8", errors="replace")).get("Requires-Python")
    )
    return requires if isinstance(requires, str) else None


API_VERSION = "1.1"  # PEP 691 JSON with PEP 700's versions and file sizes
METADATA_SUFFIX = ".metadata"  # PEP 658: <wheel>.metadata beside the wheel
REPORT_PAGE = "report.html"  # the build report, in an index `index` writes (serve serves it)


def plan_index(
    wheels: Sequence[IndexedWheel],
    skipped: Sequence[Skipped],
    *,
    base_url: str = DEFAULT_BASE_URL,
    extra_pages: tuple[tuple[str, str], ...] = (),
    extra_links: tuple[tuple[str, Path], ...] = (),
    report: str | None = None,
) -> IndexPlan:
    """Every page and file of an index listing ``wheels`` (any order; one wheel listed twice, e.g.
    from this dist and from the target, counts once and keeps its local file). A file name listed
    twice with different bytes is an IndexBuildError: a published file never changes. ``report``:
    the build report's page (publish/report.py), written as REPORT_PAGE and linked from the top."""
    listed = _merged(wheels)
    pages: dict[str, str] = {}
    by_variant: dict[str, list[IndexedWheel]] = {}
    for wheel in listed:
        by_variant.setdefault(wheel.variant_id, []).append(wheel)
    newest: set[str] = set()  # paths of each (variant, project)'s newest wheel
    for vid, members in by_variant.items():
        simple = members[0].simple
        projects: dict[str, list[IndexedWheel]] = {}
        for wheel in members:
            projects.setdefault(wheel.project, []).append(wheel)
        pages[f"{simple}/index.html"] = _page(
            f"Simple index: {vid}", [_anchor(f"{_href(p)}/", p) for p in projects]
        )
        pages[f"{simple}/index.json"] = _json(
            {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]}
        )
        for project, releases in projects.items():
            pages[f"{simple}/{project}/index.html"] = _page(
                f"Links for {project} ({vid})", [_wheel_anchor(w, w.filename) for w in releases]
            )
            pages[f"{simple}/{project}/index.json"] = _json(_project_json(project, releases))
            newest.add(releases[-1].path)
        pages.update(_requirements(vid, members, base_url))
    by_page: dict[str, list[IndexedWheel]] = {}
    for wheel in listed:
        by_page.setdefault(wheel.findlinks_page, []).append(wheel)
    for page, members in sorted(by_page.items()):
        pages[page] = _page(Path(page).stem, [_wheel_anchor(w, f"../{w.path}") for w in members])
    pages.update(extra_pages)
    pages["select.py"] = select_script(base_url)
    pages["index.json"] = _json(_index_json(listed, skipped, sorted(by_page)))
    try:  # what select.py and serve will read: never publish a listing they refuse
        check_listing(pages["index.json"].encode())
    except InvalidListing as exc:
        raise IndexBuildError(
            f"the index.json this manifest makes would be refused by its readers: {_one_line(exc)}"
        ) from None
    if report is not None:
        pages[REPORT_PAGE] = report
    pages["index.html"] = _top_page(
        listed,
        skipped,
        sorted(by_page),
        base_url,
        [p for p, _ in extra_pages],
        newest,
        has_report=report is not None,
    )
    local = [w for w in listed if w.source is not None]
    links = (
        tuple((w.path, w.source) for w in local if w.source is not None)
        + tuple((w.path + PROVENANCE_SUFFIX, w.provenance) for w in local if w.provenance)
        + extra_links
    )
    blobs = tuple(
        (w.path + METADATA_SUFFIX, w.core_metadata) for w in local if w.core_metadata is not None
    )
    known = {w.path: w.sha256 for w in local}
    link_sha256 = {p: known.get(p) or file_sha256(s) for p, s in links}
    digest = hashlib.sha256(
        json.dumps(
            [
                sorted(pages.items()),
                [(p, link_sha256[p]) for p, _ in links],
                [(p, hashlib.sha256(b).hexdigest()) for p, b in blobs],
            ],
            sort_keys=True,
        ).encode()
    ).hexdigest()
    return IndexPlan(
        tuple(listed),
        tuple(skipped),
        tuple(sorted(pages.items())),
        links,
        blobs,
        digest,
        link_sha256,
    )


def _order(wheel: IndexedWheel) -> tuple[str, str, Version, str]:
    return wheel.variant_id, wheel.project, Version(wheel.version), wheel.filename


def _merged(wheels: Sequence[IndexedWheel]) -> list[IndexedWheel]:
    """``wheels`` sorted (variant, project, version), each path once: the local copy of a wheel
    also read from the target is kept (its provenance link shown if either side has one)."""
    by_path: dict[str, IndexedWheel] = {}
    for wheel in wheels:
        seen = by_path.get(wheel.path)
        if seen is None:
            by_path[wheel.path] = wheel
            continue
        if seen.sha256 != wheel.sha256:
            raise IndexBuildError(
                f"{wheel.path} is listed twice with different bytes (sha256 {seen.sha256} and "
                f"{wheel.sha256}): a published file never changes; give the new build another "
                "version"
            )
        keep, other = (
            (wheel, seen) if seen.source is None and wheel.source is not None else (seen, wheel)
        )
        by_path[wheel.path] = replace(
            keep, provenance_listed=keep.provenance_listed or other.has_provenance
        )
    return sorted(by_path.values(), key=_order)


def _json(document: Mapping[str, object]) -> str:
    return json.dumps(document, indent=2) + "\n"


def _href(path: str) -> str:
    """``path`` as a relative URL: each segment percent-encoded (``+`` -> ``%2B``, which S3-style
    hosts would read as a space)."""
    return "/".join(quote(part, safe="") for part in path.split("/"))


def _project_json(project: str, releases: list[IndexedWheel]) -> dict[str, object]:
    """A PEP 691 project page (api-version 1.1). The provenance record goes under ``_provenance``:
    PEP 691 leaves leading-underscore keys to the server, while PEP 740's ``provenance`` key must
    point to a PEP 740 provenance object, which our in-toto statement (runner/provenance.py) is not."""
    files: list[dict[str, object]] = []
    for wheel in releases:
        entry: dict[str, object] = {
            "filename": wheel.filename,
            "url": _href(wheel.filename),
            "hashes": {"sha256": wheel.sha256},
        }
        if wheel.requires_python is not None:
            entry["requires-python"] = wheel.requires_python
        # PEP 714's name, and PEP 658's for older clients
        if wheel.core_metadata_sha256 is not None:
            entry["core-metadata"] = {"sha256": wheel.core_metadata_sha256}
            entry["dist-info-metadata"] = {"sha256": wheel.core_metadata_sha256}
        entry["size"] = wheel.size
        entry["yanked"] = False
        if wheel.has_provenance:
            entry["_provenance"] = _href(wheel.filename + PROVENANCE_SUFFIX)
        files.append(entry)
    versions = sorted({w.version for w in releases}, key=Version)
    return {
        "meta": {"api-version": API_VERSION},
        "name": project,
        "versions": versions,
        "files": files,
    }


def requirements_name(wheel: IndexedWheel, newest: bool) -> str:
    """The requirements file pinning ``wheel`` (``<variant>/requirements.txt`` for the newest release)."""
    return f"{wheel.variant_id}/requirements{'' if newest else '-' + wheel.public_version}.txt"


def _requirements(vid: str, members: list[IndexedWheel], base_url: str) -> dict[str, str]:
    """``requirements.txt`` pinning each project's newest release, ``requirements-<version>.txt``
    each release (``members`` are sorted oldest first: the later of two wheels with one public
    version, which pip would pick too, is pinned)."""
    simple = members[0].simple
    newest: dict[str, IndexedWheel] = {}
    releases: dict[str, dict[str, IndexedWheel]] = {}
    for wheel in members:
        newest[wheel.project] = wheel
        releases.setdefault(wheel.public_version, {})[wheel.project] = wheel
    files = {requirements_name(members[-1], True): newest}
    files.update(
        {requirements_name(next(iter(pins.values())), False): pins for pins in releases.values()}
    )
    pages = {}
    for name, pins in files.items():
        url = f"{base_url}/{_href(name)}"
        pages[name] = (
            f"# {vid}: pip install --require-hashes --no-deps --index-url {base_url}/{simple} -r {url}\n"
            + "".join(f"{w.project}=={w.version} --hash=sha256:{w.sha256}\n" for w in pins.values())
        )
    return pages


def _anchor(href: str, text: str, attributes: str = "") -> str:
    return f'<a href="{html.escape(href)}"{attributes}>{html.escape(text)}</a><br/>'


def _wheel_anchor(wheel: IndexedWheel, href: str) -> str:
    """A wheel's link: ``href`` (a relative path, percent-encoded here) with #sha256=, its
    Requires-Python (PEP 503, HTML-escaped) and its METADATA's hash under both PEP 714's name
    and PEP 658's (which older pip reads)."""
    attributes = (
        f' data-requires-python="{html.escape(wheel.requires_python)}"'
        if wheel.requires_python
        else ""
    )
    if wheel.core_metadata_sha256 is not None:
        attributes += (
            f' data-core-metadata="sha256={wheel.core_metadata_sha256}"'
            f' data-dist-info-metadata="sha256={wheel.core_metadata_sha256}"'
        )
    return _anchor(f"{_href(href)}#sha256={wheel.sha256}", wheel.filename, attributes)


def _page(title: str, body: list[str]) -> str:
    lines = "\n    ".join(body)
    return (
        f'<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="{API_VERSION}">'
        f"<title>{html.escape(title)}</title></head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n    {lines}\n"
        "  </body>\n</html>\n"
    )


def _index_json(
    wheels: Sequence[IndexedWheel], skipped: Sequence[Skipped], findlinks: list[str]
) -> dict[str, object]:
    """One entry per wheel (a variant with several releases appears once per release)."""
    return {
        "schema": SCHEMA,
        "variants": [
            {
                "id": w.variant_id,
                "project": w.project,
                "version": w.version,
                "torch": w.variant.torch,
                "torch_version": w.torch_version,
                "backend": w.variant.backend.kind,
                "toolkit": w.toolkit,
                "cxx11_abi": w.variant.cxx11_abi,
                "python": w.variant.python,
                "arch": w.variant.arch,
                "stable_abi": w.variant.stable_abi,
                "gpu": w.variant.gpu,
                "wheel": w.path,
                "sha256": w.sha256,
                "index": w.simple + "/",
                "find_links": w.findlinks_page,
                "requirements": f"{w.variant_id}/requirements.txt",
                "provenance": w.path + PROVENANCE_SUFFIX if w.has_provenance else None,
                "requires_python": w.requires_python,
                "core_metadata_sha256": w.core_metadata_sha256,
                "size": w.size,
            }
            for w in wheels
        ],
        "find_links": findlinks,
        "skipped": [{"id": s.variant_id, "reason": s.reason} for s in skipped],
    }


def pip_command(wheel: IndexedWheel, base_url: str, *, pinned: bool = False) -> str:
    project = f"{wheel.project}=={wheel.public_version}" if pinned else wheel.project
    return f"pip install --index-url {base_url}/{wheel.simple} {project}"


def _top_page(
    wheels: Sequence[IndexedWheel],
    skipped: Sequence[Skipped],
    findlinks: list[str],
    base_url: str,
    extra: list[str],
    newest: set[str],
    *,
    has_report: bool = False,
) -> str:
    rows = []
    for w in wheels:
        cells = [
            w.variant_id,
            w.torch_version,
            w.variant.backend.build_name
            if w.toolkit is None
            else f"{w.variant.backend.kind} {w.toolkit}",
            "cxx11" if w.variant.cxx11_abi else "pre-cxx11",
            w.variant.python,
            w.variant.arch,
        ]
        tds = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
        latest = w.path in newest  # an older release's command pins its version
        command = html.escape(pip_command(w, base_url, pinned=not latest))
        provenance = (
            f'<br/><a href="{_href(w.path + PROVENANCE_SUFFIX)}">provenance</a>'
            if w.has_provenance
            else ""
        )
        rows.append(
            f'<tr>{tds}<td><a href="{_href(w.path)}#sha256={w.sha256}">{html.escape(w.filename)}</a>'
            f'</td><td><code>{command}</code><br/><a href="{_href(requirements_name(w, latest))}">'
            f"hash-pinned requirements</a>{provenance}</td></tr>"
        )
    header = "".join(
        f"<th>{h}</th>"
        for h in ("variant", "torch", "backend", "C++ ABI", "python", "arch", "wheel", "install")
    )
    pages = "\n".join(
        f'    <li><a href="{_href(p)}">{html.escape(p)}</a>: <code>pip install '
        f"{html.escape(wheels[0].project if wheels else '')} -f {html.escape(base_url)}/"
        f"{html.escape(_href(p))}</code></li>"
        for p in findlinks
    )
    extras = "\n".join(
        f'    <li><a href="{html.escape(p)}">{html.escape(p)}</a></li>' for p in extra
    )
    missing = "\n".join(
        f"    <li>{html.escape(s.variant_id)}: {html.escape(s.reason)}</li>" for s in skipped
    )
    variants = len({w.variant_id for w in wheels})
    report = (
        f'\n    <p><a href="{REPORT_PAGE}">Build report</a>: every variant of the build, how it ended and '
        "why.</p>"
        if has_report
        else ""
    )
    return f"""<!DOCTYPE html>
<html>
  <head><meta charset="utf-8"><title>wheelfactory index</title></head>
  <body>
    <h1>{variants} variant(s), {len(wheels)} wheel(s)</h1>{report}
    <p>Pick the row matching your torch (<code>python -c "import torch; print(torch.__version__,
    torch.version.cuda, torch.compiled_with_cxx11_abi())"</code>), or let the index pick it:
    <code>curl -s {html.escape(base_url)}/select.py | python -</code> (in the environment you install into).</p>
    <table>
      <tr>{header}</tr>
      {chr(10).join(rows)}
    </table>
    <h2>Find-links pages</h2>
    <ul>
{pages}
    </ul>
    <h2>Other formats</h2>
    <ul>
    <li><a href="index.json">index.json</a></li>
{extras}
    </ul>
    <h2>Not listed</h2>
    <ul>
{missing or "    <li>none</li>"}
    </ul>
  </body>
</html>
"""


_SHA256 = re.compile(r"[0-9a-f]{64}")
_PROJECT = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # a canonical project name
_LISTING_HINT = "the target's index.json is not what wheelfactory writes: restore it, or publish to a fresh target"


def wheels_from_listing(listing: Mapping[str, object], *, where: str) -> list[IndexedWheel]:
    """The wheels a published index.json lists, as IndexedWheel without a source: what a publish
    target already holds, for ``plan_index`` to list beside the new ones. A listing is read from a
    target that others can write, so each entry must be what ``plan_index`` writes (every path the
    one the layout gives its variant, project and file name; hashes, sizes and versions well
    formed; the variant fields those of its id): anything else is a ConfigError naming ``where``
    and the entry. A listing written before core metadata and sizes were listed is refused too."""
    variants = listing.get("variants")
    if not isinstance(variants, list):
        raise ConfigError("variants: expected a list", file=where, hint=_LISTING_HINT)
    wheels: list[IndexedWheel] = []
    seen: set[str] = set()
    for number, entry in enumerate(variants):
        wheel = _listed_wheel(entry, f"variants[{number}]", where)
        if wheel.path in seen:
            raise ConfigError(
                f"variants[{number}]: {wheel.path} is listed twice", file=where, hint=_LISTING_HINT
            )
        seen.add(wheel.path)
        wheels.append(wheel)
    return wheels


def _listed_wheel(entry: object, at: str, where: str) -> IndexedWheel:
    def bad(key: str, problem: str) -> ConfigError:
        shown = quoted(entry.get(key)) if isinstance(entry, dict) else ""
        return ConfigError(f"{at}: {key}: {shown} {problem}", file=where, hint=_LISTING_HINT)

    if not isinstance(entry, dict):
        raise ConfigError(
            f"{at}: expected an object, got {quoted(entry)}", file=where, hint=_LISTING_HINT
        )
    for key, types in _LISTED_KEYS.items():
        if key not in entry and key in _OPTIONAL_KEYS:
            continue
        if key not in entry and key in _NEWER_KEYS:
            raise ConfigError(
                f"{at}: missing key {key}: an older wheelfactory wrote this index.json",
                file=where,
                hint="index the earlier releases' dist again with this version and publish it first",
            )
        if key not in entry:
            raise ConfigError(f"{at}: missing key {key}", file=where, hint=_LISTING_HINT)
        if not isinstance(entry[key], types) or (int in types and isinstance(entry[key], bool)):
            raise bad(key, "has the wrong type")
    vid = entry["id"]
    try:
        variant = VariantId.parse(vid)
    except InvalidVariantId as exc:
        raise bad("id", f"is not a variant id ({_one_line(exc)})") from None
    if str(variant) != vid:
        raise bad("id", f"is not written as wheelfactory writes it ({variant})")
    project, version, path = entry["project"], entry["version"], entry["wheel"]
    if not _PROJECT.fullmatch(project):
        raise bad("project", "is not a normalized project name")
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise bad("version", "is not a version") from None
    if str(parsed) != version:
        raise bad("version", f"is not normalized ({parsed})")
    filename = path.rsplit("/", 1)[-1]
    if (
        path != f"{vid}/simple/{project}/{filename}"
        or paths.safe_member(filename) is None
        or _UNSAFE_NAME.search(filename)
    ):
        raise bad("wheel", f"is not {vid}/simple/{project}/<wheel file name>")
    try:
        name, wheel_version, _, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        raise bad("wheel", "is not a wheel's file name") from None
    if canonicalize_name(name) != project or wheel_version != parsed:
        raise bad("wheel", f"is not a file name of {project} {version}")
    for key in ("sha256", "core_metadata_sha256"):
        if entry[key] is not None and not _SHA256.fullmatch(entry[key]):
            raise bad(key, "is not a sha256 (64 lowercase hex digits)")
    if entry["size"] < 0:
        raise bad("size", "is negative")
    if not TORCH_VERSION.fullmatch(entry["torch_version"]):
        raise bad("torch_version", "is not a torch release")
    if entry["toolkit"] is not None and not TOOLKIT_VERSION.fullmatch(entry["toolkit"]):
        raise bad("toolkit", "is not a toolkit release")
    if entry["requires_python"] is not None and _UNSAFE_NAME.search(entry["requires_python"]):
        raise bad("requires_python", "holds control characters")
    expected = {
        "torch": variant.torch,
        "backend": variant.backend.kind,
        "cxx11_abi": variant.cxx11_abi,
        "python": variant.python,
        "arch": variant.arch,
        "stable_abi": variant.stable_abi,
        "index": f"{vid}/simple/",
        "requirements": f"{vid}/requirements.txt",
        "gpu": variant.gpu,
    }
    for key, value in expected.items():
        if key in _OPTIONAL_KEYS and key not in entry:
            continue
        if entry[key] != value or type(entry[key]) is not type(value):
            raise bad(key, f"does not match the variant id {vid} (expected {quoted(value)})")
    if entry["provenance"] not in (None, path + PROVENANCE_SUFFIX):
        raise bad("provenance", f"is not {path + PROVENANCE_SUFFIX} or null")
    wheel = IndexedWheel(
        variant,
        project,
        version,
        filename,
        entry["sha256"],
        None,
        entry["torch_version"],
        entry["toolkit"],
        entry["requires_python"],
        None,
        core_metadata_sha256=entry["core_metadata_sha256"],
        size=entry["size"],
        provenance_listed=entry["provenance"] is not None,
    )
    if entry["find_links"] != wheel.findlinks_page:
        raise bad("find_links", f"is not {wheel.findlinks_page}")
    return wheel


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NEWER_KEYS = ("requires_python", "core_metadata_sha256", "size")  # listed since PEP 658/691 pages
# listed since split builds; the id says it too, so an older listing may lack it
_OPTIONAL_KEYS = ("gpu",)
# Every key plan_index writes into a variant's entry, with its JSON types.
_LISTED_KEYS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "project": (str,),
    "version": (str,),
    "torch": (str,),
    "torch_version": (str,),
    "backend": (str,),
    "toolkit": (str, type(None)),
    "cxx11_abi": (bool,),
    "python": (str,),
    "arch": (str,),
    "stable_abi": (bool,),
    "gpu": (str,),
    "wheel": (str,),
    "sha256": (str,),
    "index": (str,),
    "find_links": (str,),
    "requirements": (str,),
    "provenance": (str, type(None)),
    "requires_python": (str, type(None)),
    "core_metadata_sha256": (str, type(None)),
    "size": (int,),
}


FIT_MODULE = "wheelfactory._runtime._fit"


def select_script(base_url: str) -> str:
    """publish/which.py as the index's select.py: one standard-library file, defaulting to this
    index's URL, with the runtime's fit rule (runtime/_fit.py) pasted over which.py's import of it."""
    import ast

    from wheelfactory._runtime import _fit
    from wheelfactory.publish import which

    source = Path(which.__file__).read_text(encoding="utf-8")
    default = f'DEFAULT_INDEX = "{DEFAULT_BASE_URL}"'
    if default not in source:
        raise IndexBuildError(
            "publish/which.py lost its DEFAULT_INDEX line; select.py cannot be made"
        )
    imports = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and node.module == FIT_MODULE
    ]
    if len(imports) != 1 or imports[0].end_lineno is None:
        raise IndexBuildError(
            f"publish/which.py must import the fit rule with one `from {FIT_MODULE} import ...` "
            f"(found {len(imports)}); select.py cannot embed it"
        )
    future = "from __future__ import annotations\n"
    fit = Path(_fit.__file__).read_text(encoding="utf-8")
    if future not in fit:
        raise IndexBuildError(
            "runtime/_fit.py lost its __future__ import; select.py cannot embed it"
        )
    embedded = (
        "# ---- runtime/_fit.py, embedded by wheelfactory index (the kernel runtime's fit rule) ----\n"
        + fit.replace(future, "", 1).strip()
        + "\n# ---- end of runtime/_fit.py ----\n"
    )
    lines = source.splitlines(keepends=True)
    lines[imports[0].lineno - 1 : imports[0].end_lineno] = [embedded]
    return "".join(lines).replace(default, f"DEFAULT_INDEX = {base_url!r}", 1)


def read_listing(dist: Path) -> dict[str, object]:
    """dist/index/index.json (what ``serve`` announces), checked as select.py checks it
    (publish/which.py ``check_listing``): ConfigError naming the file when corrupt or wrong-shaped."""
    return read_listing_at(dist / INDEX_LINK, hint=f"run `wheelfactory index -o {dist}` again")


def read_listing_at(root: Path, *, hint: str) -> dict[str, object]:
    """``root/index.json``, checked as ``read_listing`` checks it; ``hint`` says how to make it again."""
    path = root / "index.json"
    try:
        raw = read_input(path)
    except OSError as exc:
        raise ConfigError(
            f"cannot read it ({exc.strerror or exc})", file=str(path), hint=hint
        ) from None
    try:
        return check_listing(raw)
    except InvalidListing as exc:
        raise ConfigError(_one_line(exc), file=str(path), hint=hint) from None


def current_generation(dist: Path) -> Path | None:
    link = dist / INDEX_LINK
    return link.resolve() if link.is_symlink() else None


def _remove_leftover(path: Path) -> None:
    """A killed run's temp name: a link (never followed) or file is unlinked, a directory removed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_index(dist: Path, plan: IndexPlan) -> tuple[Path, bool]:
    """Publish ``plan`` as ``dist/index``; returns (generation directory, changed)."""
    link = dist / INDEX_LINK
    if link.exists() and not link.is_symlink():
        raise IndexBuildError(
            f"{link} exists and is not an index wheelfactory made (a symlink to a generation): "
            "move it away"
        )
    current = current_generation(dist)
    if (
        current is not None
        and (current / DIGEST_FILE).is_file()
        and (current / DIGEST_FILE).read_text().strip() == plan.digest
    ):
        return current, False
    generations = dist / GENERATIONS
    if generations.is_symlink():  # nothing under dist is followed out of it
        raise IndexBuildError(
            f"{generations} is a symlink: the index is written only inside {dist}; remove the link"
        )
    generations.mkdir(parents=True, exist_ok=True)
    for leftover in generations.glob(".tmp-*"):  # a killed run's half generation (we hold the lock)
        _remove_leftover(leftover)
    name = f"g{time.time_ns()}"
    temp = generations / f".tmp-{name}"
    temp.mkdir()
    # A fresh generation nobody reads until the rename below: its pages (index.json, the variants
    # json...) are written plainly; the generation as a whole is what appears atomically.
    for rel, text in plan.pages:  # each name checked again: whatever made it, nothing lands outside
        target = paths.inside(temp, rel, what="the index page", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for rel, data in plan.blobs:
        target = paths.inside(temp, rel, what="the index file", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for rel, source in plan.links:
        target = paths.inside(temp, rel, what="the index file", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)  # the same inode: a later rebuild cannot change what we list
        except OSError:
            shutil.copy2(source, target)  # another filesystem
    (temp / DIGEST_FILE).write_text(plan.digest + "\n")
    generation = generations / name
    os.rename(temp, generation)
    # Not support/atomic.py: the target is a symlink, replaced by a symlink (atomic.py refuses to
    # replace one with a file). The per-process name is enough: we hold the output directory's lock.
    swap = dist / f".{INDEX_LINK}.{os.getpid()}.tmp"
    # ours, and any a killed run left between link and rename
    for leftover in dist.glob(f".{INDEX_LINK}.*.tmp"):
        _remove_leftover(leftover)
    os.symlink(os.path.relpath(generation, dist), swap)
    os.replace(swap, link)  # the atomic step: readers switch from one complete index to the other
    for old in sorted(p for p in generations.iterdir() if p.name.startswith("g"))[
        :-KEEP_GENERATIONS
    ]:
        shutil.rmtree(old, ignore_errors=True)
    return generation, True
