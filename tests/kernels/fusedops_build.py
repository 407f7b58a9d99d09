"""The fusedops CPU library that the kernel tests and benchmarks/kernels.py share: one build.

kernel.toml is read by the factory's own parser (wheelfactory.project.kernel_toml), and the
compile follows the factory's recipe for a CPU wheel: the kernel's CPU sources, include dirs and
[flags].cxx, the namespace macro as a -D, and the limited API of the cp39-abi3 wheels
(wheelfactory.project.native). Only the namespace is the tests' own, so the library cannot clash
with an installed fusedops.

The library is compiled with torch.utils.cpp_extension into a persistent cache directory
(WHEELFACTORY_TEST_CACHE, else <repo>/.cache/tests), so a re-run with unchanged sources only
pays for ninja's up-to-date check. (cpp_extension guards the build with a `lock` file there;
if a build was killed, delete it.)
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from tests.repo_paths import REPO  # not testkit: the benchmarks import this module without pytest
from wheelfactory.project.kernel_toml import KernelSpec, load_kernel
from wheelfactory.project.stage import LIMITED_API

KERNEL_DIR = REPO / "kernels" / "fusedops"
TEST_NAMESPACE = "_fusedops_test_cpu"
LIBRARY_NAME = "fusedops_test_cpu"


@functools.cache
def fusedops() -> KernelSpec:
    return load_kernel(KERNEL_DIR)


def cache_dir() -> Path:
    return Path(os.environ.get("WHEELFACTORY_TEST_CACHE") or REPO / ".cache" / "tests")


def cuda_sources(kernel: KernelSpec) -> tuple[Path, ...]:
    """The sources a CUDA variant adds to the CPU ones (the .cu units and the host C++ of their
    torch side), as absolute paths."""
    cpu = set(kernel.sources_for("cpu"))
    return tuple(kernel.root / p for p in kernel.sources_for("cuda") if p not in cpu)


def cpu_build_args(kernel: KernelSpec, namespace: str) -> dict[str, list[str]]:
    """``torch.utils.cpp_extension.load`` arguments for the kernel's CPU library, as the factory
    builds it for a CPU abi3 wheel, with op namespace ``namespace``."""
    return {
        "sources": [str(kernel.root / p) for p in kernel.sources_for("cpu")],
        "extra_include_paths": [str(kernel.root / p) for p in kernel.include_dirs],
        "extra_cflags": [*kernel.cxx_flags, f"-D{kernel.namespace_macro}={namespace}",
                         f"-DPy_LIMITED_API={LIMITED_API}"],
    }


def build_cpu_library(verbose: bool = False) -> Path:
    """Builds (or reuses) the fusedops CPU library with TEST_NAMESPACE and loads it into this
    process; returns the library's path."""
    from torch.utils import cpp_extension

    build_dir = cache_dir() / "fusedops_cpu"
    build_dir.mkdir(parents=True, exist_ok=True)
    path = cpp_extension.load(name=LIBRARY_NAME, **cpu_build_args(fusedops(), TEST_NAMESPACE),
                              is_python_module=False, build_directory=str(build_dir), verbose=verbose)
    return Path(path)
