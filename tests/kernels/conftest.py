"""Fixtures for the fusedops kernel tests.

The CPU library is compiled once per session with torch.utils.cpp_extension into a
persistent cache directory (WHEELFACTORY_TEST_CACHE, else <repo>/.cache/tests), so a
re-run with unchanged sources only pays for ninja's up-to-date check. (cpp_extension
guards the build with a `lock` file there; if a build was killed, delete it.)

The opt-in tier `--run-cuda-compile` (declared in tests/conftest.py) compiles the .cu
sources to object files with nvcc (slow: 30-60 s per file and C++ standard on two cores).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import cpp_extension

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO_ROOT / "kernels" / "fusedops"
TEST_NAMESPACE = "_fusedops_test_cpu"


@dataclass(frozen=True)
class KernelSources:
    """The parts of kernels/fusedops/kernel.toml the tests build from."""

    include_dirs: tuple[Path, ...]
    cpu: tuple[Path, ...]
    cuda: tuple[Path, ...]
    namespace_macro: str
    nvcc_flags: tuple[str, ...]


def read_kernel_sources() -> KernelSources:
    with open(KERNEL_DIR / "kernel.toml", "rb") as f:
        decl = tomllib.load(f)
    sources = decl["sources"]
    return KernelSources(
        include_dirs=tuple(KERNEL_DIR / p for p in sources["include_dirs"]),
        cpu=tuple(KERNEL_DIR / p for p in sources["cpu"]),
        cuda=tuple(KERNEL_DIR / p for p in sources["cuda"]),
        namespace_macro=decl["kernel"]["namespace_macro"],
        nvcc_flags=tuple(decl.get("flags", {}).get("nvcc", ())),
    )


def cache_dir() -> Path:
    return Path(os.environ.get("WHEELFACTORY_TEST_CACHE") or REPO_ROOT / ".cache" / "tests")


def build_cpu_library() -> Path:
    """Builds (or reuses) the CPU library and loads it into this process.

    benchmarks/kernels.py builds with the same name, flags and directory so the two
    share one cached build; keep them in step.
    """
    src = read_kernel_sources()
    build_dir = cache_dir() / "fusedops_cpu"
    build_dir.mkdir(parents=True, exist_ok=True)
    path = cpp_extension.load(
        name="fusedops_test_cpu",
        sources=[str(p) for p in src.cpu],
        extra_include_paths=[str(p) for p in src.include_dirs],
        extra_cflags=["-O3", f"-D{src.namespace_macro}={TEST_NAMESPACE}", "-DPy_LIMITED_API=0x03090000"],
        is_python_module=False,
        build_directory=str(build_dir),
        verbose=False,
    )
    return Path(path)


def load_reference() -> types.ModuleType:
    """Imports python/fusedops/_reference.py on its own, without the package __init__."""
    path = KERNEL_DIR / "python" / "fusedops" / "_reference.py"
    spec = importlib.util.spec_from_file_location("fusedops_reference_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kernel_sources() -> KernelSources:
    return read_kernel_sources()


@pytest.fixture(scope="session")
def kernel_dir() -> Path:
    return KERNEL_DIR


@pytest.fixture(scope="session")
def test_cache_dir() -> Path:
    return cache_dir()


@pytest.fixture(scope="session")
def ops_namespace() -> str:
    return TEST_NAMESPACE


@pytest.fixture(scope="session")
def fusedops_library() -> Path:
    return build_cpu_library()


@pytest.fixture(scope="session")
def ops(fusedops_library: Path) -> Any:
    return getattr(torch.ops, TEST_NAMESPACE)


@pytest.fixture(scope="session")
def ref() -> types.ModuleType:
    return load_reference()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # One test per CUDA source named in kernel.toml.
    if "cuda_source" in metafunc.fixturenames:
        sources = read_kernel_sources().cuda
        metafunc.parametrize("cuda_source", sources, ids=[p.name for p in sources])
