"""The pages of a package index over a list of wheels: ``plan_index`` decides every page and
every file, purely (publish/generations.py writes them; publish/release.py sends them to a target).

A plan may list several releases of a variant: the wheels collect found in this dist
(publish/collect.py), plus the ones a publish target already holds, read back from its
index.json (publish/listing.py; ``source`` None: the pages list them, the plan carries no file for
them). Every page is made from the whole list, so an earlier release stays listed.

Layout (URLs are relative to what ``wheelfactory serve`` serves)::

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

from packaging.version import Version

from wheelfactory.errors import IndexBuildError
from wheelfactory.project.keys import file_sha256
from wheelfactory.publish.collect import IndexedWheel, one_line
from wheelfactory.publish.index_json import InvalidListing, check_listing
from wheelfactory.publish.select_script import DEFAULT_BASE_URL, select_script
from wheelfactory.runner.provenance import SUFFIX as PROVENANCE_SUFFIX
from wheelfactory.runner.refusals import LeftOut

SCHEMA = 1


@dataclass(frozen=True)
class IndexPlan:
    wheels: tuple[IndexedWheel, ...]
    skipped: tuple[LeftOut, ...]
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


API_VERSION = "1.1"  # PEP 691 JSON with PEP 700's versions and file sizes
METADATA_SUFFIX = ".metadata"  # PEP 658: <wheel>.metadata beside the wheel
REPORT_PAGE = "report.html"  # the build report, in an index `index` writes (serve serves it)


def plan_index(
    wheels: Sequence[IndexedWheel],
    skipped: Sequence[LeftOut],
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
        pages[f"{simple}/index.html"] = html_page(
            f"Simple index: {vid}", [_anchor(f"{_href(p)}/", p) for p in projects]
        )
        pages[f"{simple}/index.json"] = _json(
            {"meta": {"api-version": API_VERSION}, "projects": [{"name": p} for p in projects]}
        )
        for project, releases in projects.items():
            pages[f"{simple}/{project}/index.html"] = html_page(
                f"Links for {project} ({vid})", [wheel_anchor(w, w.filename) for w in releases]
            )
            pages[f"{simple}/{project}/index.json"] = _json(_project_json(project, releases))
            newest.add(releases[-1].path)
        pages.update(_requirements(vid, members, base_url))
    by_page: dict[str, list[IndexedWheel]] = {}
    for wheel in listed:
        by_page.setdefault(wheel.findlinks_page, []).append(wheel)
    for page, members in sorted(by_page.items()):
        pages[page] = html_page(Path(page).stem, [wheel_anchor(w, f"../{w.path}") for w in members])
    pages.update(extra_pages)
    pages["select.py"] = select_script(base_url)
    pages["index.json"] = _json(_index_json(listed, skipped, sorted(by_page)))
    try:  # what select.py and serve will read: never publish a listing they refuse
        check_listing(pages["index.json"].encode())
    except InvalidListing as exc:
        raise IndexBuildError(
            f"the index.json this manifest makes would be refused by its readers: {one_line(exc)}"
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


def wheel_anchor(wheel: IndexedWheel, href: str) -> str:
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


def html_page(title: str, body: list[str]) -> str:
    lines = "\n    ".join(body)
    return (
        f'<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="{API_VERSION}">'
        f"<title>{html.escape(title)}</title></head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n    {lines}\n"
        "  </body>\n</html>\n"
    )


def _index_json(
    wheels: Sequence[IndexedWheel], skipped: Sequence[LeftOut], findlinks: list[str]
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
    skipped: Sequence[LeftOut],
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
