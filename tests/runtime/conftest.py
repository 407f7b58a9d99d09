"""Fixtures for the runtime tests.

Compiling is the expensive part (~10 s per build of the one-file fixture kernel on 2 cores), so
builds are session fixtures: one prebuilt library, and one cold-cache JIT build made by the
8-process race test, whose warm cache the other tests copy.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime import rt_assemble as rt
from wheelfactory.project.kernel_toml import KernelSpec, load_kernel

PREBUILT_NAMESPACE = rt.PREBUILT_NAMESPACE
RACE_PROCESSES = rt.RACE_PROCESSES


@pytest.fixture(scope="session")
def kernel() -> KernelSpec:
    return load_kernel(rt.FIXTURE_KERNEL)


@pytest.fixture(scope="session")
def prebuilt_library(kernel: KernelSpec, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("prebuilt-build")
    return rt.compile_library(kernel, PREBUILT_NAMESPACE, work / "out" / rt.LIBRARY_NAME, work / "build")


@pytest.fixture(scope="session")
def prebuilt_parent(
    kernel: KernelSpec, prebuilt_library: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A package whose build record matches this environment."""
    parent = tmp_path_factory.mktemp("prebuilt-pkg")
    rt.assemble(
        kernel, parent, record=rt.current_record(kernel, PREBUILT_NAMESPACE), library=prebuilt_library
    )
    return parent


@pytest.fixture(scope="session")
def jit_parent(kernel: KernelSpec, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package whose record says another torch. Its "library" is garbage: were it dlopen()ed
    despite the record, loading would fail, so a clean JIT result proves the check came first."""
    parent = tmp_path_factory.mktemp("jit-pkg")
    major, minor = rt.torch_major_minor()
    record = rt.current_record(kernel, PREBUILT_NAMESPACE, torch=f"{major}.{minor - 1}.0")
    rt.assemble(kernel, parent, record=record, library=b"\x7fELF not really a library")
    return parent


@pytest.fixture(scope="session")
def jit_race(
    kernel: KernelSpec, jit_parent: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict[str, object]]]:
    """8 interpreters started at once on an empty cache: (cache dir, their probe results)."""
    cache = tmp_path_factory.mktemp("race") / "cache"
    env = rt.child_env(kernel, jit_parent, cache_dir=cache)
    procs = [
        subprocess.Popen(
            [rt.PYTHON, "-c", rt.PROBE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(RACE_PROCESSES)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        results.append(rt.parse_probe(subprocess.CompletedProcess(proc.args, proc.returncode, out, err)))
    return cache, results


@pytest.fixture
def warm_cache(jit_race: tuple[Path, list[dict[str, object]]], tmp_path: Path) -> Path:
    """A private copy of the cache the race filled.

    Valid for ``jit_parent`` only: the cache key hashes the package's install path."""
    copy = tmp_path / "cache"
    shutil.copytree(jit_race[0], copy)  # copies modes too: still 0700
    return copy


@pytest.fixture
def empty_bin(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "empty-bin"
    path.mkdir()
    yield path
