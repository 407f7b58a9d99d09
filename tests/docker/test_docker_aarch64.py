"""aarch64 variants built in Docker on this x86-64 machine, under QEMU user emulation: the offline
Debian base for arm64 ([build] debian_base), the wheelhouse for aarch64's platform tags, and
everything that runs in a container (cibuildwheel's build, auditwheel, the smoke test, the
project's own tests) running as aarch64. Three projects: the sample (factory-native), a second
factory-native library with its own tests (tests/fixtures/axisops), and a bring-your-own setup.py
project with its tests (tests/fixtures/byo_ext).

PyPI's torch 2.13 for aarch64 is its CUDA 13 build (the CPU-only build lives on PyPI only up to
2.9 for this arch): a CPU variant compiles against it, and the smoke test imports it with its
nvidia-* wheels (no GPU needed to import). The base carries cross compilers that run on this
machine (images/base_image.py): the compile runs natively, the rest emulated. The tier is opt-in
(--run-emulated): it needs QEMU >= 10 registered (`wheelfactory engine start --emulate aarch64`)
and takes ~20 min here; CI runs test_docker_aarch64_cross.py instead."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.emulated, pytest.mark.lane("docker-projects")]

CACHE = TEST_CACHE
VARIANT = "torch213-cxx11-cpu-aarch64-linux"
AARCH64 = "AArch64"  # what readelf -h prints as the machine of an aarch64 ELF


TABLES = f"""
[build]
engine = "docker"
debian_base = "bookworm"
torch_index = "pypi"
wheelhouse = "{CACHE / 'wheelhouse'}"
compile_cache_dir = "{CACHE / 'sccache'}"
"""


def emulation_runs() -> None:
    from wheelfactory.images.emulation import arch_support

    support = arch_support("aarch64")
    if not support.runs:
        pytest.fail(f"the emulation tier needs aarch64 to run here: {support.how}; fix: {support.fix}", pytrace=False)


def aarch64_build(name: str, project: Path, extra: str = "", *, python: str = "abi3", tests: str = "",
                  backend: str = "cpu", cuda: str = "") -> SharedBuild:
    return SharedBuild(name, project, f"""{extra}
