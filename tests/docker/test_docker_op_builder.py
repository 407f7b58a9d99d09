"""A project that chooses its native ops from the environment (tests/fixtures/optkit, shaped after
DeepSpeed's DS_BUILD_* and op_builder/, ColossalAI's BUILD_EXT, apex's, mmcv's and torchao's
switches), built unedited in Docker with the recipe docs/reference/bring-your-own.md gives:
`[project] env` asks for one op ahead of time. The wheel holds that op and not the other; setup.py's
record of what it built reaches the wheel; the project's own loader, run by its own tests in the
factory, loads the prebuilt op from the installed package, not a JIT compile; and its
`-march=native` (from its builder, with the SIMD macro its lscpu detection picks) is compiled for
the variant's baseline: no instruction beyond x86-64-v2 in the library. Its tests need `adamref`,
a wheel the project brings ([test] find_links, tests/fixtures/wheels) that no index has."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

VARIANT = "torch213-cxx11-cpu-x86_64-linux-cp311"
OPTKIT = SharedBuild("docker-optkit", REPO / "tests" / "fixtures" / "optkit", """import_name = "optkit"
env = { OPTKIT_BUILD_OPS = "0", OPTKIT_BUILD_CPU_ADAM = "1" }

[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = ["3.11"]

[test]
command = "pytest -p no:cacheprovider {project}/tests/unit"
requires = ["pytest", "adamref"]
sources = ["tests"]
find_links = ["%s"]
""" % (REPO / "tests" / "fixtures" / "wheels"))


@pytest.fixture(scope="module")
def optkit_build(offline_build_tables: str) -> Path:
    return make_shared(OPTKIT, offline_build_tables)


def test_the_op_the_environment_asks_for_is_prebuilt_and_the_loader_takes_it(optkit_build: Path) -> None:
    entry = manifest(optkit_build / "dist")[VARIANT]
    assert entry["status"] in ("built", "cached"), entry
    with zipfile.ZipFile(optkit_build / "dist" / str(entry["wheel"])) as wheel:
        names = wheel.namelist()
        record = wheel.read("optkit/git_version_info_installed.py").decode()
    assert "optkit/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so" in names
    assert not [n for n in names if "cpu_lion_op" in n], names  # not asked for: left to the JIT
    assert "optkit/ops/csrc/lion/cpu_lion.cpp" in names  # what the JIT compiles, through the csrc symlink
    assert "installed_ops = {'cpu_adam': 1, 'cpu_lion': 0}" in record and "'version': '2.13'" in record
    # its own tests ran against the wheel in the factory: the loader returned the installed package's op
    tests: dict[str, object] = entry["tests"]  # type: ignore[assignment]
    assert tests["passed"] is True, tests
    counts = tests.get("counts")
    assert entry["status"] == "cached" or isinstance(counts, dict) and counts["passed"] == 15 and "failed" not in counts
    if entry["status"] == "built":
        log = (optkit_build / "dist" / str(entry["log"])).read_text()
        assert "OPTKIT_BUILD_CPU_ADAM=1" in log  # the recipe's switch reached the build
        assert "ops built ahead of time: ['cpu_adam']" in log
        assert ("# WARNING: the project's build asks for -march=native (the build machine's CPU) in "
                "csrc/adam/cpu_adam.cpp: compiled for x86-64-v2 instead") in log


def test_the_prebuilt_op_holds_no_instruction_beyond_the_baseline(optkit_build: Path, tmp_path: Path) -> None:
    entry = manifest(optkit_build / "dist")[VARIANT]
    with zipfile.ZipFile(optkit_build / "dist" / str(entry["wheel"])) as wheel:
        (tmp_path / "op.so").write_bytes(wheel.read("optkit/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"))
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(tmp_path / "op.so")], capture_output=True,
                             text=True, check=True).stdout
    assert "adam_update" in listing  # the op's own code was read
    assert "%ymm" not in listing and "%zmm" not in listing  # AVX, AVX2, AVX-512: beyond x86-64-v2
