"""A CUDA 12 variant built in Docker for real, offline, with no CUDA wheel from NVIDIA: torch 2.6 +
CUDA 12.4 (pre-cxx11) on Debian trixie with trixie's own nvidia-cuda-toolkit, verified as the
CUDA 13 variant is (tests/docker/test_docker_cuda.py): cuobjdump's listing, no CUDA library
grafted, the smoke test in a fresh container.

After test_docker_real_projects.py in its lane (files are collected in name order): the torch
2.15 builds before it (~9 GB) are freed by then, and the trixie base was made meanwhile in the
background (.ci/run, on the CPU the tests leave); only the toolkit's layer is made here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from tests.docker.docker_helpers import LEAN, check_cuda_variant, free_torches, make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

CACHE = TEST_CACHE
CU124 = "torch26-cxx98-cu124-x86_64-linux"

CU124_BUILD = SharedBuild("docker-cu124", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.6"]
backends = ["cu124"]
cxx11_abi = false

[cuda]
arch_list = "9.0+PTX"   # CUDA 12.4 compiles up to sm_90 (two archs: tests/docker/test_docker_cuda.py)
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
    Freed as soon as its test is done (LEAN): trixie with its CUDA toolkit is ~5.7 GB, its torch
    (Python 3.13) ~3 GB more, and no later test builds on them."""
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
