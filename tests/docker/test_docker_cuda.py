"""A CUDA variant built in Docker for real: torch 2.15 + CUDA 13.2 (the newest release the table
knows, as PyPI serves it), nvcc from NVIDIA's wheels,
--network none, auditwheel excluding the CUDA libraries, and verified without a GPU: cuobjdump
lists exactly the requested SASS archs plus PTX for the +PTX one; the smoke test loads the
prebuilt library in a fresh container with the CUDA torch (no GPU: the CPU ops run).

Slow (nvcc for two archs, a ~5 GB torch with its nvidia-* wheels): built once per cache.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker_helpers import LEAN, free_torches, make_shared, manifest
from shared_builds import SharedBuild
from testkit import REPO, TEST_CACHE

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

CACHE = TEST_CACHE
VARIANT = "torch215-cxx11-cu132-x86_64-linux"


CU124 = "torch26-cxx98-cu124-x86_64-linux"

CU124_BUILD = SharedBuild("docker-cu124", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.6"]
backends = ["cu124"]
cxx11_abi = false

[cuda]
arch_list = "9.0+PTX"   # CUDA 12.4 compiles up to sm_90 (two archs: the CUDA 13 test below)
""", build_table=f"""[build]
engine = "docker"
debian_base = "bookworm"   # CPU variants; the CUDA 12.4 variant gets trixie + its toolkit
torch_index = "pypi"
wheelhouse = "{CACHE / 'wheelhouse'}"
compile_cache_dir = "{CACHE / 'sccache'}"
""")


@pytest.fixture
def cu124_build(docker_client: docker.DockerClient) -> Iterator[Path]:
    """torch 2.6 + CUDA 12.4 (pre-cxx11): NVIDIA publishes no CUDA 12 nvcc wheels, so with
    debian_base the factory builds it on Debian trixie with trixie's nvidia-cuda-toolkit 12.4.
    First in the module and its lane, and freed as soon as its test is done (LEAN): trixie with its
    CUDA toolkit is ~5.7 GB, its torch (Python 3.13) ~3 GB more, and no later test builds on them;
    the torch 2.15 builds after it hold ~9 GB of their own."""
    workdir = make_shared(CU124_BUILD)
    yield workdir
    if LEAN:
        docker_client.images.remove(str(manifest(workdir / "dist")[CU124]["image"]), force=True)
        for path in free_torches(CACHE / "wheelhouse", frozenset({("2.6", "3.13")})):
            print(f"lean: removed {path}")


def test_cuda12_variant_builds_on_debians_toolkit_offline(cu124_build: Path) -> None:
    record = check_cuda_variant(cu124_build, CU124, version="0.1.0+cu124torch2.6cxx98", toolkit="12.4",
                                archs=["9.0+PTX"], cuobjdump="sm_90 + PTX compute_90")
    assert record["cxx11_abi"] is False


CU132 = SharedBuild("docker-cuda", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.15"]
backends = ["cu132"]

[cuda]
arch_list = "8.0;12.0+PTX"   # two archs keep nvcc's time down; sm_120: the newest PyTorch builds for
""")


@pytest.fixture(scope="module")
def cuda_build(offline_build_tables: str) -> Path:
    return make_shared(CU132, offline_build_tables)


def check_cuda_variant(workdir: Path, variant: str, *, version: str, toolkit: str, archs: list[str],
                       cuobjdump: str) -> dict[str, object]:
    """Built, nothing grafted, the record's toolkit and archs, cuobjdump's listing, the size, and the
    smoke test's verdict (CUDA torch, no GPU: prebuilt, CPU ops); returns the record."""
    entry = manifest(workdir / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    wheel = workdir / "dist" / str(entry["wheel"])
    assert wheel.name.startswith(f"fusedops-{version}-cp39-abi3-manylinux_")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record: dict[str, object] = json.loads(archive.read("fusedops/_build.json"))
    grafted = [n for n in names if any(lib in n for lib in ("libcudart", "libcuda.", "libnvrtc", "libtorch", "libc10"))]
    assert not grafted, grafted
    assert record["backend"] == "cuda" and record["toolkit"] == toolkit and record["arch_list"] == archs
    log = (workdir / "dist" / str(entry["log"])).read_text()
    assert f"# cuobjdump fusedops/_C.abi3.so: {cuobjdump}" in log
    assert "# wheel size:" in log
    assert f'{{"mode": "prebuilt", "variant": "{variant}", ' in log
    return record


def test_cuda_wheel_holds_the_requested_archs_and_no_cuda_library(cuda_build: Path) -> None:
    check_cuda_variant(cuda_build, VARIANT, version="0.1.0+cu132torch2.15", toolkit="13.2",
                       archs=["8.0", "12.0+PTX"], cuobjdump="sm_80, sm_120 + PTX compute_120")


