"""Real uv and pip resolve a variant from our index without downloading its wheel: the server's
access log shows the PEP 691 JSON page and the PEP 658 .metadata file, and no .whl. Against
`wheelfactory serve` (negotiation), against a static host that only serves files (the standard
library's http.server over the generation: HTML pages, whose data-core-metadata still points at
the .metadata files), and, as the control that shows the log check can fail, against a copy of the
index stripped of its metadata files and attributes, where the installers download the wheel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.index_servers import Requests, fetched, requests_in
from tests.publish.test_index import index
from tests.testkit import pip_install, uv_pip
from wheelfactory.publish.generations import INDEX_LINK

CPU = "torch213-cxx11-cpu-x86_64-linux"
VERSION = "0.1.0+cputorch2.13"


# No pip or uv settings from the host (its find-links, its index): only the index under test.
LOCAL = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


def uv_dry_run(url: str, tmp_path: Path) -> str:
    done = uv_pip("install", "--dry-run", "--python", sys.executable, "--index-url", url, f"tiny=={VERSION}",
                  cache=tmp_path / "uv-cache", host_sources=False, env=LOCAL, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"tiny=={VERSION}" in done.stdout + done.stderr
    return done.stdout + done.stderr


def pip_dry_run(url: str, tmp_path: Path) -> str:
    report = tmp_path / "report.json"
    done = pip_install(sys.executable, "--disable-pip-version-check", "--no-cache-dir", "--dry-run",
                       "--ignore-installed", "--report", str(report), "--index-url", url, "tiny",
                       host_sources=False, env=LOCAL, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (installed,) = json.loads(report.read_text())["install"]
    assert installed["metadata"]["version"] == VERSION and installed["download_info"]["url"].endswith(".whl")
    return done.stdout + done.stderr


@contextmanager
def process_log(command: list[str], url_pattern: str) -> Iterator[tuple[str, Requests]]:
    """Runs a server, yields (its URL, the requests it logged: filled in when it stops)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    requests: Requests = []
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        found = re.search(url_pattern, line)
        assert found, line
        yield f"http://127.0.0.1:{found.group(1)}", requests
    finally:
        process.terminate()
        _, log = process.communicate(timeout=30)
        requests.extend(requests_in(log))


def wheelfactory_serve(dist: Path) -> list[str]:
    return [sys.executable, "-m", "wheelfactory", "serve", "-o", str(dist), "--port", "0"]


SERVE_URL = r"at http://127\.0\.0\.1:(\d+)/"
STATIC_URL = r"port (\d+)"


def static_host(directory: Path) -> list[str]:
    return [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(directory)]


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    make_dist(tmp_path / "dist", payload=os.urandom(1 << 18))  # a wheel worth not downloading
    index(tmp_path / "dist")
    return tmp_path / "dist"


Installer = Callable[[str, Path], str]
INSTALLERS = {"uv": uv_dry_run, "pip": pip_dry_run}


@pytest.mark.parametrize("installer", sorted(INSTALLERS))
def test_installers_read_json_and_metadata_from_serve_and_never_the_wheel(dist: Path, tmp_path: Path,
                                                                         installer: str) -> None:
    with process_log(wheelfactory_serve(dist), SERVE_URL) as (url, requests):
        INSTALLERS[installer](f"{url}/{CPU}/simple", tmp_path)
    assert (f"/{CPU}/simple/tiny/", 200, "index.json") in requests, requests  # asked for JSON (Accept), got it
    metadata, wheels = fetched(requests)
    assert metadata == [f"/{CPU}/simple/tiny/tiny-0.1.0%2Bcputorch2.13-cp39-abi3-manylinux_2_28_x86_64.whl.metadata"]
    assert wheels == [], requests


@pytest.mark.parametrize("installer", sorted(INSTALLERS))
def test_a_static_host_without_negotiation_still_spares_the_download(dist: Path, tmp_path: Path,
                                                                     installer: str) -> None:
    with process_log(static_host((dist / INDEX_LINK).resolve()), STATIC_URL) as (url, requests):
        INSTALLERS[installer](f"{url}/{CPU}/simple", tmp_path)
    assert (f"/{CPU}/simple/tiny/", 200, None) in requests, requests  # index.html: all a file server has
    metadata, wheels = fetched(requests)
    assert len(metadata) == 1 and wheels == [], requests


def without_metadata(generation: Path, copy: Path) -> Path:
    """The index as it was before PEP 658/691: no .metadata files, no JSON pages, no hash attributes."""
    shutil.copytree(generation, copy)
    for path in list(copy.rglob("*.metadata")) + list(copy.glob("*/simple/**/index.json")):
        path.unlink()
    for page in copy.rglob("*.html"):
        page.write_text(re.sub(r' data-(?:core|dist-info)-metadata="[^"]*"', "", page.read_text()))
    return copy


@pytest.mark.parametrize("installer", sorted(INSTALLERS))
def test_without_the_metadata_files_the_installers_download_the_wheel(dist: Path, tmp_path: Path,
                                                                      installer: str) -> None:
    """The control: the same check on an index without metadata sees the wheel fetched."""
    bare = without_metadata((dist / INDEX_LINK).resolve(), tmp_path / "bare")
    with process_log(static_host(bare), STATIC_URL) as (url, requests):
        INSTALLERS[installer](f"{url}/{CPU}/simple", tmp_path)
    metadata, wheels = fetched(requests)
    assert metadata == [] and len(wheels) == 1, requests
