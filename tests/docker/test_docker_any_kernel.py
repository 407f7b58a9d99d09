"""A second factory-native kernel library (tests/fixtures/axisops: ops scale_shift and clamp_abs,
no name shared with the sample) built in Docker for two torch releases: verified by the generic
smoke check (declared ops registered, references present, sample inputs matched), its own pytest
suite run against each wheel in a clean container (kernel.toml [test]), and loaded prebuilt."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, pip_install

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECT = REPO / "tests" / "fixtures" / "axisops"
VARIANTS = {"torch26-cxx98-cpu-x86_64-linux": "0.3.0+cputorch2.6cxx98",
            "torch213-cxx11-cpu-x86_64-linux": "0.3.0+cputorch2.13"}


AXISOPS = SharedBuild("docker-axisops", PROJECT, '[matrix]\ntorch = ["2.6", "2.13"]\nbackends = ["cpu"]\n')


@pytest.fixture(scope="module")
def axisops_build(offline_build_tables: str) -> Path:
    return make_shared(AXISOPS, offline_build_tables)


def test_another_kernel_builds_for_two_torch_releases_and_passes_its_own_tests(axisops_build: Path) -> None:
    entries = manifest(axisops_build / "dist")
    assert set(entries) == set(VARIANTS)
    for vid, version in VARIANTS.items():
        entry = entries[vid]
        assert entry["status"] in ("built", "cached"), entry
        wheel = axisops_build / "dist" / str(entry["wheel"])
        assert wheel.name.startswith(f"axisops-{version}-cp39-abi3-")
        tests = entry["tests"]
        assert isinstance(tests, dict) and tests["passed"] is True and str(tests["declared_in"]).endswith("kernel.toml")
        log = (axisops_build / "dist" / str(entry["log"])).read_text()
        if entry["status"] == "built":
            # the generic smoke check: both declared ops registered by _C, references, the kernel's samples
            assert "smoke: 2 declared op(s) registered and with references, 3 sample input(s) matched" in log
            assert "4 passed" in log and '"mode": "prebuilt"' in log
        with zipfile.ZipFile(wheel) as archive:
            record = archive.read("axisops/_build.json").decode()
        assert '"scale_shift"' in record and '"clamp_abs"' in record  # the op names, from kernel.toml


def test_the_wheel_loads_prebuilt_outside_the_factory(axisops_build: Path, tmp_path: Path) -> None:
    """Installed into a plain directory beside this interpreter's torch 2.13: prebuilt, and the ops
    named only in kernel.toml (the package passes no ops= to KernelPackage) work."""
    entry = manifest(axisops_build / "dist")["torch213-cxx11-cpu-x86_64-linux"]
    wheel = axisops_build / "dist" / str(entry["wheel"])
    pip_install(sys.executable, "-q", "--no-deps", "--no-index", "--target", str(tmp_path / "site"), str(wheel))
    code = ("import axisops, torch; x = torch.tensor([-2.0, 0.1]); "
            "assert axisops.clamp_abs(x, 1.0).tolist() == [1.0, x[1].item()]; "
            "print(axisops.backend_info()['mode'])")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "prebuilt", out.stderr[-2000:]