[matrix]
torch = ["2.13"]
backends = ["{backend}"]
python = ["{python}"]
arch = ["aarch64"]
{tests}{cuda}""", build_table=TABLES)


def make(build: SharedBuild) -> Path:
    emulation_runs()
    return make_shared(build)


BYO_TESTS = """[test]
command = "python -m pytest -q -p no:cacheprovider {project}/tests"
requires = ["pytest"]
sources = ["tests"]
"""


SAMPLE_AARCH64 = aarch64_build("docker-aarch64-sample", REPO / "kernels" / "fusedops")
AXISOPS_AARCH64 = aarch64_build("docker-aarch64-axisops", REPO / "tests" / "fixtures" / "axisops")
BYO_AARCH64 = aarch64_build("docker-aarch64-byo", REPO / "tests" / "fixtures" / "byo_ext",
                            'import_name = "byo_ext"\ncpu_env = { FORCE_CUDA = "0" }', python="3.11", tests=BYO_TESTS)
CU130_AARCH64 = aarch64_build("docker-aarch64-cu130", REPO / "kernels" / "fusedops", backend="cu130",
                              cuda='[cuda]\narch_list = "9.0"\n')


def machine_of(wheel: Path, member: str, tmp_path: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        target = tmp_path / Path(member).name
        target.write_bytes(archive.read(member))
    header = subprocess.run(["readelf", "-h", str(target)], capture_output=True, text=True, check=True).stdout
    return next(line.split(":", 1)[1].strip() for line in header.splitlines() if line.strip().startswith("Machine:"))


def built(workdir: Path, variant: str = VARIANT) -> tuple[Path, dict[str, object], str]:
    entry = manifest(workdir / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    return workdir / "dist" / str(entry["wheel"]), entry, (workdir / "dist" / str(entry["log"])).read_text()


@pytest.fixture(scope="module")
def sample_build() -> Path:
    return make(SAMPLE_AARCH64)


def test_the_samples_aarch64_variant_builds_and_its_op_ran_as_aarch64(tmp_path: Path, sample_build: Path) -> None:
    wheel, entry, log = built(sample_build)
    assert wheel.name.endswith("-cp39-abi3-manylinux_2_34_aarch64.whl"), wheel.name
    assert machine_of(wheel, "fusedops/_C.abi3.so", tmp_path) == AARCH64
    if entry["status"] == "built":
        assert "# smoke: ran as aarch64" in log and '"mode": "prebuilt"' in log
        assert "# compiling with the image's cross compilers" in log


def test_a_native_fixtures_own_tests_pass_in_the_aarch64_container(tmp_path: Path) -> None:
    work = make(AXISOPS_AARCH64)
    wheel, entry, log = built(work)
    assert machine_of(wheel, "axisops/_C.abi3.so", tmp_path) == AARCH64
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True, tests
    if entry["status"] == "built":
        assert "# smoke: ran as aarch64" in log and "4 passed" in log


def test_a_bring_your_own_projects_aarch64_wheel_builds_and_passes_its_tests(tmp_path: Path) -> None:
    work = make(BYO_AARCH64)
    wheel, entry, log = built(work, f"{VARIANT}-cp311")
    assert wheel.name.endswith("-cp311-cp311-manylinux_2_34_aarch64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        library = next(n for n in archive.namelist() if n.startswith("byo_ext/_C") and n.endswith(".so"))
    assert machine_of(wheel, library, tmp_path) == AARCH64
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True, tests



def test_the_index_selector_picks_the_aarch64_wheel_for_an_aarch64_python(sample_build: Path) -> None:
    """select.py (what `curl URL/select.py | python -` runs) in an aarch64 container with the
    variant's torch picks the aarch64 variant; this x86-64 interpreter is told none installs here."""
    work = sample_build
    entry = manifest(work / "dist")[VARIANT]
    image = str(entry["image"])
    torch_env = next(marker.parent for marker in sorted((CACHE / "wheelhouse" / "envs").glob("torch-*/env.json"))
                     if json.loads(marker.read_text())["image_id"] == image)
    index = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", "dist"], cwd=work, capture_output=True,
                           text=True, timeout=300)
    assert index.returncode == 0, index.stderr
    selector = (work / "dist" / "index" / "select.py").read_text()
    server = subprocess.Popen([sys.executable, "-m", "wheelfactory", "serve", "-o", str(work / "dist"), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        found = re.search(r"at (http://127\.0\.0\.1:\d+)/", server.stdout.readline())  # type: ignore[union-attr]
        assert found, "serve printed no URL"
        url = found[1]
        emulated = subprocess.run(["docker", "run", "--rm", "-i", "--network", "host", "-v",
                                   f"{torch_env}:/opt/wheelfactory/torch:ro", "-e", "PYTHONPATH=/opt/wheelfactory/torch",
                                   image, "/opt/python/cp311-cp311/bin/python", "-", "--index", url],
                                  input=selector, capture_output=True, text=True, timeout=600)
        assert emulated.returncode == 0, emulated.stderr[-3000:]
        assert f"aarch64 -> {VARIANT}" in emulated.stdout
        assert f"pip install --index-url {url}/{VARIANT}/simple fusedops" in emulated.stdout
        host = subprocess.run([sys.executable, "-", "--index", url], input=selector, capture_output=True, text=True,
                              timeout=300)
        assert host.returncode != 0 and f"{VARIANT}: built for aarch64, this machine is x86_64" in host.stderr
        assert "None of them installs here" in host.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close()  # type: ignore[union-attr]


def test_the_samples_cuda_13_aarch64_variant_holds_sm_90_read_by_the_x86_64_cuobjdump(tmp_path: Path) -> None:
    """SBSA: the cu130 aarch64 variant (GH200's sm_90) builds from NVIDIA's aarch64 toolkit wheels:
    nvcc, cicc and ptxas run emulated, its host compiler is the image's cross g++ (first on PATH).
    This machine's x86-64 cuobjdump reads the aarch64 library's fat binary: exactly sm_90."""
    work = make(CU130_AARCH64)
    variant = "torch213-cxx11-cu130-aarch64-linux"
    wheel, entry, log = built(work, variant)
    assert machine_of(wheel, "fusedops/_C.abi3.so", tmp_path) == AARCH64
    if entry["status"] == "built":
        assert "# cuobjdump fusedops/_C.abi3.so: sm_90 (asked: sm_90)" in log
        assert "# compiling with the image's cross compilers" in log and "# smoke: ran as aarch64" in log
