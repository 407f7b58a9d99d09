"""wheelfactory report: the grid model, the HTML page and the SVG, escaping, determinism, atomic writes."""

from __future__ import annotations

import re

import dataclasses
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.testkit import REPO
from wheelfactory.errors import WriteFailed
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import Plan, expand
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.publish.report import Column, Report, Row, build_report, human_size, probe_dist
from wheelfactory.publish.report_html import render_html
from wheelfactory.publish.report_svg import render_svg
from wheelfactory.publish.reporting import write_report
from wheelfactory.runner import manifest

FAILED = "torch26-cxx98-cpu-x86_64-linux"
CACHED = "torch213-cxx11-cu130-x86_64-linux"
MATRIX = """
[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu"]
python = ["abi3", "3.12"]

[[exclude]]
torch = "2.6"
cxx11_abi = true
"""


class Cells(HTMLParser):
    """Every element carrying data-status, with its attributes (the members of the grid)."""

    def __init__(self) -> None:
        super().__init__()
        self.members: list[dict[str, str]] = []
        self.summary: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-status" in values:
            self.members.append(values)
        if tag == "p" and values.get("id") == "summary":
            self.summary = values


def parse(page: str) -> Cells:
    cells = Cells()
    cells.feed(page)
    cells.close()
    return cells


def plan_of(text: str) -> Plan:
    table = load_table()
    return expand(parse_matrix(TomlDocument.from_text(text, "matrix.toml"), table, base_dir=REPO), table)


def dist_with_every_status(dist: Path) -> dict[str, manifest.Entry]:
    entries = make_dist(dist, failed=FAILED)
    entries[CACHED] = dataclasses.replace(entries[CACHED], status="cached", seconds=0.01, size=3 * 2 ** 20)
    manifest.write(dist, entries)
    return entries


def test_cells_equal_the_manifest(tmp_path: Path) -> None:
    entries = dist_with_every_status(tmp_path)
    page = render_html(build_report(manifest.read(tmp_path), facts=probe_dist(tmp_path, entries)))
    members = parse(page).members
    assert {m["data-variant"]: m["data-status"] for m in members} == {v: e.status for v, e in entries.items()}
    by_id = {m["data-variant"]: m for m in members}
    assert by_id[CACHED]["data-row"] == "2.13" and by_id[CACHED]["data-column"] == "cu130 cxx11"
    assert by_id[FAILED]["data-row"] == "2.6" and by_id[FAILED]["data-column"] == "cpu cxx98"
    assert by_id[FAILED]["title"] == "failed: boom"
    assert "passed verification" in by_id[CACHED]["title"] and str(entries[CACHED].wheel) in by_id[CACHED]["title"]
    assert parse(page).summary["data-built"] == "1" and parse(page).summary["data-failed"] == "1"
    assert "3.0 MiB" in page  # the manifest's size, human readable


def test_rows_are_torch_releases_by_version_and_columns_only_what_occurs(tmp_path: Path) -> None:
    entries = dist_with_every_status(tmp_path)
    report = build_report(entries)
    assert report.rows == (Row("2.6"), Row("2.13"))  # by version, not as strings
    assert report.columns == (Column("cpu", "cxx11"), Column("cpu", "cxx98"), Column("cu130", "cxx11"))
    assert report.at(Row("2.6"), Column("cu130", "cxx11")) == ()


def test_plan_adds_pruned_combinations_with_reasons_and_missing_variants(tmp_path: Path) -> None:
    entries = {k: v for k, v in make_dist(tmp_path).items() if k == "torch213-cxx11-cpu-x86_64-linux"}
    plan = plan_of(MATRIX)
    report = build_report(entries, plan, matrix="matrix.toml")
    members = parse(render_html(report)).members
    variants = {m["data-variant"]: m["data-status"] for m in members if "data-variant" in m}
    assert variants == {"torch213-cxx11-cpu-x86_64-linux": "built",
                        "torch213-cxx11-cpu-x86_64-linux-cp312": "missing",
                        "torch26-cxx98-cpu-x86_64-linux": "missing",
                        "torch26-cxx98-cpu-x86_64-linux-cp312": "missing"}
    pruned = {m["data-pruned"]: m["title"] for m in members if "data-pruned" in m}
    assert len(pruned) == len(plan.pruned)
    assert pruned["torch26-cxx11-cpu-x86_64-linux"].startswith("pruned: excluded by [[exclude]] #1")
    assert "ships no pre-cxx11 wheels" in pruned["torch213-cxx98-cpu-*"]
    assert all(m["data-status"] == "pruned" for m in members if "data-pruned" in m)
    missing = next(m for m in members if m.get("data-variant") == "torch26-cxx98-cpu-x86_64-linux")
    assert "planned by matrix.toml" in missing["title"]
    # and said on the page, not only on hover: why, and the command that builds it
    row = re.search(r'<tr id="v-torch26-cxx98-cpu-x86_64-linux">.*?</tr>', render_html(report))
    assert row and "planned by matrix.toml, not in the manifest: build it with" in row.group(0), row.group(0)


