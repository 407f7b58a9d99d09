"""Fixtures for the fusedops kernel tests.

The CPU library is compiled once per session (fusedops_build: the factory's parser and CPU
recipe, cached across runs and shared with benchmarks/kernels.py).

The opt-in tier `--run-cuda-compile` (declared in tests/conftest.py) compiles the .cu
sources to object files with nvcc (slow: 30-60 s per file and C++ standard on two cores).
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.kernels.fusedops_build import KERNEL_DIR, TEST_NAMESPACE, build_cpu_library, cache_dir, cuda_sources, fusedops
from wheelfactory.project.kernel_toml import KernelSpec


def load_reference() -> types.ModuleType:
    """Imports python/fusedops/_reference.py on its own, without the package __init__."""
    kernel = fusedops()
    path = kernel.root / kernel.python_package / "_reference.py"
    spec = importlib.util.spec_from_file_location("fusedops_reference_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kernel() -> KernelSpec:
    """kernels/fusedops/kernel.toml, as the factory parses it."""
    return fusedops()


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
        sources = cuda_sources(fusedops())
        metafunc.parametrize("cuda_source", sources, ids=[p.name for p in sources])
