"""A project that ships its own [tool.cibuildwheel] table (tests/fixtures/cibw_table, shaped after
pyg-lib, torchmd-net, tvdcn and torch-harmonics), built unedited in Docker for torch 2.6 (pre-cxx11)
and 2.13: every option the table sets is decided and listed with its fate in build.log, the
table's environment reaches the build (the library's block size is the table's), its auditwheel
excludes join the factory's, its before-build's `pip install torch --index-url ...` is dropped
(torch is there, offline), and its test-command runs in the factory against each wheel (cibuildwheel's
own test step, which would pip-install virtualenv from an index, never runs). Its setup.py compiles
with -march=native, as DeepSpeed's CPU Adam does: the wheel's library holds no instruction beyond
x86-64-v2 (read by disassembly: no ymm/zmm register), and the log says what was rewritten."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

TABLE = SharedBuild("docker-cibw-table", REPO / "tests" / "fixtures" / "cibw_table", """import_name = "graphops"

[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu"]
python = ["3.11"]
""")
VARIANTS = ("torch26-cxx98-cpu-x86_64-linux-cp311", "torch213-cxx11-cpu-x86_64-linux-cp311")


@pytest.fixture(scope="module")
def table_build(offline_build_tables: str) -> Path:
    return make_shared(TABLE, offline_build_tables)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_projects_table_is_decided_and_its_tests_run_in_the_factory(table_build: Path, variant: str) -> None:
    entry = manifest(table_build / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    log = (table_build / "dist" / str(entry["log"])).read_text()
    head = "# cibuildwheel options of pyproject.toml [tool.cibuildwheel] for cp311-manylinux_x86_64, option by option:"
    assert head in log
    fates = {line.split(" = ", 1)[0].strip("# "): line for line in log[log.index(head):].splitlines()[1:15]
             if line.startswith("#   ")}
    assert set(fates) == {"build", "skip", "archs", "build-frontend", "test-requires", "test-command",
                          "manylinux-x86_64-image", "manylinux-aarch64-image", "environment-pass", "environment",
                          "before-build", "repair-wheel-command"}, fates  # not macos' table, not the cp312 override
    assert ": replaced, the matrix selects" in fates["build"]
    assert fates["before-build"].endswith(": replaced, the build has torch already, from the offline wheelhouse")
    assert ": honoured, sets GRAPHOPS_BLOCK, TORCH_CUDA_ARCH_LIST for the build" in fates["environment"]
    assert ": honoured, the factory's auditwheel repair keeps --exclude libtorch*.so --exclude libc10*.so " \
           "--exclude libgomp*.so*" in fates["repair-wheel-command"]
    assert ": honoured, the factory runs the project's tests against each wheel, offline" in fates["test-command"]
    repair = next(line for line in log.splitlines() if line.startswith("CIBW_REPAIR_WHEEL_COMMAND="))
    assert "--exclude 'libgomp*.so*'" in repair
    # the project's own suite ran in the factory (its block-size test checks the table's environment)
    tests: dict[str, object] = entry["tests"]  # type: ignore[assignment]
    assert tests["passed"] is True and tests["command"] == "pytest -p no:cacheprovider {project}/test", tests
    counts = tests.get("counts")
    assert entry["status"] == "cached" or isinstance(counts, dict) and counts["passed"] == 5 and "failed" not in counts
    # -march=native (the build machine's CPU) was compiled for the wheel's baseline, and said
    assert ("# WARNING: the project's build asks for -march=native (the build machine's CPU) in csrc/segment.cpp: "
            "compiled for x86-64-v2 instead, the variant's CPU baseline ([build] cpu_baseline)") in log
    assert "virtualenv" not in log  # cibuildwheel's own test step never ran


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_wheels_library_holds_no_instruction_beyond_the_baseline(table_build: Path, tmp_path: Path,
                                                                   variant: str) -> None:
    entry = manifest(table_build / "dist")[variant]
    with zipfile.ZipFile(table_build / "dist" / str(entry["wheel"])) as wheel:
        (library,) = [name for name in wheel.namelist() if name.startswith("graphops/_ops") and name.endswith(".so")]
        (tmp_path / "lib.so").write_bytes(wheel.read(library))
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(tmp_path / "lib.so")], capture_output=True,
                             text=True, check=True).stdout
    assert "<_ZN8graphops" in listing  # the op library's own code was read
    assert "%ymm" not in listing and "%zmm" not in listing  # AVX, AVX2, AVX-512: beyond x86-64-v2


def test_a_table_step_no_offline_build_can_run_fails_its_variant_before_anything_is_made(
        offline_build_tables: str, tmp_path: Path) -> None:
    """A before-all that installs system packages (yum) can never run offline: the variant fails
    at once naming the option and the fix, before its image, its wheel sets or its compile."""
    import shutil

    from tests.docker.docker_helpers import build

    project = tmp_path / "graphops"
    shutil.copytree(REPO / "tests" / "fixtures" / "cibw_table", project)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "[tool.cibuildwheel.linux]\n", "[tool.cibuildwheel.linux]\nbefore-all = \"yum install -y openblas-devel\"\n"))
    wheelhouse = tmp_path / "wheelhouse"
    tables = "\n".join(f'wheelhouse = "{wheelhouse}"' if line.startswith("wheelhouse =") else line
                       for line in offline_build_tables.splitlines())
    (tmp_path / "matrix.toml").write_text(f"""[project]
path = "{project}"
import_name = "graphops"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = ["3.11"]
{tables}
""")
    result = build(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    entry = manifest(tmp_path / "dist")["torch213-cxx11-cpu-x86_64-linux-cp311"]
    assert entry["status"] == "failed" and entry["error"] == (
        "torch213-cxx11-cpu-x86_64-linux-cp311: pyproject.toml [tool.cibuildwheel] before-all: refused: "
        "`yum install -y openblas-devel` installs system packages, and the build container has no network: "
        "use a base image that has them ([build] base_image)"), entry
    assert "refused by the project's own cibuildwheel table (they fail at once)" in result.stdout + result.stderr
    assert not wheelhouse.exists(), "nothing was downloaded for a refused variant"
    assert not (tmp_path / "dist" / ".work" / "torch213-cxx11-cpu-x86_64-linux-cp311").exists()
