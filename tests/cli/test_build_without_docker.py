"""`wheelfactory build` (engine auto) where no Docker engine answers and the host builds none of the
selection: exit 5, every selected variant listed as not built with the reason and what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.testkit import REPO


def test_nothing_the_host_can_build_is_exit_5_with_the_list(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "build", "--only", "torch26-cxx98-cpu-*", "--only", "torch26-cxx11-cpu-*",
         "-o", str(tmp_path / "dist")],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "COLUMNS": "200"})
    assert result.returncode == 5, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("wheelfactory: error: 2 of 2 selected variant(s) not built here")
    assert f"no Docker engine answers at unix://{tmp_path}/no-engine.sock" in line
    assert "wheelfactory engine start" in line
    for vid in ("torch26-cxx98-cpu-x86_64-linux", "torch26-cxx11-cpu-x86_64-linux"):
        assert vid in result.stdout
    assert "not built" in result.stdout and "to build them: start a Docker engine" in result.stdout
    assert not (tmp_path / "dist" / "manifest.json").exists()  # nothing was built: nothing recorded
