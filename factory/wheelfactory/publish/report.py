"""The matrix report: dist/manifest.json (and the plan) as a grid of torch x backend x C++ ABI.

``build_report`` is pure: it turns the manifest's entries, the plan (when there is a matrix)
and a few facts probed from the output directory (``probe_dist``) into a frozen ``Report``.
``render_html`` and ``render_svg`` turn a report into text, deterministically (the same input
gives the same bytes; nothing in them depends on the clock or on absolute paths of ours);
``write_report`` writes them atomically.

Rows are torch releases (then stable-ABI builds); columns are the backend builds and ABIs that
occur. A grid cell lists every variant or pruned combination that falls into it (Pythons,
archs); each of those is one ``<td>`` with ``data-variant`` (or ``data-pruned``),
``data-status`` and a ``title`` saying why, for hovering.
"""

from __future__ import annotations

import html
import os
import posixpath
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.errors import UsageError, WriteFailed
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import (
    Backend,
    InvalidBackend,
    InvalidVariantId,
    VariantId,
)
from wheelfactory.plan.prune import Pruned
from wheelfactory.plan.versions import minor_of
from wheelfactory.runner import manifest
from wheelfactory.support import atomic, paths
from wheelfactory.support.outputs import STDOUT, is_stdout

Status = Literal["built", "cached", "failed", "missing", "pruned"]
STATUSES: tuple[Status, ...] = ("built", "cached", "failed", "missing", "pruned")
HTML_NAME = "report.html"
SVG_NAME = "report.svg"
INDEX_DIR = "index"  # dist/index, as factory/wheelfactory/publish/index.py writes it

# (fill, border, text) per status: the HTML page and the SVG use the same colours.
COLOURS: dict[Status, tuple[str, str, str]] = {
    "built": ("#c8e6c9", "#2e7d32", "#1b3d1f"),
    "cached": ("#cfe2ff", "#1d5fbf", "#0d2a55"),
    "failed": ("#f8c9cc", "#b3261e", "#5c0f0b"),
    "missing": ("#fff3cd", "#b07d00", "#4d3700"),
    "pruned": ("#e6e6e6", "#9e9e9e", "#555555"),
}
LEGEND: dict[Status, str] = {
    "built": "built in this run, verified",
    "cached": "built earlier with the same key, verified",
    "failed": "the build or a verification step failed",
    "missing": "planned by the matrix, not in the manifest",
    "pruned": "ruled out by the plan (hover for the reason)",
}
_KINDS = ("cpu", "cuda", "rocm")
_ABIS = ("cxx11", "cxx98", "any")


@dataclass(frozen=True)
class Row:
    """A torch release, or the stable-ABI builds that serve every torch from ``torch`` on."""

    torch: str  # major.minor
    stable_abi: bool = False

    @property
    def label(self) -> str:
        return f"stable ABI, torch >= {self.torch}" if self.stable_abi else f"torch {self.torch}"

    @property
    def key(self) -> str:
        return f"stable-{self.torch}" if self.stable_abi else self.torch

    def sort_key(self) -> tuple[bool, Version]:
        return self.stable_abi, Version(self.torch)


@dataclass(frozen=True)
class Column:
    """A backend build at id precision (``cpu``, ``cu130``, ``rocm6.2``) or, for what a whole
    backend kind lacks, the kind (``cuda``); and a C++ ABI (``cxx11``, ``cxx98``, ``any``)."""

    backend: str
    abi: str

    @property
    def label(self) -> str:
        return f"{self.backend} {self.abi}"

    @property
    def kind(self) -> str:
        if self.backend in _KINDS:
            return self.backend
        return "cuda" if self.backend.startswith("cu") else "rocm"

    def sort_key(self) -> tuple[int, bool, Version, int]:
        exact = self.backend not in _KINDS
        version = Version("0")
        if exact and self.kind != "cpu":
            version = Version(Backend.parse(self.backend).version or "0")
        return _KINDS.index(self.kind), not exact, version, _ABIS.index(self.abi)


