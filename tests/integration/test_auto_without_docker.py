"""README's first command where no Docker engine answers: engine auto builds the host's variant (a
real host build, with every check the Docker engine runs), lists the other selected variant as not
built with the reason and what to do, and exits 5."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO

pytestmark = pytest.mark.slow

OWN = "torch213-cxx11-cpu-x86_64-linux"  # the test interpreter's torch (2.13.0, CPU)
OTHER = "torch26-cxx98-cpu-x86_64-linux"


def test_auto_builds_the_hosts_variant_and_lists_the_other_exit_5(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "build", "--only", "torch26-cxx98-cpu-*",
         "--only", "torch213-cxx11-cpu-*", "-o", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
        env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "COLUMNS": "200"})
    assert result.returncode == 5, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "1 of 2 selected variant(s) not built here" in line and "wheelfactory engine start" in line
    assert f"not built (1): {OTHER}" in result.stdout
    assert f"why: no Docker engine answers at unix://{tmp_path}/no-engine.sock" in result.stdout

    entries = json.loads((out / "manifest.json").read_text())["variants"]
    assert list(entries) == [OWN]  # a variant not built here is not recorded (docs/engines.md, auto)
    assert entries[OWN]["status"] == "built" and (out / entries[OWN]["wheel"]).is_file()
    log = (out / entries[OWN]["log"]).read_text()
    # The host engine runs the Docker engine's checks: abi3audit, then the smoke test in a fresh venv.
    assert "-m abi3audit --strict --report" in log
    assert "-m venv --system-site-packages" in log
    assert f'{{"mode": "prebuilt", "variant": "{OWN}", ' in log
