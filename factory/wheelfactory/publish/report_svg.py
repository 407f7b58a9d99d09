"""The matrix report's grid (publish/report.py) as a standalone SVG: rects and text, with the
page's statuses and colours."""

from __future__ import annotations

from html import escape as _e

from wheelfactory.publish.report import (
    COLOURS,
    LEGEND,
    STATUSES,
    Report,
    ReportCell,
    human_seconds,
    human_size,
)

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