@dataclass(frozen=True)
class ReportCell:
    """One variant (from the manifest or the plan) or one pruned combination, in its grid cell."""

    label: str  # the variant id; for a pruned combination an id pattern, * for "every value"
    row: Row
    column: Column
    status: Status
    reason: str  # the hover text: verification, the error, why it is pruned or missing
    python: str | None = None  # "abi3", "3.11"; None: every Python (pruned)
    arch: str | None = None  # None: every arch (pruned)
    # shown in the cell: the first line of a failure, or of a built one's first warning
    detail: str = ""
    wheel: str | None = None  # relative to the output directory
    size: int | None = None
    seconds: float | None = None
    log: str | None = None  # relative to the output directory
    index: str | None = None  # the variant's index page, relative to the output directory
    torch_version: str | None = None
    engine: str | None = None

    @property
    def is_variant(self) -> bool:
        return self.status != "pruned"

    @property
    def sub_label(self) -> str:
        """What tells the members of one grid cell apart: ``abi3 x86_64``, ``cp311 any arch``."""
        python = (
            "any python"
            if self.python is None
            else ("abi3" if self.python == "abi3" else "cp" + self.python.replace(".", ""))
        )
        return f"{python} {self.arch or 'any arch'}"

    def sort_key(self) -> tuple[tuple[bool, Version], tuple[int, bool, Version, int], bool, str]:
        return self.row.sort_key(), self.column.sort_key(), not self.is_variant, self.label


@dataclass(frozen=True)
class Unplaced:
    """A manifest entry whose id is not a variant id: listed below the grid, never dropped."""

    variant_id: str
    status: str
    reason: str


@dataclass(frozen=True)
class Report:
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    cells: tuple[ReportCell, ...]  # sorted by row, column, variants before pruned, label
    unplaced: tuple[Unplaced, ...] = ()
    matrix: str | None = None  # the matrix file the plan came from, as the user named it
    has_index: bool = False  # dist/index/index.html exists
    project: str | None = None  # the wheels' project and public version, from their file names
    version: str | None = None
    updated: str | None = None  # when the manifest was last written (UTC), a build's last record

    def at(self, row: Row, column: Column) -> tuple[ReportCell, ...]:
        return tuple(c for c in self.cells if c.row == row and c.column == column)

    def counts(self) -> dict[Status, int]:
        found = {status: 0 for status in STATUSES}
        for cell in self.cells:
            found[cell.status] += 1
        for other in self.unplaced:
            found[_manifest_status(other.status)] += 1
        return found

    def summary(self) -> str:
        counts = self.counts()
        variants = sum(n for status, n in counts.items() if status != "pruned")
        text = (
            f"{variants} variant(s): {counts['built']} built, {counts['cached']} cached, "
            f"{counts['failed']} failed, {counts['missing']} missing; "
            f"{counts['pruned']} pruned combination(s)"
        )
        if self.unplaced:
            entries = "entry" if len(self.unplaced) == 1 else "entries"
            text += f"; {len(self.unplaced)} manifest {entries} not in the grid"
        return text


@dataclass(frozen=True)
class DistFacts:
    """What ``build_report`` needs from the output directory besides the manifest."""

    indexed: frozenset[str] = frozenset()  # variant ids with a dist/index/<id>/ directory
    sizes: Mapping[str, int] | None = None  # wheel sizes the manifest does not record
    has_index: bool = False
    updated: str | None = None  # the manifest's modification time, UTC


