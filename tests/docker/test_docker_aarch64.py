"""aarch64 variants built in Docker on this x86-64 machine, under QEMU user emulation: the offline
Debian base for arm64 ([build] debian_base), the wheelhouse for aarch64's platform tags, and
everything that runs in a container (cibuildwheel's build, auditwheel, the smoke test, the
project's own tests) running as aarch64. Three projects: the sample (factory-native), a second
factory-native library with its own tests (tests/fixtures/axisops), and a bring-your-own setup.py
project with its tests (tests/fixtures/byo_ext).

PyPI's torch 2.13 for aarch64 is its CUDA 13 build (the CPU-only build lives on PyPI only up to
2.9 for this arch): a CPU variant compiles against it, and the smoke test imports it with its
nvidia-* wheels (no GPU needed to import). The tier is opt-in (--run-emulated): it needs QEMU >=
10 registered (`wheelfactory engine start --emulate aarch64`) and takes ~30 min here."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from docker_helpers import build_matrix, manifest
from testkit import REPO, TEST_CACHE

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.emulated]

CACHE = TEST_CACHE
VARIANT = "torch213-cxx11-cpu-aarch64-linux"
AARCH64 = "AArch64"  # what readelf -h prints as the machine of an aarch64 ELF


def tables() -> str:
    from wheelfactory.images.emulation import arch_support

    support = arch_support("aarch64")
    if not support.runs:
        pytest.fail(f"the emulation tier needs aarch64 to run here: {support.how}; fix: {support.fix}", pytrace=False)
    return f"""
[build]
engine = "docker"
debian_base = "bookworm"
torch_index = "pypi"
wheelhouse = "{CACHE / 'wheelhouse'}"
compile_cache_dir = "{CACHE / 'sccache'}"
"""


def project_matrix(project: Path, extra: str = "", *, python: str = "abi3", tests: str = "") -> str:
    return f"""
[project]
path = "{project}"
{extra}
[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = ["{python}"]
arch = ["aarch64"]
{tests}
{tables()}"""


BYO_TESTS = """[test]
command = "python -m pytest -q -p no:cacheprovider {project}/tests"
requires = ["pytest"]
sources = ["tests"]
"""


def machine_of(wheel: Path, member: str, tmp_path: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        target = tmp_path / Path(member).name
        target.write_bytes(archive.read(member))
    header = subprocess.run(["readelf", "-h", str(target)], capture_output=True, text=True, check=True).stdout
    return next(line.split(":", 1)[1].strip() for line in header.splitlines() if line.strip().startswith("Machine:"))


def built(workdir: Path) -> tuple[Path, dict[str, object], str]:
    entry = manifest(workdir / "dist")[VARIANT]
    assert entry["status"] in ("built", "cached"), entry
    return workdir / "dist" / str(entry["wheel"]), entry, (workdir / "dist" / str(entry["log"])).read_text()


def test_the_samples_aarch64_variant_builds_and_its_op_ran_as_aarch64(tmp_path: Path) -> None:
    work = build_matrix(CACHE / "docker-aarch64-sample", project_matrix(REPO / "kernels" / "fusedops"))
    wheel, entry, log = built(work)
    assert wheel.name.endswith("-cp39-abi3-manylinux_2_34_aarch64.whl"), wheel.name
    assert machine_of(wheel, "fusedops/_C.abi3.so", tmp_path) == AARCH64
    if entry["status"] == "built":
        assert "# smoke: ran as aarch64" in log and '"mode": "prebuilt"' in log


def test_a_native_fixtures_own_tests_pass_in_the_aarch64_container(tmp_path: Path) -> None:
    work = build_matrix(CACHE / "docker-aarch64-axisops", project_matrix(REPO / "tests" / "fixtures" / "axisops"))
    wheel, entry, log = built(work)
    assert machine_of(wheel, "axisops/_C.abi3.so", tmp_path) == AARCH64
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True, tests
    if entry["status"] == "built":
        assert "# smoke: ran as aarch64" in log and "4 passed" in log


def test_a_bring_your_own_projects_aarch64_wheel_builds_and_passes_its_tests(tmp_path: Path) -> None:
    project = REPO / "tests" / "fixtures" / "byo_ext"
    work = build_matrix(CACHE / "docker-aarch64-byo", project_matrix(
        project, 'import_name = "byo_ext"\ncpu_env = { FORCE_CUDA = "0" }', python="3.11", tests=BYO_TESTS))
    wheel, entry, log = built(work)
    assert wheel.name.endswith("-cp311-cp311-manylinux_2_34_aarch64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        library = next(n for n in archive.namelist() if n.startswith("byo_ext/_C") and n.endswith(".so"))
    assert machine_of(wheel, library, tmp_path) == AARCH64
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True, tests

