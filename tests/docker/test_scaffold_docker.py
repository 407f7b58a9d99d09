"""The acceptance of `wheelfactory new`: `wheelfactory new demo --path DIR` and then
`wheelfactory build -m DIR/matrix.toml --only 'torch213-cxx11-cpu-*'` builds in Docker with the
scaffold's own matrix (engine docker, debian_base, torch_index), the manifest says the scaffold's
tests ran in the wheel's container and passed, and the wheel loads `prebuilt`.

Two lines are added to the scaffold's [build] table, the tier's shared wheelhouse and compile
cache, and the dist/ is kept under WHEELFACTORY_TEST_CACHE: a rerun finds the variant cached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.docker.docker_helpers import manifest
from tests.testkit import TEST_CACHE, pip_install
from wheelfactory.images.base_image import BaseImage

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CACHE = TEST_CACHE
OWN = "torch213-cxx11-cpu-x86_64-linux"


def wheelfactory(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", *args], check=False, cwd=cwd, capture_output=True,
                          text=True, timeout=3000)


@pytest.fixture(scope="module")
def scaffold_build(bookworm_base: BaseImage, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the scaffold, its dist/). ``bookworm_base``: the image the scaffold's debian_base names,
    made once for the tier."""
    work = tmp_path_factory.mktemp("new")
    project = work / "demo"
    made = wheelfactory("new", "demo", "--path", str(project), cwd=work)
    assert made.returncode == 0, made.stderr
    matrix = project / "matrix.toml"
    text = matrix.read_text()
    assert re.findall(r"^\[(\w+)\]", text, re.MULTILINE)[-1] == "build"  # the lines below land in [build]
    matrix.write_text(text + f'wheelhouse = "{CACHE / "wheelhouse"}"\ncompile_cache_dir = "{CACHE / "sccache"}"\n')
    out = CACHE / "docker-scaffold" / "dist"
    built = wheelfactory("build", "-m", str(matrix), "--only", "torch213-cxx11-cpu-*", "-o", str(out), cwd=work)
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-3000:]
    return project, out


def test_the_scaffold_builds_in_docker_and_passes_its_tests(scaffold_build: tuple[Path, Path]) -> None:
    _, out = scaffold_build
    entries = manifest(out)
    assert set(entries) == {OWN}
    entry = entries[OWN]
    assert entry["status"] in ("built", "cached"), entry
    assert entry["engine"] == "docker"
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True and tests["excerpt"] is None, tests
    assert str(tests["command"]).startswith("python -m pytest")
    log = (out / str(entry["log"])).read_text()
    assert re.search(r"\b5 sample input\(s\) matched", log), log[-3000:]
    assert re.search(r"^7 passed, 5 skipped", log, re.MULTILINE), log[-3000:]  # the CUDA cases skip without a GPU


def test_the_wheel_loads_prebuilt(scaffold_build: tuple[Path, Path], tmp_path: Path) -> None:
    project, out = scaffold_build
    wheel = out / str(manifest(out)[OWN]["wheel"])
    pip_install(sys.executable, "-q", "--no-deps", "--no-index", "--target", str(tmp_path / "site"), str(wheel))
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "DEMO_CACHE_DIR": str(tmp_path / "cache")}
    code = "import json, demo; print(json.dumps(demo.backend_info(), default=str))"
    result = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    info = json.loads(result.stdout.splitlines()[-1])
    assert info["mode"] == "prebuilt" and info["variant"] == OWN, info
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
                           check=False, env=env, capture_output=True, text=True, cwd=project, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:]
