"""wheelfactory report in a real browser: Debian's headless chromium renders the page built from the
Docker tier's dist/, every manifest variant has its cell with the manifest's status, the plan's
pruned combinations are there with their reasons, and screenshots of the page and of the SVG are
kept as test artifacts (WHEELFACTORY_TEST_ARTIFACTS, default .cache/tests/artifacts).

Chromium comes from Debian (`apt-get install -y chromium`). Where CI=true (or
WHEELFACTORY_REQUIRE_DOCKER=1) a missing chromium fails the test; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tests.docker.docker_helpers import REQUIRED
from tests.testkit import TEST_CACHE, chromium_or_skip
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import VariantId
from wheelfactory.plan.matrix import load_matrix

# slow: the docker_build fixture builds two wheels in Docker when its cache is cold or stale (minutes);
# with it built, the browser part takes ~3 s.
pytestmark = [pytest.mark.docker, pytest.mark.slow]

CACHE = TEST_CACHE
ARTIFACTS = Path(os.environ.get("WHEELFACTORY_TEST_ARTIFACTS", CACHE / "artifacts"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip("is needed for the report test", required=REQUIRED)


@pytest.fixture
def reported(docker_build: Path, tmp_path: Path) -> Path:
    """A copy of the Docker tier's dist/ (report links are relative to it; the cached one stays
    untouched) with `wheelfactory report` run on it against the matrix that built it. Not an index
    another module wrote there (test_distribution_e2e indexes the shared dist): tests here make
    their own."""
    dist = tmp_path / "dist"
    shutil.copytree(docker_build / "dist", dist, symlinks=True,
                    ignore=shutil.ignore_patterns(".work", "report.*", "index", ".index"))
    matrix = docker_build / "matrix.toml"
    command = [sys.executable, "-m", "wheelfactory", "report", "-m", str(matrix), "-o", str(dist)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{dist / 'report.html'}\n{dist / 'report.svg'}\n" in result.stdout
    return dist


def browse(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}"
    return result


class Members(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.legend: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-status" in values:
            self.cells.append(values)
        if "data-legend" in values:
            self.legend.append(values["data-legend"])


def screenshot(chromium: str, profile: Path, url: str, name: str, size: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / name
    target.unlink(missing_ok=True)
    browse(chromium, profile, f"--screenshot={target}", f"--window-size={size}", url)
    data = target.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 2000, f"{target} is not a rendered PNG"
    width, height = struct.unpack(">II", data[16:24])  # IHDR: the window we asked for
    assert f"{width},{height}" == size
    return target


def test_report_renders_in_chromium_and_matches_the_manifest(chromium: str, reported: Path, docker_build: Path,
                                                             tmp_path: Path) -> None:
    page = reported / "report.html"
    dom = browse(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert "fusedops 0.1.0: build report" in dom  # chromium rendered our page (its release), not an error page
    rendered = Members()
    rendered.feed(dom)
    assert rendered.legend[:5] == ["built", "cached", "failed", "missing", "pruned"]

    entries = json.loads((reported / "manifest.json").read_text())["variants"]
    assert entries, "the Docker tier's manifest is empty"
    variants = {c["data-variant"]: c for c in rendered.cells if "data-variant" in c}
    for vid, entry in entries.items():
        assert vid in variants, f"{vid} has no cell"
        assert variants[vid]["data-status"] == entry["status"], vid
        key = VariantId.parse(vid)  # in its torch row and backend x ABI column
        assert variants[vid]["data-row"] == (f"stable-{key.torch}" if key.stable_abi else key.torch)
        assert variants[vid]["data-column"] == f"{key.backend.build_name} {'cxx11' if key.cxx11_abi else 'cxx98'}"
        if entry["status"] == "failed":
            assert entry["error"].splitlines()[0] in variants[vid]["title"]
    assert {v for v, c in variants.items() if c["data-status"] != "missing"} == set(entries)

    table = load_table()
    plan = expand(load_matrix(docker_build / "matrix.toml", table), table)
    assert {v.id for v in plan.variants} <= set(variants)  # planned, built or not
    pruned = [c for c in rendered.cells if "data-pruned" in c]
    assert len(pruned) == len(plan.pruned) and plan.pruned, "the pruned combinations are not all there"
    assert all(c["data-status"] == "pruned" for c in pruned)
    titles = {c["title"] for c in pruned}
    for combination in plan.pruned:
        assert f"pruned: {combination.reason}" in titles
    assert "torch26-cxx11-cpu-x86_64-linux" in {c["data-pruned"] for c in pruned}  # the matrix's [[exclude]]

    shot = screenshot(chromium, tmp_path / "profile", page.as_uri(), "report.png", "1400,900")
    assert shot.stat().st_size > 10_000


def test_report_svg_renders_in_chromium(chromium: str, reported: Path, tmp_path: Path) -> None:
    svg = reported / "report.svg"
    size = re.search(r'<svg [^>]*width="(\d+)" height="(\d+)"', svg.read_text())
    assert size, "report.svg has no width and height"
    width, height = min(int(size.group(1)), 2400), min(int(size.group(2)), 2400)
    dom = browse(chromium, tmp_path / "profile", "--dump-dom", svg.as_uri()).stdout
    assert "data-variant=" in dom and "<parsererror" not in dom  # rendered as an SVG document, no XML error
    screenshot(chromium, tmp_path / "profile", svg.as_uri(), "report-svg.png", f"{width},{height}")


def test_the_served_index_links_its_build_report_in_chromium(chromium: str, reported: Path, tmp_path: Path) -> None:
    """`index`, then `serve`: Chromium opens the top page, finds the build report's link, and the
    report it leads to has a cell per manifest variant with the manifest's status (issue 37)."""
    import urllib.parse

    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(reported)], check=True, timeout=300,
                   capture_output=True)
    server = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(reported), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        found = re.search(r"at (http://127\.0\.0\.1:\d+)/", server.stdout.readline())  # type: ignore[union-attr]
        assert found, "serve printed no URL"
        top = browse(chromium, tmp_path / "profile", "--dump-dom", found.group(1) + "/").stdout
        link = re.search(r'<a href="([^"]+)">Build report</a>', top)
        assert link, top[:2000]
        dom = browse(chromium, tmp_path / "profile", "--dump-dom",
                     urllib.parse.urljoin(found.group(1) + "/", link.group(1))).stdout
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert "fusedops 0.1.0: build report" in dom
    rendered = Members()
    rendered.feed(dom)
    entries = json.loads((reported / "manifest.json").read_text())["variants"]
    cells = {c["data-variant"]: c["data-status"] for c in rendered.cells if "data-variant" in c}
    assert cells == {vid: entry["status"] for vid, entry in entries.items()}
