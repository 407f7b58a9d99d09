"""Fixtures for the real thing: a wheel built by the host engine, installed into fresh venvs.

Builds and venvs are cached under WHEELFACTORY_TEST_CACHE (default <repo>/.cache/tests): the
factory's own cache key makes an unchanged rebuild a no-op, and a venv is reused only when its
completion marker exists (a half-made venv is rebuilt).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from testkit import REPO, TEST_CACHE, cache_lock, run_build, uv_venv

CACHE = TEST_CACHE
BUILD_TORCH = "2.13.0"  # the torch of the test interpreter (installed by .ci/run)
OTHER_TORCH = "2.14.1"  # a different minor, on this machine's disk


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


def _wheelhouse_sets_with(torch_version: str) -> list[Path]:
    """Sets in the docker tests' wheelhouse that hold this torch for this Python: pip takes the GBs of
    a CUDA torch and its nvidia-* wheels from there instead of downloading them again."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = (CACHE / "wheelhouse" / "sets").glob(f"*/torch-{torch_version}-{tag}-*.whl")
    return sorted({wheel.parent for wheel in wheels})


def _venv(torch_version: str) -> Path:
    path = CACHE / "venvs" / f"torch-{torch_version}"
    marker = path / ".complete"
    with cache_lock(path):
        if not marker.exists():
            _make_venv(path, torch_version)
    return path


def _make_venv(path: Path, torch_version: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    local = tuple(_wheelhouse_sets_with(torch_version))
    uv_venv(path, (f"torch=={torch_version}", "numpy", "ninja"), find_links=local)
    (path / ".complete").write_text(torch_version)


@pytest.fixture(scope="session")
def venv_for() -> Callable[[str], Path]:
    return _venv


@pytest.fixture
def fresh_install(tmp_path: Path, venv_for: Callable[[str], Path]) -> Callable[[str, Path], Path]:
    """Install a wheel for one test into a private target dir on top of a torch venv."""

    def install(torch_version: str, wheel: Path) -> Path:
        venv = venv_for(torch_version)
        target = tmp_path / f"site-{torch_version}"
        run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
            timeout=300)
        return target

    return install
