"""Every table of the docs site is readable at 1280 px (issue 37): the site built as it is
published, each page with a table rendered by Debian's headless Chromium at 1280x900, and no
table wider than the column it sits in (the readthedocs theme kept cells on one line and cut the
reference tables' last column off). A screenshot of the matrix.toml reference is kept as a test
artifact (WHEELFACTORY_TEST_ARTIFACTS, default .cache/tests/artifacts).

Where CI=true a missing chromium fails the test; elsewhere it skips."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.testkit import REPO, TEST_CACHE, chromium_or_skip

pytestmark = pytest.mark.slow  # a site build and a browser per page: ~20 s

ARTIFACTS = Path(os.environ.get("WHEELFACTORY_TEST_ARTIFACTS", TEST_CACHE / "artifacts"))
WINDOW = "1280,900"
# Run once the page (and the theme's scripts) loaded: which tables are wider than their column.
MEASURE = """window.addEventListener('load', () => {
  const tables = Array.from(document.querySelectorAll('.rst-content table'));
  const cut = tables.filter(t => t.scrollWidth > t.parentElement.clientWidth + 1
                                 || t.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
                    .map(t => t.querySelector('tr').textContent.trim().split(/\\s+/).join(' '));
  document.body.setAttribute('data-measured', JSON.stringify({tables: tables.length, cut: cut}));
});
"""


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip("renders the docs for this test", required=bool(os.environ.get("CI")))


def render(chromium: str, profile: Path, *args: str) -> str:
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={WINDOW}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{' '.join(command)}: {done.stderr[-2000:]}"
    return done.stdout


def test_no_table_of_the_docs_is_cut_at_1280_px(chromium: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    pages = [page for page in sorted(site.rglob("index.html")) if "<table" in page.read_text()]
    assert len(pages) >= 8, pages  # the reference pages, commands, publishing...

    def measure(page: Path) -> tuple[str, dict[str, object]]:
        (page.parent / "measure.js").write_text(MEASURE)
        measured = page.with_name("measured.html")
        measured.write_text(page.read_text().replace("</body>", '<script src="measure.js"></script></body>'))
        dom = render(chromium, tmp_path / f"profile-{page.parent.name}", "--dump-dom", measured.as_uri())
        found = re.search(r'data-measured="([^"]*)"', dom)
        assert found, f"{page}: the measuring script did not run"
        return str(page.parent.relative_to(site)), json.loads(html.unescape(found.group(1)))

    with ThreadPoolExecutor(2) as pool:
        results = dict(pool.map(measure, pages))
    assert all(int(result["tables"]) > 0 for result in results.values()), results  # type: ignore[call-overload]
    assert {page: result["cut"] for page, result in results.items() if result["cut"]} == {}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "docs-matrix-reference-1280.png"
    shot.unlink(missing_ok=True)
    render(chromium, tmp_path / "profile-shot", f"--screenshot={shot}", (site / "reference" / "matrix" / "index.html").as_uri())
    assert shot.read_bytes().startswith(b"\x89PNG")
