"""A CUDA variant built in Docker for real: torch 2.15 + CUDA 13.2 (the newest release the table
knows, as PyPI serves it), nvcc from NVIDIA's wheels,
--network none, auditwheel excluding the CUDA libraries, and verified without a GPU: cuobjdump
lists exactly the requested SASS archs plus PTX for the +PTX one; the smoke test loads the
prebuilt library in a fresh container with the CUDA torch (no GPU: the CPU ops run).

Slow (nvcc for two archs, a ~5 GB torch with its nvidia-* wheels): built once per cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docker_helpers import check_cuda_variant, make_shared
from shared_builds import SharedBuild
from testkit import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

VARIANT = "torch215-cxx11-cu132-x86_64-linux"


CU132 = SharedBuild("docker-cuda", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.15"]
backends = ["cu132"]

[cuda]
arch_list = "8.0;12.0+PTX"   # two archs keep nvcc's time down; sm_120: the newest PyTorch builds for
""")


@pytest.fixture(scope="module")
def cuda_build(offline_build_tables: str) -> Path:
    return make_shared(CU132, offline_build_tables)


def test_cuda_wheel_holds_the_requested_archs_and_no_cuda_library(cuda_build: Path) -> None:
    check_cuda_variant(cuda_build, VARIANT, version="0.1.0+cu132torch2.15", toolkit="13.2",
                       archs=["8.0", "12.0+PTX"], cuobjdump="sm_80, sm_120 + PTX compute_120")


