"""A bring-your-own setup.py project (pybind11, CPU + CUDA sources) built by the docker engine for
two torch releases without editing it: local version label added, repaired, imported in a clean
container (the engine's smoke test)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import make_shared
from tests.shared_builds import SharedBuild
from tests.testkit import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECT = REPO / "tests" / "fixtures" / "byo_ext"
# The project's own pytest suite, run against each wheel in a clean container (cibuildwheel's keys).
TESTS = """[test]
command = "python -m pytest -q -p no:cacheprovider {project}/tests"
requires = ["pytest"]
sources = ["tests"]
"""


BYO = SharedBuild("docker-byo", PROJECT, f"""import_name = "byo_ext"
cpu_env = {{ FORCE_CUDA = "0" }}
cuda_env = {{ FORCE_CUDA = "1" }}

[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu"]
python = ["3.11"]

{TESTS}""")


def test_byo_project_for_two_torch_releases(offline_build_tables: str) -> None:
    before = sorted(p.name for p in PROJECT.rglob("*"))
    workdir = make_shared(BYO, offline_build_tables)
    assert sorted(p.name for p in PROJECT.rglob("*")) == before  # the project was not touched
    entries = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"]
    expected = {"torch26-cxx98-cpu-x86_64-linux-cp311": "0.3.0+cputorch2.6cxx98",
                "torch213-cxx11-cpu-x86_64-linux-cp311": "0.3.0+cputorch2.13"}
    assert set(entries) == set(expected)
    for vid, version in expected.items():
        entry = entries[vid]
        assert entry["status"] in ("built", "cached"), entry
        wheel = workdir / "dist" / entry["wheel"]
        assert wheel.name == f"byo_ext-{version}-cp311-cp311-manylinux_2_34_x86_64.whl"
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata = archive.read(f"byo_ext-{version}.dist-info/METADATA").decode()
        assert f"Version: {version}" in metadata
        assert any(n.startswith("byo_ext/_C") and n.endswith(".so") for n in names)
        assert not [n for n in names if "libtorch" in n or "libc10" in n]
        log = (workdir / "dist" / entry["log"]).read_text()
        assert "FORCE_CUDA=0" in log and '"mode": "imported"' in log  # imported in a clean container
        # setuptools without ninja runs Debian Python's configured compiler: the cache fronts it too
        assert "x86_64-linux-gnu-g++" in log or entry["status"] == "cached"
        cache = [line for line in log.splitlines() if line.startswith("# compile cache")]
        assert cache and " 0 hits, 0 misses" not in cache[-1], cache
        # the project's suite ran against this wheel, in the clean container, and passed
        assert entry["tests"]["passed"] is True and entry["tests"]["command"].startswith("python -m pytest")
        assert "3 passed" in log or entry["status"] == "cached"


def test_a_failing_project_test_fails_its_variant_with_the_tests_message(offline_build_tables: str,
                                                                         tmp_path: Path) -> None:
    """The same project and suite, with the suite told to fail one test: the variant fails, no
    wheel is published for it, and the manifest carries pytest's summary line."""
    workdir = tmp_path  # a changed test command: its own build, which the compile cache serves
    failing = TESTS.replace('command = "python', 'command = "BYO_EXT_FAIL=1 python')
    (workdir / "matrix.toml").write_text(f"""
[project]
path = "{PROJECT}"
import_name = "byo_ext"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = ["3.11"]

{failing}
{offline_build_tables}""")
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build"], cwd=workdir, capture_output=True, text=True,
                            timeout=3000)
    assert result.returncode != 0
    (entry,) = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"].values()
    assert entry["status"] == "failed" and entry["wheel"] is None
    assert "the project's tests failed" in entry["error"] and "failing on purpose (BYO_EXT_FAIL=1)" in entry["error"]
    assert entry["tests"]["passed"] is False and "1 failed, 2 passed" in entry["tests"]["excerpt"]
    assert not list((workdir / "dist").glob("*/*.whl"))
