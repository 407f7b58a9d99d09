"""docs/publishing.md's claims about the index layout and what installers read, checked against an
index of two releases. The behaviour behind each sentence of "What installers read" is tested where
named: the installers' requests in test_installers.py, the negotiation in test_serve_negotiation.py,
the selector's choice in test_index_metadata.py; here, that the page names what the code does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.publish.dist_fakes import make_dist
from tests.publish.test_index_metadata import BASE, planned
from tests.testkit import docs_text, markdown_section
from wheelfactory.publish.collect import collect
from wheelfactory.publish.generations import write_index
from wheelfactory.publish.listing import wheels_from_listing
from wheelfactory.publish.pages import plan_index
from wheelfactory.publish.reporting import served_report
from wheelfactory.publish.serve import REPRESENTATIONS, negotiate
from wheelfactory.publish.variant_metadata import variant_metadata
from wheelfactory.runner import manifest

PAGE = docs_text("publishing.md")
LAYOUT = markdown_section(PAGE, "## `index`, `serve`, `export`, `which`")
INSTALLERS = markdown_section(PAGE, "### What installers read")
CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """0.1.0 already published, 0.2.0 from this dist: the pages a second publish writes (with the
    new release's files only: the old ones are on the target)."""
    tmp = tmp_path_factory.mktemp("docs")
    make_dist(tmp / "first")
    make_dist(tmp / "second", version="0.2.0")
    published = json.loads(dict(planned(tmp / "first").pages)["index.json"])
    entries = manifest.read(tmp / "second")
    wheels, skipped = collect(tmp / "second", entries)
    pages, links = variant_metadata(wheels, tmp / "second")
    report = served_report(tmp / "second", entries, frozenset(w.variant_id for w in wheels))  # as `index` does
    plan = plan_index(wheels_from_listing(published, where="index.json") + wheels, skipped, base_url=BASE,
                      extra_pages=pages, extra_links=links, report=report)
    root, _ = write_index(tmp / "second", plan)
    return root


def table_rows() -> list[tuple[list[str], str]]:
    rows = []
    for line in LAYOUT.splitlines():
        if line.startswith("| `"):
            first, what = line.split("|")[1:3]
            rows.append((re.findall(r"`([^`]+)`", first), what))
    return rows


def instances(pattern: str, root: Path) -> list[Path]:
    """The paths a documented pattern stands for in the generation (``<wheel>``: each wheel)."""
    pattern = pattern.replace("<variant>", CPU).replace("<project>", "tiny").replace("<version>", "0.2.0")
    if "<wheel>" in pattern:
        folder = root / pattern.split("<wheel>")[0]
        return [folder / (w.name + pattern.split("<wheel>")[1]) for w in sorted(folder.glob("*.whl"))]
    return [root / pattern]


def test_every_path_in_the_layout_table_exists(generation: Path) -> None:
    rows = table_rows()
    assert len(rows) >= 10
    for patterns, _ in rows:
        for pattern in patterns:
            found = instances(pattern, generation)
            assert found, pattern
            for path in found:
                assert (path / "index.html").is_file() if pattern.endswith("/") else path.is_file(), path


def test_the_json_row_names_the_keys_the_pages_have(generation: Path) -> None:
    (what,) = [what for patterns, what in table_rows() if "<variant>/simple/index.json" in patterns]
    keys = re.findall(r"`([^`]+)`", what)
    page = json.loads((generation / CPU / "simple" / "tiny" / "index.json").read_text())
    assert "api-version 1.1" in what and page["meta"] == {"api-version": "1.1"}
    assert "versions" in keys and len(page["versions"]) == 2
    for key in (k for k in keys if k != "versions"):
        assert all(key in entry for entry in page["files"]), key


def test_the_tables_releases_are_as_it_says(generation: Path) -> None:
    listing = json.loads((generation / "index.json").read_text())
    assert [v["version"] for v in listing["variants"] if v["id"] == CPU] == ["0.1.0+cputorch2.13", "0.2.0+cputorch2.13"]
    page = (generation / CPU / "simple" / "tiny" / "index.html").read_text()
    assert page.index("0.1.0%2Bcputorch2.13") < page.index("0.2.0%2Bcputorch2.13")  # oldest first
    for attribute in ("#sha256=", "data-requires-python", "data-core-metadata", "data-dist-info-metadata"):
        assert attribute in page and f"`{attribute}`" in LAYOUT
    assert "tiny==0.2.0+" in (generation / CPU / "requirements.txt").read_text()
    assert "tiny==0.1.0+" in (generation / CPU / "requirements-0.1.0.txt").read_text()
    assert "`requirements-0.1.0.txt`" in LAYOUT


def test_what_installers_read_names_what_serve_sends(generation: Path) -> None:
    named = set(re.findall(r"`((?:application|text)/[^`]+)`", INSTALLERS))
    assert named == {"application/vnd.pypi.simple.v1+json", "application/vnd.pypi.simple.v1+html", "text/html"}
    for media in named:
        assert negotiate(media)[1].split(";")[0] == media
    assert negotiate("*/*")[0] == "index.html"  # "a browser or curl gets HTML"
    assert {r[0] for r in REPRESENTATIONS} >= named
    assert "`Vary: Accept`" in INSTALLERS and "`%2B`" in INSTALLERS
    page = (generation / CPU / "simple" / "tiny" / "index.html").read_text()
    assert "%2B" in page and not re.search(r'href="[^"]*\+', page)
    entry = json.loads((generation / CPU / "simple" / "tiny" / "index.json").read_text())["files"][0]
    assert "`_provenance`" in INSTALLERS and "_provenance" in entry and "provenance" not in entry


def test_the_synopsis_options_exist() -> None:
    from wheelfactory.cli.main import cli

    synopsis = re.search(r"^wheelfactory serve .*$", LAYOUT, re.M)
    assert synopsis is not None
    help_text = CliRunner().invoke(cli, ["serve", "--help"]).output
    for option in re.findall(r"(--?[a-z-]+)", synopsis.group(0)):
        assert option in help_text, option