def probe_dist(dist: Path, entries: Mapping[str, manifest.Entry]) -> DistFacts:
    """The only I/O behind a report: which variants the index lists, and wheel sizes that an
    older manifest did not record. Every ``wheel`` and ``log`` the manifest names (the page links
    them) must lie inside ``dist``: a ConfigError naming the manifest otherwise (support/paths.py)."""
    index = dist / INDEX_DIR
    listed = str(dist / manifest.MANIFEST)
    for vid, entry in sorted(entries.items()):
        for what, name in (("wheel", entry.wheel), ("log", entry.log)):
            if name:
                paths.inside(dist, name, what=f"{vid} names the {what}", file=listed)
    indexed = frozenset(vid for vid in entries if (index / vid).is_dir())
    sizes: dict[str, int] = {}
    for vid, entry in entries.items():
        if entry.size is None and entry.wheel and (dist / entry.wheel).is_file():
            sizes[vid] = (dist / entry.wheel).stat().st_size
    try:
        stamp = (dist / manifest.MANIFEST).stat().st_mtime
        updated: str | None = datetime.fromtimestamp(stamp, timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
    except OSError:
        updated = None
    return DistFacts(indexed, sizes, (index / "index.html").is_file(), updated)


def build_report(
    entries: Mapping[str, manifest.Entry],
    plan: Plan | None = None,
    *,
    facts: DistFacts = DistFacts(),
    matrix: str | None = None,
) -> Report:
    """The grid for a manifest; with a plan, also its pruned combinations and the variants it
    plans that the manifest lacks (``missing``)."""
    cells: list[ReportCell] = []
    unplaced: list[Unplaced] = []
    sizes = facts.sizes or {}
    for vid, entry in sorted(entries.items()):
        try:
            key = VariantId.parse(vid)
        except InvalidVariantId as exc:
            unplaced.append(Unplaced(vid, entry.status, str(exc)))
            continue
        cells.append(_entry_cell(vid, key, entry, sizes.get(vid), vid in facts.indexed))
    if plan is not None:
        source = matrix or "the matrix"
        for variant in plan.variants:
            if variant.id not in entries:
                cells.append(
                    ReportCell(
                        variant.id,
                        _row(variant.key),
                        _column(variant.key),
                        "missing",
                        f"planned by {source}, not in the manifest: build it with "
                        f"`wheelfactory build --only '{variant.id}'`",
                        python=variant.key.python,
                        arch=variant.key.arch,
                        torch_version=variant.torch_version,
                    )
                )
        cells.extend(_pruned_cell(p) for p in plan.pruned)
    cells.sort(key=ReportCell.sort_key)
    rows = tuple(sorted({c.row for c in cells}, key=Row.sort_key))
    columns = tuple(sorted({c.column for c in cells}, key=Column.sort_key))
    project, version = _release(entries)
    return Report(
        rows,
        columns,
        tuple(cells),
        tuple(unplaced),
        matrix,
        facts.has_index,
        project,
        version,
        facts.updated,
    )


def _release(entries: Mapping[str, manifest.Entry]) -> tuple[str | None, str | None]:
    """(project, public version) of the newest wheel the manifest names; (None, None) with none."""
    found: list[tuple[Version, str]] = []
    for entry in entries.values():
        if entry.wheel:
            try:
                project, release, _, _ = parse_wheel_filename(posixpath.basename(entry.wheel))
            except (InvalidWheelFilename, InvalidVersion):
                continue
            found.append((Version(release.public), str(project)))
    if not found:
        return None, None
    newest, name = max(found)
    return name, str(newest)


def _row(key: VariantId) -> Row:
    return Row(key.torch, key.stable_abi)


def _column(key: VariantId) -> Column:
    return Column(key.backend.build_name, "cxx11" if key.cxx11_abi else "cxx98")


def _manifest_status(text: str) -> Status:
    """A manifest status as a report status; anything else (a manifest from elsewhere) is a failure."""
    return "built" if text == "built" else "cached" if text == "cached" else "failed"


def _entry_cell(
    vid: str, key: VariantId, entry: manifest.Entry, size: int | None, indexed: bool
) -> ReportCell:
    status = _manifest_status(entry.status)
    detail = ""
    torch = f"torch {entry.torch_version or key.torch}"
    if status != "failed":
        how = "built" if status == "built" else "cached (built earlier with the same key)"
        tested = (
            f", its project's tests ({entry.tests.get('command')})"
            if entry.tests and entry.tests.get("passed")
            else ""
        )
        reason = (
            f"{how}, passed verification, the smoke test{tested}: {entry.wheel or 'no wheel'}; {torch}"
            + (f"; engine {entry.engine}" if entry.engine else "")
            + "".join(f"; WARNING: {w}" for w in entry.warnings or ())
        )
        detail = f"warning: {entry.warnings[0]}" if entry.warnings else ""
    elif entry.status == "failed":
        text = (entry.error or "").strip()
        detail = text.splitlines()[0] if text else "failed (no error recorded)"
        reason = f"failed: {text or 'no error recorded'}"
        if entry.tests and not entry.tests.get("passed") and entry.tests.get("excerpt"):
            reason += f"\n{entry.tests['excerpt']}"  # the project's tests: pytest's summary
    else:
        detail = f"unknown manifest status {entry.status!r}"
        reason = f"{detail}: rebuild it"
    return ReportCell(
        vid,
        _row(key),
        _column(key),
        status,
        reason,
        python=key.python,
        arch=key.arch,
        detail=detail,
        wheel=entry.wheel,
        size=entry.size if entry.size is not None else size,
        seconds=entry.seconds,
        log=entry.log,
        index=f"{INDEX_DIR}/{vid}/simple/index.html" if indexed else None,
        torch_version=entry.torch_version,
        engine=entry.engine,
    )


def _pruned_backend(text: str) -> tuple[str, str]:
    """(column name, id tag) of a pruned entry's backend: ``cu124`` -> (cu124, cu124);
    ``rocm6.2.4`` -> (rocm6.2, rocm62), as variant ids spell it; a kind stays a kind."""
    try:
        backend = Backend.parse(text)
    except InvalidBackend:
        return text, text  # "cuda", "rocm": every build of the kind
    if backend.kind == "rocm" and backend.version is not None:
        backend = Backend("rocm", minor_of(backend.version))
    return backend.build_name, backend.tag


def _pruned_cell(pruned: Pruned) -> ReportCell:
    backend, tag = _pruned_backend(pruned.backend)
    abi = "any" if pruned.cxx11_abi is None else ("cxx11" if pruned.cxx11_abi else "cxx98")
    major, minor = pruned.torch.split(".")
    head = f"torch{major}{minor}-{'*' if abi == 'any' else abi}-{tag}"
    if pruned.arch is None and pruned.python is None:
        label = f"{head}-*"
    else:
        python = (
            "*"
            if pruned.python is None
            else ("" if pruned.python == "abi3" else "-cp" + pruned.python.replace(".", ""))
        )
        label = f"{head}-{pruned.arch or '*'}-linux{python}"
    return ReportCell(
        label,
        Row(pruned.torch),
        Column(backend, abi),
        "pruned",
        f"pruned: {pruned.reason}",
        python=pruned.python,
        arch=pruned.arch,
    )


# ----------------------------------------------------------------------------------------- text


def human_size(size: int | None) -> str:
    if size is None:
        return ""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def human_seconds(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f} s"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _href(prefix: str, relative: str) -> str:
    """A link's percent-encoded target. From the path's bytes (os.fsencode): under the C locale a
    non-ASCII name arrives as surrogate escapes, which no text encoding takes."""
    path = relative if prefix in ("", ".") else posixpath.join(prefix, relative)
    return _e(urllib.parse.quote(os.fsencode(path)))


CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1a1a1a; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
.summary { font-weight: 600; }
table.grid, table.legend, table.details { border-collapse: collapse; margin: 0.8em 0; }
table.grid > thead th, table.grid > tbody > tr > th { background: #f4f4f4; border: 1px solid #bbb;
  padding: 0.3em 0.6em; text-align: left; white-space: nowrap; }
table.grid > tbody > tr > td { border: 1px solid #bbb; padding: 0; vertical-align: top; min-width: 9em; }
td.empty { background: repeating-linear-gradient(45deg, #fff, #fff 6px, #f5f5f5 6px, #f5f5f5 12px); }
table.members { border-collapse: collapse; width: 100%; }
table.members td { border-top: 1px solid #fff; }
td[data-status] { padding: 0.3em 0.5em; font-size: 0.85em; max-width: 22em; overflow-wrap: anywhere; }
td[data-status] .st { font-weight: 700; }
td[data-status] .sub, td[data-status] .facts { display: block; }
td[data-status] .err { display: block; font-family: monospace; font-size: 0.9em; }
td[data-status="missing"] { border: 1px dashed #b07d00; }
table.legend td { padding: 0.2em 0.6em; border: 1px solid #bbb; font-size: 0.85em; }
table.details th, table.details td { border: 1px solid #ccc; padding: 0.2em 0.5em; font-size: 0.85em;
  text-align: left; vertical-align: top; }
table.details td.err { font-family: monospace; overflow-wrap: anywhere; max-width: 40em; }
"""


def _status_css() -> str:
    return "".join(
        f'[data-status="{s}"], .s-{s} {{ background: {fill}; color: {text}; }}\n'
        for s, (fill, _, text) in COLOURS.items()
    )


def _link(dist_href: str | None, path: str) -> str | None:
    """The href of a dist file the page links; None where the page is served from the index
    (``dist_href`` None), which holds the index's pages and not the logs or dist's wheels."""
    if dist_href is not None:
        return _href(dist_href, path)
    inside = path.removeprefix(INDEX_DIR + "/")
    return _href("", inside) if inside != path else None


def _member(cell: ReportCell, *, several: bool, dist_href: str | None) -> str:
    ident = (
        f'data-variant="{_e(cell.label)}"' if cell.is_variant else f'data-pruned="{_e(cell.label)}"'
    )
    parts = [f'<span class="st">{_e(cell.status)}</span>']
    if several:
        parts.append(f'<span class="sub">{_e(cell.sub_label)}</span>')
    if cell.status in ("built", "cached"):
        facts = " · ".join(
            x for x in (human_size(cell.size), human_seconds(cell.seconds), "verified") if x
        )
        parts.append(f'<span class="facts">{_e(facts)}</span>')
        if cell.detail:  # a warning
            parts.append(f'<span class="err">{_e(cell.detail)}</span>')
    elif cell.status == "failed":
        parts.append(f'<span class="facts">{_e(human_seconds(cell.seconds))}</span>')
        parts.append(f'<span class="err">{_e(cell.detail)}</span>')
    links = [
        f'<a href="{href}">{name}</a>'
        for name, path in (("log", cell.log), ("index", cell.index))
        if path and (href := _link(dist_href, path))
    ]
    if cell.is_variant:
        links.append(f'<a href="#v-{_e(cell.label)}">details</a>')
    if links:
        parts.append(f'<span class="facts">{" · ".join(links)}</span>')
    return (
        f'<td {ident} data-status="{cell.status}" data-row="{_e(cell.row.key)}" '
        f'data-column="{_e(cell.column.label)}" title="{_e(cell.reason)}">{" ".join(parts)}</td>'
    )


def _grid_cell(members: tuple[ReportCell, ...], dist_href: str | None) -> str:
    if not members:
        return '<td class="empty" title="not in the plan or the manifest"></td>'
    if len(members) == 1:
        return _member(members[0], several=False, dist_href=dist_href)
    inner = "".join(f"<tr>{_member(m, several=True, dist_href=dist_href)}</tr>" for m in members)
    return f'<td class="several" data-count="{len(members)}"><table class="members">{inner}</table></td>'


def _grid(report: Report, dist_href: str | None) -> str:
    groups: list[tuple[str, int]] = []
    for column in report.columns:
        if groups and groups[-1][0] == column.backend:
            groups[-1] = (column.backend, groups[-1][1] + 1)
        else:
            groups.append((column.backend, 1))
    top = "".join(f'<th colspan="{n}">{_e(name)}</th>' for name, n in groups)
    abis = "".join(f"<th>{_e(c.abi)}</th>" for c in report.columns)
    lines = [
        '<table class="grid">',
        f'<thead><tr><th rowspan="2">torch \\ backend</th>{top}</tr>',
        f"<tr>{abis}</tr></thead>",
        "<tbody>",
    ]
    for row in report.rows:
        cells = "".join(_grid_cell(report.at(row, column), dist_href) for column in report.columns)
        lines.append(
            f'<tr data-row="{_e(row.key)}"><th scope="row">{_e(row.label)}</th>{cells}</tr>'
        )
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _details(report: Report, dist_href: str | None) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "variant",
            "status",
            "torch",
            "engine",
            "wheel",
            "size",
            "time",
            "verification",
            "links",
        )
    )
    rows = []
    for cell in report.cells:
        if not cell.is_variant:
            continue
        if cell.status in ("built", "cached"):
            verification = (
                f'<td class="err">passed; {_e(cell.detail)}</td>'
                if cell.detail
                else "<td>passed</td>"
            )
        elif cell.status == "failed":
            verification = f'<td class="err">{_e(cell.detail)}</td>'
        else:  # missing: why, and the command that builds it
            verification = f"<td>{_e(cell.reason)}</td>"
        links = [
            f'<a href="{href}">{name}</a>'
            for name, path in (("log", cell.log), ("index", cell.index))
            if path and (href := _link(dist_href, path))
        ]
        name = _e(posixpath.basename(cell.wheel or ""))
        wheel_href = _link(dist_href, cell.wheel) if cell.wheel else None
        wheel = f'<a href="{wheel_href}">{name}</a>' if wheel_href else name
        rows.append(
            f'<tr id="v-{_e(cell.label)}"><td>{_e(cell.label)}</td>'
            f'<td class="s-{cell.status}">{cell.status}</td><td>{_e(cell.torch_version or "")}</td>'
            f"<td>{_e(cell.engine or '')}</td><td>{wheel}</td><td>{_e(human_size(cell.size))}</td>"
            f"<td>{_e(human_seconds(cell.seconds))}</td>{verification}"
            f"<td>{' · '.join(links)}</td></tr>"
        )
    for other in report.unplaced:
        rows.append(
            f"<tr><td>{_e(other.variant_id)}</td><td>{_e(other.status)}</td>"
            f'<td colspan="7">not in the grid: {_e(other.reason)}</td></tr>'
        )
    return f'<table class="details">\n<tr>{head}</tr>\n' + "\n".join(rows) + "\n</table>"


def _pruned_list(report: Report) -> str:
    items = [
        f"<li><code>{_e(c.label)}</code>: {_e(c.reason.removeprefix('pruned: '))}</li>"
        for c in report.cells
        if not c.is_variant
    ]
    return "<ul>\n" + "\n".join(items or ["<li>none</li>"]) + "\n</ul>"


def render_html(
    report: Report, *, dist_href: str | None = ".", svg_href: str | None = SVG_NAME
) -> str:
    """The report page. ``dist_href``: the output directory relative to the page (links to
    logs, wheels and index pages are relative to it); None: the page is served from the index
    (``index`` writes it there), whose pages it links and not dist's files; ``svg_href``: the
    grid as SVG."""
    counts = report.counts()
    heading = (
        f"{report.project} {report.version}: build report"
        if report.project
        else "wheelfactory matrix report"
    )
    release = " · ".join(
        x
        for x in (
            f"{report.project} {report.version}" if report.project else "",
            f"last built {report.updated}" if report.updated else "",
        )
        if x
    )
    data = " ".join(f'data-{status}="{counts[status]}"' for status in STATUSES)
    legend = "".join(
        f'<td class="s-{s}" data-legend="{s}"><b>{s}</b>: {_e(LEGEND[s])}</td>' for s in STATUSES
    )
    sources = [
        f'<a href="{_href(dist_href, manifest.MANIFEST)}">{manifest.MANIFEST}</a>'
        if dist_href is not None
        else manifest.MANIFEST
    ]
    sources.append(
        f"plan: {_e(report.matrix)}"
        if report.matrix
        else "no matrix (pruned combinations not shown)"
    )
    if report.has_index or dist_href is None:
        sources.append(f'<a href="{_link(dist_href, INDEX_DIR + "/index.html")}">package index</a>')
    if svg_href:
        sources.append(f'<a href="{_href("", svg_href)}">grid as SVG</a>')
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{_e(heading)}</title>
<style>{CSS}{_status_css()}</style>
</head>
<body>
<h1>{_e(heading)}</h1>
<p class="release">{_e(release)}</p>
<p class="summary" id="summary" {data}>{_e(report.summary())}</p>
<p class="sources">{" · ".join(sources)}</p>
<table class="legend"><tr>{legend}</tr></table>
{_grid(report, dist_href)}
<h2>Variants</h2>
{_details(report, dist_href)}
<h2>Pruned combinations</h2>
{_pruned_list(report)}
</body>
</html>
"""


# ------------------------------------------------------------------------------------------ SVG

_PAD = 10
_ROW_HEAD = 190
_COL = 170
_LINE = 15
_ITEM = 2 * _LINE + 6
_HEAD = 2 * 20
_HEADER_STYLE = 'fill="#f4f4f4" stroke="#bbbbbb"'


def _svg_text(
    x: float,
    y: float,
    text: str,
    *,
    size: int = 12,
    weight: str = "normal",
    fill: str = "#1a1a1a",
    anchor: str = "start",
) -> str:
    return (
        f'<text x="{x:g}" y="{y:g}" font-size="{size}" font-weight="{weight}" fill="{fill}" '
        f'text-anchor="{anchor}">{_e(text)}</text>'
    )


def _svg_member(cell: ReportCell, x: float, y: float, several: bool) -> str:
    fill, border, ink = COLOURS[cell.status]
    ident = (
        f'data-variant="{_e(cell.label)}"' if cell.is_variant else f'data-pruned="{_e(cell.label)}"'
    )
    sub = f'<tspan font-weight="normal"> {_e(cell.sub_label)}</tspan>' if several else ""
    if cell.status in ("built", "cached"):
        second = " · ".join(x for x in (human_size(cell.size), human_seconds(cell.seconds)) if x)
    elif cell.status == "failed":
        second = cell.detail if len(cell.detail) <= 24 else cell.detail[:23] + "…"
    else:
        second = ""
    dashes = ' stroke-dasharray="4 2"' if cell.status == "missing" else ""
    parts = [
        f'<g {ident} data-status="{cell.status}"><title>{_e(cell.label)}: {_e(cell.reason)}</title>',
        (
            f'<rect x="{x + 1:g}" y="{y + 1:g}" width="{_COL - 2}" height="{_ITEM - 2}" fill="{fill}" '
            f'stroke="{border}"{dashes}/>'
        ),
        (
            f'<text x="{x + 6:g}" y="{y + _LINE:g}" font-size="12" font-weight="bold" fill="{ink}">'
            f"{_e(cell.status)}{sub}</text>"
        ),
    ]
    if second:
        parts.append(_svg_text(x + 6, y + 2 * _LINE, second, size=11, fill=ink))
    parts.append("</g>")
    return "".join(parts)


def render_svg(report: Report) -> str:
    """The grid as a standalone SVG (rects and text), with the page's statuses and colours."""
    heights = [
        max([len(report.at(row, c)) for c in report.columns] + [1]) * _ITEM for row in report.rows
    ]
    legend_y = _PAD + 22
    top = legend_y + 30
    width = max(_PAD * 2 + _ROW_HEAD + _COL * len(report.columns), 5 * 130 + 2 * _PAD)
    height = top + _HEAD + sum(heights) + _PAD
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">'
        ),
        "<title>{_e(heading)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        _svg_text(_PAD, _PAD + 12, report.summary(), size=13, weight="bold"),
    ]
    for n, status in enumerate(STATUSES):
        fill, border, ink = COLOURS[status]
        x = _PAD + n * 130
        out.append(
            f'<g data-legend="{status}"><title>{_e(LEGEND[status])}</title>'
            f'<rect x="{x}" y="{legend_y}" width="14" height="14" fill="{fill}" stroke="{border}"/>'
            f"{_svg_text(x + 20, legend_y + 12, status, fill=ink)}</g>"
        )
    x0 = _PAD + _ROW_HEAD
    previous = None
    for i, column in enumerate(report.columns):
        x = x0 + i * _COL
        out.append(f'<rect x="{x}" y="{top}" width="{_COL}" height="{_HEAD}" {_HEADER_STYLE}/>')
        if column.backend != previous:
            out.append(_svg_text(x + 6, top + 15, column.backend, weight="bold"))
        out.append(_svg_text(x + 6, top + 34, column.abi, size=11))
        previous = column.backend
    out.append(f'<rect x="{_PAD}" y="{top}" width="{_ROW_HEAD}" height="{_HEAD}" {_HEADER_STYLE}/>')
    out.append(_svg_text(_PAD + 6, top + 25, "torch \\ backend", weight="bold"))
    y = top + _HEAD
    for row, row_height in zip(report.rows, heights):
        out.append(
            f'<rect x="{_PAD}" y="{y}" width="{_ROW_HEAD}" height="{row_height}" {_HEADER_STYLE}/>'
        )
        out.append(_svg_text(_PAD + 6, y + _LINE + 2, row.label, weight="bold"))
        for i, column in enumerate(report.columns):
            x = x0 + i * _COL
            out.append(
                f'<rect x="{x}" y="{y}" width="{_COL}" height="{row_height}" fill="#fafafa" '
                f'stroke="#bbbbbb"/>'
            )
            members = report.at(row, column)
            for n, cell in enumerate(members):
                out.append(_svg_member(cell, x, y + n * _ITEM, len(members) > 1))
        y += row_height
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------- write


@dataclass(frozen=True)
class Written:
    html: Path  # ``-``: went to standard output, as ``stdout``
    svg: Path
    stdout: str = ""  # the file written as ``-``, for the caller to print


def report_paths(
    dist: Path, *, html_path: Path | None = None, svg_path: Path | None = None
) -> tuple[Path, Path]:
    """Where the page and the SVG go: ``--html`` (default ``dist/report.html``) and ``--svg``
    (default: beside the page, ``report.svg`` in dist or the page's name with ``.svg``; dist's
    when the page goes to stdout). ``-`` stays ``-`` (stdout); other paths are made absolute."""
    page = Path(STDOUT) if is_stdout(html_path) else (html_path or dist / HTML_NAME).absolute()
    if svg_path is not None:
        svg = Path(STDOUT) if is_stdout(svg_path) else svg_path.absolute()
    else:
        svg = (
            dist / SVG_NAME
            if html_path is None or is_stdout(html_path)
            else page.with_suffix(".svg")
        ).absolute()
    return page, svg


def write_report(
    report: Report, dist: Path, *, html_path: Path | None = None, svg_path: Path | None = None
) -> Written:
    """Write the page and the SVG (``report_paths``), each atomically; one of them may be ``-``:
    its text is returned in ``Written.stdout`` (a page on stdout links relative to the working
    directory; a page whose SVG is on stdout does not link it). A failed write is WriteFailed."""
    page, svg = report_paths(dist, html_path=html_path, svg_path=svg_path)
    if is_stdout(page) and is_stdout(svg):
        raise UsageError("--html - and --svg -: only one of them can go to standard output")
    page_dir = Path.cwd() if is_stdout(page) else page.parent
    dist_href = Path(os.path.relpath(dist.absolute(), page_dir)).as_posix()
    svg_href = None if is_stdout(svg) else Path(os.path.relpath(svg, page_dir)).as_posix()
    texts = (
        (svg, render_svg(report), "the report's SVG"),
        (page, render_html(report, dist_href=dist_href, svg_href=svg_href), "the report"),
    )
    for path, _, what in texts:
        if not is_stdout(path):
            _make_parent(path, what)
    stdout = ""
    for path, text, what in texts:
        if is_stdout(path):
            stdout = text
        else:
            atomic.write_text(path, text, what=what)
    return Written(page, svg, stdout)


def served_report(dist: Path, entries: Mapping[str, manifest.Entry], listed: frozenset[str]) -> str:
    """The build report as `index` writes it into the index (publish/index.py REPORT_PAGE): from
    the manifest alone (`report -m` adds the plan's pruned and missing variants), linking the
    index's pages of the ``listed`` variants and not dist's files, which the index does not hold."""
    facts = replace(probe_dist(dist, entries), indexed=listed)
    return render_html(build_report(entries, facts=facts), dist_href=None, svg_href=None)


def _make_parent(path: Path, what: str) -> None:
    """Make the output's directory; a file in the way is a UsageError, any other failure WriteFailed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(
            f"cannot write {what} {path}: {path.parent} is not a directory (a file is in the way)"
        ) from None
    except OSError as exc:
        raise WriteFailed(
            f"cannot write {what} {path}: cannot make {path.parent} ({exc.strerror or exc})"
        ) from None
