"""Fixtures for the real thing: a wheel built by the host engine, installed into fresh venvs.

Builds and venvs are cached under WHEELFACTORY_TEST_CACHE (default <repo>/.cache/tests): the
factory's own cache key makes an unchanged rebuild a no-op, and a venv is reused only when its
completion marker exists (a half-made venv is rebuilt).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.testkit import (
    LEAN,
    REPO,
    TEST_CACHE,
    cache_lock,
    pip_install,
    run_build,
    uv_install_into,
    uv_venv,
    wheelhouse_sets_with,
    wheelhouse_venv,
)

CACHE = TEST_CACHE
BUILD_TORCH = "2.13.0"  # the torch of the test interpreter (installed by .ci/run)


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise AssertionError(f"{command} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def host_dist() -> Path:
    """dist/ with the sample kernels built by `wheelfactory build --engine host` for this torch."""
    import torch

    assert torch.__version__.split("+")[0] == BUILD_TORCH, "run the tests with torch 2.13.0 (see README)"
    out = CACHE / "dist-host"
    with cache_lock(out):  # a module on another worker may build it at the same time
        result = run_build(["--engine", "host", "-o", str(out)], cwd=REPO, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def host_wheel(host_dist: Path) -> Path:
    data = json.loads((host_dist / "manifest.json").read_text())
    (entry,) = [e for e in data["variants"].values() if e["status"] in ("built", "cached")]
    return host_dist / entry["wheel"]


def _venv(torch_version: str) -> Path:
    path = CACHE / "venvs" / f"torch-{torch_version}"
    marker = path / ".complete"
    with cache_lock(path):
        if not marker.exists():
            _make_venv(path, torch_version)
    return path


def _make_venv(path: Path, torch_version: str) -> None:
    """A torch the Docker tier's wheelhouse holds (2.6 for this Python, all run) comes from its
    store and shares the files of the builds' prepared environment (a CUDA torch: 5 GB once, not
    twice); numpy (torch warns on import without it) from the host's index."""
    shutil.rmtree(path, ignore_errors=True)
    sets = wheelhouse_sets_with(torch_version)
    if sets:
        wheelhouse_venv(path, (f"torch=={torch_version}", "ninja"), sets[0])
        uv_install_into(path, ("numpy",))
    else:
        uv_venv(path, (f"torch=={torch_version}", "numpy", "ninja"))
    (path / ".complete").write_text(torch_version)


@pytest.fixture(scope="module", autouse=True)
def lean_venvs(request: pytest.FixtureRequest) -> Iterator[None]:
    """LEAN (CI): the venvs of the torches no later test uses (a module's ``MODULE_VENVS``: torch
    2.14 is a ~5.5 GB CUDA build) go with the module, and their unpacked wheels from uv's cache."""
    yield
    versions: tuple[str, ...] = getattr(request.module, "MODULE_VENVS", ())
    if LEAN and versions:
        from wheelfactory.engines.prepared_env import remove_unlinked_wheels

        for version in versions:
            shutil.rmtree(CACHE / "venvs" / f"torch-{version}", ignore_errors=True)
        remove_unlinked_wheels(CACHE / "uv-cache")


@pytest.fixture(scope="session")
def venv_for() -> Callable[[str], Path]:
    return _venv


@pytest.fixture
def fresh_install(tmp_path: Path, venv_for: Callable[[str], Path]) -> Callable[[str, Path], Path]:
    """Install a wheel for one test into a private target dir on top of a torch venv."""

    def install(torch_version: str, wheel: Path) -> Path:
        venv = venv_for(torch_version)
        target = tmp_path / f"site-{torch_version}"
        pip_install(venv / "bin" / "python", "-q", "--no-deps", "--target", str(target), str(wheel), timeout=300)
        return target

    return install
