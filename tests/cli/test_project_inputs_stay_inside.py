"""A `wheelfactory new` project with a symlink to a file outside it: `build --engine host` refuses
before anything compiles, in one line naming the link and its target; no wheel, and the outside
file's bytes in no file under dist (issue 25: the secret used to ship under <pkg>/_sources)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = b"SECRET-d41c-outside-the-project-never-shipped\n"


def _build(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "build", "--engine", "host",
                           "--only", "torch213-cxx11-cpu-*", "-o", str(project / "dist")],
                          cwd=project, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "COLUMNS": "400"})


@pytest.mark.parametrize("where", ["csrc/leak.h", "python/demo/leak_secret.txt", "tests/leak_data.txt",
                                   "csrc/cpu/vendored"])
def test_a_link_out_of_the_project_is_refused_before_any_build(tmp_path: Path, where: str) -> None:
    project = tmp_path / "demo"
    made = subprocess.run([sys.executable, "-m", "wheelfactory", "new", "demo", "--path", str(project)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    (tmp_path / "outside").mkdir()
    secret = tmp_path / "outside" / "secret.h"
    secret.write_bytes(SECRET)
    link = project / where
    target = secret.parent if where.endswith("vendored") else secret
    link.symlink_to(target, target_is_directory=target.is_dir())

    result = _build(project)

    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{link} is a symlink that leads outside the project" in line and f"(to {target})" in line, line
    dist = project / "dist"
    assert not list(project.rglob("*.whl")) and not list(tmp_path.rglob("*.whl"))
    assert not (dist / "manifest.json").exists()  # refused before any variant started
    for path in (dist.rglob("*") if dist.exists() else ()):
        if path.is_file():
            assert SECRET not in path.read_bytes(), path
