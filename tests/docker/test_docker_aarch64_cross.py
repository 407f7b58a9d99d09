"""The aarch64 build CI runs: the sample's torch 2.9 CPU variant for aarch64, built in Docker on
this x86-64 machine. Its base is made by debootstrap for arm64 ([build] debian_base) and carries
the suite's x86-64-hosted cross compilers; the compile runs them natively, while Python,
auditwheel, the smoke test (which must say it ran as aarch64) run under QEMU user emulation.

torch 2.9 because PyPI's aarch64 torch 2.13 is its CUDA 13 build (4.5 GB prepared, emulated),
while 2.9 is the newest CPU-only one (~100 MB): the same path, at a price CI can pay. The full
aarch64 tier (torch 2.13, a native fixture's own tests, a bring-your-own project, select.py) is
tests/docker/test_docker_aarch64.py, opt-in with --run-emulated.

.ci/run sets emulation up with `wheelfactory engine start --emulate aarch64` (QEMU >= 10, from
bookworm-backports on bookworm); elsewhere the test skips without it, naming the fix."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import REQUIRED, make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE

# last: .ci/run starts `wheelfactory base-image --arch aarch64` in the background before the tests
# (ensure_base_image lets one maker at a time make a base: this waits for it if it is not done)
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.last, pytest.mark.lane("docker-projects")]
MODULE_TORCHES = frozenset({("2.9", "3.11")})  # PyPI's aarch64 CPU build: this module's alone (LEAN frees it)

VARIANT = "torch29-cxx11-cpu-aarch64-linux"


def emulation_or_skip() -> None:
    from wheelfactory.images.emulation import arch_support

    support = arch_support("aarch64")
    if not support.runs:
        message = f"aarch64 code does not run here: {support.how}; fix: {support.fix}"
        if REQUIRED:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


CROSS = SharedBuild("docker-aarch64-cross", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.9"]
backends = ["cpu"]
python = ["abi3"]
arch = ["aarch64"]
""", build_table=f"""[build]
engine = "docker"
debian_base = "bookworm"
torch_index = "pypi"
wheelhouse = "{TEST_CACHE / 'wheelhouse'}"
""")


@pytest.fixture(scope="module")
def cross_build() -> Path:
    emulation_or_skip()
    return make_shared(CROSS)


def test_the_samples_aarch64_variant_is_cross_compiled_and_its_op_runs_as_aarch64(tmp_path: Path,
                                                                                   cross_build: Path) -> None:
    entry = manifest(cross_build / "dist")[VARIANT]
    assert entry["status"] in ("built", "cached"), entry
    wheel = cross_build / "dist" / str(entry["wheel"])
    assert wheel.name.endswith("-cp39-abi3-manylinux_2_34_aarch64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        (tmp_path / "_C.so").write_bytes(archive.read("fusedops/_C.abi3.so"))
    header = subprocess.run(["readelf", "-h", str(tmp_path / "_C.so")], capture_output=True, text=True,
                            check=True).stdout
    assert "AArch64" in header, header
    if entry["status"] == "built":
        log = (cross_build / "dist" / str(entry["log"])).read_text()
        assert "# compiling with the image's cross compilers (/opt/wheelfactory/cross/bin, run natively on x86_64)" in log
        # the objects came from the cross compiler: its driver is what the build ran
        assert "/opt/wheelfactory/cross/bin" in log
        assert "# smoke: ran as aarch64" in log and '"mode": "prebuilt"' in log