def test_several_variants_in_one_cell_are_all_listed() -> None:
    report = build_report({}, plan_of(MATRIX))
    together = report.at(Row("2.13"), Column("cpu", "cxx11"))
    assert [c.label for c in together] == ["torch213-cxx11-cpu-x86_64-linux",
                                           "torch213-cxx11-cpu-x86_64-linux-cp312"]
    page = render_html(report)
    assert page.count('data-count="2"') >= 1
    assert "cp312 x86_64" in page and "abi3 x86_64" in page


def test_everything_is_escaped(tmp_path: Path) -> None:
    nasty = '<script>alert("x")</script> & \'q\'\nsecond line'
    entries = {
        FAILED: manifest.Entry(status="failed", wheel=None, sha256=None, seconds=1.0, key="k",
                               log=f"{FAILED}/build.log", error=nasty),
        "<b>not-an-id</b>": manifest.Entry(status="built", wheel=None, sha256=None, seconds=1.0, key="k", log=None),
    }
    report = build_report(entries, matrix='m<"atrix>.toml')
    page = render_html(report)
    assert "<script>" not in page and "<b>not-an-id" not in page and 'm<"atrix' not in page
    (member,) = parse(page).members
    assert member["title"] == f"failed: {nasty}"  # the full error on hover, unescaped by the parser
    first_line = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;q&#x27;</span>"
    assert first_line in page  # the cell shows the first line only
    svg = render_svg(report)
    ET.fromstring(svg)  # well-formed XML despite the input
    assert "<script>" not in svg


def test_svg_has_one_shape_per_member_with_the_statuses(tmp_path: Path) -> None:
    entries = dist_with_every_status(tmp_path)
    report = build_report(entries, plan_of(MATRIX))
    root = ET.fromstring(render_svg(report))
    groups = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if "data-status" in g.attrib]
    drawn = {g.attrib["data-variant"]: g.attrib["data-status"] for g in groups if "data-variant" in g.attrib}
    assert drawn == {c.label: c.status for c in report.cells if c.is_variant}
    assert sum("data-pruned" in g.attrib for g in groups) == report.counts()["pruned"]
    assert all(g.find("{http://www.w3.org/2000/svg}title") is not None for g in groups)


def test_same_input_gives_the_same_bytes(tmp_path: Path) -> None:
    entries = dist_with_every_status(tmp_path / "dist")
    plan = plan_of(MATRIX)
    shuffled = dict(reversed(list(entries.items())))
    one, two = build_report(entries, plan), build_report(shuffled, plan)
    assert render_html(one) == render_html(two) and render_svg(one) == render_svg(two)
    first = write_report(one, tmp_path / "dist")
    before = first.html.read_bytes(), first.svg.read_bytes()
    write_report(two, tmp_path / "dist")
    assert (first.html.read_bytes(), first.svg.read_bytes()) == before


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = dist_with_every_status(tmp_path)
    written = write_report(build_report(entries), tmp_path)
    assert written.html == tmp_path / "report.html" and written.svg == tmp_path / "report.svg"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    old = written.html.read_bytes()

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(WriteFailed, match="disk full"):
        write_report(build_report({}), tmp_path)
    assert written.html.read_bytes() == old  # the reader still sees the previous report
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_links_are_relative_to_the_page(tmp_path: Path) -> None:
    from tests.publish.test_index import index

    dist = tmp_path / "dist"
    entries = dist_with_every_status(dist)
    for entry in entries.values():
        assert entry.log is not None
        (dist / entry.log).parent.mkdir(parents=True, exist_ok=True)
        (dist / entry.log).write_text("log\n")
    index(dist)
    page_path = tmp_path / "elsewhere" / "page.html"
    written = write_report(build_report(entries, facts=probe_dist(dist, entries)), dist, html_path=page_path)
    assert written.svg == page_path.with_suffix(".svg")
    hrefs = [h for h in _hrefs(written.html.read_text()) if not h.startswith("#")]
    assert any(h.endswith("/build.log") for h in hrefs) and any("/simple/index.html" in h for h in hrefs)
    for href in hrefs:
        from urllib.parse import unquote
        assert (page_path.parent / unquote(href)).exists(), href


