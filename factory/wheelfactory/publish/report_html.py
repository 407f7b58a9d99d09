"""The matrix report (publish/report.py) as an HTML page: the grid, each variant's details and
the pruned combinations, linking the logs, wheels and index pages of the output directory."""

from __future__ import annotations

import os
import posixpath
import urllib.parse
from html import escape as _e

from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.report import (
    COLOURS,
    LEGEND,
    STATUSES,
    Report,
    ReportCell,
    human_seconds,
    human_size,
)
from wheelfactory.runner import manifest

SVG_NAME = "report.svg"


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
    inside = path.removeprefix(INDEX_LINK + "/")
    return _href("", inside) if inside != path else None


def _links(cell: ReportCell, dist_href: str | None) -> list[str]:
    """The cell's log and index page, linked where the page can reach them."""
    return [
        f'<a href="{href}">{name}</a>'
        for name, path in (("log", cell.log), ("index", cell.index))
        if path and (href := _link(dist_href, path))
    ]


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
    links = _links(cell, dist_href)
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
        links = _links(cell, dist_href)
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
        sources.append(
            f'<a href="{_link(dist_href, INDEX_LINK + "/index.html")}">package index</a>'
        )
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
