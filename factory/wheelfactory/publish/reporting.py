"""``wheelfactory report``: the matrix report (publish/report.py) written as a page and an SVG
(report_html.py, report_svg.py), each atomically, beside the output directory or to standard
output; and the page ``index`` serves in the index."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from wheelfactory.errors import UsageError
from wheelfactory.plan.read import read_matrix
from wheelfactory.project.kinds import project_plan
from wheelfactory.publish.report import Report, build_report, probe_dist
from wheelfactory.publish.report_html import SVG_NAME, render_html
from wheelfactory.publish.report_svg import render_svg
from wheelfactory.runner import manifest
from wheelfactory.support import atomic
from wheelfactory.support.outputs import STDOUT, check_outputs, is_stdout
from wheelfactory.support.paths import StrPath, safe_member

HTML_NAME = "report.html"


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
            atomic.make_parent(path, what=what)
    stdout = ""
    for path, text, what in texts:
        if is_stdout(path):
            stdout = text
        else:
            atomic.write_text(path, text, what=what)
    return Written(page, svg, stdout)


def served_report(dist: Path, entries: Mapping[str, manifest.Entry], listed: frozenset[str]) -> str:
    """The build report as `index` writes it into the index (publish/pages.py REPORT_PAGE): from
    the manifest alone (`report -m` adds the plan's pruned and missing variants), linking the
    index's pages of the ``listed`` variants and not dist's files, which the index does not hold."""
    facts = replace(probe_dist(dist, entries), indexed=listed)
    return render_html(build_report(entries, facts=facts), dist_href=None, svg_href=None)


@dataclass(frozen=True)
class Reported:
    report: Report
    written: Written


def report_dist(
    out: StrPath = "dist",
    *,
    matrix: StrPath | None = None,
    compat: StrPath | None = None,
    html: StrPath | None = None,
    svg: StrPath | None = None,
) -> Reported:
    """Write the matrix report of ``out``'s manifest (``html``, default DIST/report.html, and its
    grid as ``svg``, default beside the page; ``-``: standard output, in ``written.stdout``), with
    the pruned and missing variants of ``matrix``'s plan (default: matrix.toml if it exists).
    Each output is checked before anything is read: a device, a directory or one of the inputs is
    refused. UsageError when the manifest lists nothing."""
    shown = Path(out)
    dist = shown.resolve()
    html_path = Path(html) if html is not None else None
    svg_path = Path(svg) if svg is not None else None
    if is_stdout(html_path) and is_stdout(svg_path):
        raise UsageError("--html - and --svg -: only one of them can go to standard output")
    matrix_path = Path(matrix) if matrix is not None else None
    if matrix_path is None and Path("matrix.toml").is_file():
        matrix_path = Path("matrix.toml")
    compat_path = Path(compat) if compat is not None else None
    page, svg_file = report_paths(dist, html_path=html_path, svg_path=svg_path)
    inputs: dict[str, Path | None] = {
        "the manifest": dist / manifest.MANIFEST,
        "the matrix": matrix_path,
        "the compatibility table": compat_path,
    }
    # Checked before the manifest is read: a device or a directory as a target is refused first.
    outputs = {"--html": html_path} if html_path else {"the default page": page}
    outputs.update({"--svg": svg_path} if svg_path else {"the default SVG": svg_file})
    check_outputs(outputs, inputs, writes="the report")
    entries = manifest.read_listed(dist, shown=shown)
    check_outputs(outputs, _linked(dist, entries), writes="the report")
    planned = None
    if matrix_path is not None:
        spec, table = read_matrix(matrix_path, compat_path)
        planned = project_plan(spec, table)
    report = build_report(
        entries,
        planned,
        facts=probe_dist(dist, entries),
        matrix=str(matrix_path) if matrix_path is not None else None,
    )
    return Reported(report, write_report(report, dist, html_path=html_path, svg_path=svg_path))


def _linked(dist: Path, entries: Mapping[str, manifest.Entry]) -> dict[str, Path | None]:
    """The wheels and logs the page links (it reads them for their sizes): none may be an output."""
    linked: dict[str, Path | None] = {}
    for vid, entry in sorted(entries.items()):
        for what, name in (("wheel", entry.wheel), ("build log", entry.log)):
            member = safe_member(name) if isinstance(name, str) else None
            if member is not None:
                linked[f"the {what} of {vid}"] = dist / member
    return linked