def _hrefs(page: str) -> list[str]:
    found: list[str] = []

    class Links(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(v or "" for k, v in attrs if tag == "a" and k == "href")

    Links().feed(page)
    return found


def test_unparseable_ids_are_listed_not_dropped() -> None:
    report = build_report({"nonsense": manifest.Entry(status="built", wheel=None, sha256=None, seconds=1.0, key="k",
                                                      log=None)})
    assert report.cells == () and [u.variant_id for u in report.unplaced] == ["nonsense"]
    assert "1 manifest entry not in the grid" in report.summary()
    assert "nonsense" in render_html(report)


def test_human_sizes() -> None:
    assert [human_size(n) for n in (None, 512, 2048, 1510987, 3 * 1024 ** 3)] == \
        ["", "512 B", "2.0 KiB", "1.4 MiB", "3.0 GiB"]


def test_stable_abi_builds_get_their_own_row() -> None:
    bare = manifest.Entry(status="built", wheel=None, sha256=None, seconds=1.0, key="k", log=None)
    entries = {"torch-stable-abi210-cpu-x86_64-linux": bare, "torch29-cxx11-cpu-x86_64-linux": bare}
    report = build_report(entries)
    assert [r.label for r in report.rows] == ["torch 2.9", "stable ABI, torch >= 2.10"]
    assert isinstance(report, Report)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "report", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def test_cli_without_a_manifest_says_to_build_first(tmp_path: Path) -> None:
    result = cli("-o", str(tmp_path / "dist"), cwd=tmp_path)
    assert result.returncode == 2
    assert "run `wheelfactory build" in result.stderr and result.stderr.count("\n") == 1


def test_cli_writes_both_files_and_uses_matrix_toml_when_present(tmp_path: Path) -> None:
    dist_with_every_status(tmp_path / "dist")
    (tmp_path / "matrix.toml").write_text(MATRIX)
    result = cli(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{tmp_path / 'dist' / 'report.html'}\n{tmp_path / 'dist' / 'report.svg'}\n" in result.stdout
    assert "pruned combination(s)" in result.stdout
    members = parse((tmp_path / "dist" / "report.html").read_text()).members
    assert any("data-pruned" in m for m in members)
    result = cli("--html", "out/r.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "r.html").is_file() and (tmp_path / "out" / "r.svg").is_file()


def test_a_variant_whose_project_tests_failed_shows_their_summary() -> None:
    excerpt = "FAILED tests/test_a.py::test_x - AssertionError: boom\n1 failed, 2 passed in 0.1s"
    entries = {
        FAILED: manifest.Entry(status="failed", wheel=None, sha256=None, seconds=1.0, key="k", log=None,
                               error=f"{FAILED}: the project's tests failed (pytest): FAILED tests/test_a.py::test_x",
                               tests={"command": "pytest", "passed": False, "excerpt": excerpt}),
        CACHED: manifest.Entry(status="cached", wheel="w.whl", sha256=None, seconds=1.0, key="k", log=None,
                               tests={"command": "python -m pytest -q tests", "passed": True, "excerpt": None}),
    }
    report = build_report(entries, None)
    (failed,) = [c for c in report.cells if c.label == FAILED]
    (cached,) = [c for c in report.cells if c.label == CACHED]
    assert failed.status == "failed" and failed.reason.endswith(excerpt)
    assert "its project's tests (python -m pytest -q tests)" in cached.reason
    assert "AssertionError: boom" in render_html(report)
