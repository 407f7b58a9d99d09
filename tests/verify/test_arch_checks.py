"""Verification knows the variant's arch: a library compiled for aarch64 (by Debian's cross
compiler, a real ELF) passes the glibc checks of an aarch64 wheel and the ELF machine check, an
x86-64 one in an aarch64-named wheel fails it; and the smoke test must say it ran as the
variant's arch (platform.machine()), or the wheel fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.verify.elf_fakes import HOST_ONLY
from packaging.version import Version
from tests.testkit import REPO, make_wheel
from wheelfactory.images.emulation import host_arch
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.bring_your_own import ByoProject, ByoStage
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify import checks
from wheelfactory.verify.repair import check_wheel, required_glibc
from wheelfactory.verify.wheel_identity import elf_machine_problems

CROSS = "aarch64-linux-gnu-gcc"  # Debian's g++-aarch64-linux-gnu (.ci/run installs it)
# getrandom() arrived in glibc 2.25: the library needs GLIBC_2.25 whatever the arch
SOURCE = '#include <sys/random.h>\nint draw(void) { char b; return (int)getrandom(&b, 1, 0); }\n'


def aarch64_variant() -> Variant:
    table = load_table()
    text = '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = ["3.11"]\narch = ["aarch64"]\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants[0]


@pytest.fixture(scope="module")
def aarch64_library(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    if shutil.which(CROSS) is None:
        pytest.fail(f"{CROSS} is missing: apt-get install -y g++-aarch64-linux-gnu", pytrace=False)
    work = tmp_path_factory.mktemp("cross")
    (work / "lib.c").write_text(SOURCE)
    subprocess.run([CROSS, "-shared", "-fPIC", "-O1", "-o", str(work / "lib.so"), str(work / "lib.c")], check=True)
    return (work / "lib.so").read_bytes()


def test_an_aarch64_library_passes_the_checks_of_an_aarch64_wheel(tmp_path: Path, aarch64_library: bytes) -> None:
    assert required_glibc(aarch64_library) >= Version("2.25")  # type: ignore[operator]
    assert elf_machine_problems({"byo/_C.so": aarch64_library}, "aarch64") == []
    wheel = make_wheel(tmp_path, "byo", "0.1", tag="cp311-cp311-manylinux_2_28_aarch64",
                       files={"byo/_C.cpython-311-aarch64-linux-gnu.so": aarch64_library})
    assert check_wheel(wheel, package="byo", abi3=False, native=False) == []
    lying = make_wheel(tmp_path / "lying", "byo", "0.1", tag="cp311-cp311-manylinux_2_17_aarch64",
                       files={"byo/_C.cpython-311-aarch64-linux-gnu.so": aarch64_library})
    assert any("but the wheel is tagged for glibc 2.17" in p for p in check_wheel(lying, package="byo", abi3=False,
                                                                                   native=False))


def verify(tmp_path: Path, library: bytes, smoke_output: str) -> None:
    variant = aarch64_variant()
    stage = ByoStage(ByoProject(tmp_path, "byo", (), (), ()), variant)
    wheel = make_wheel(tmp_path / "w", "byo", f"0.1+{variant.local_version}", tag="cp311-cp311-manylinux_2_28_aarch64",
                       files={"byo/_C.cpython-311-aarch64-linux-gnu.so": library})
    checks.verify_wheel(stage, wheel, tmp_path / "build.log", smoke=lambda code, log: smoke_output,
                        timeline=Timeline(tmp_path / "build.log"))


IMPORTED = '{"mode": "imported", "variant": null, "module": "byo", "extensions": {}}\n'


def test_the_smoke_test_must_have_run_as_the_variants_arch(tmp_path: Path, aarch64_library: bytes) -> None:
    verify(tmp_path / "ok", aarch64_library, f"{IMPORTED}{checks.MACHINE_MARK} aarch64\n")
    assert "# smoke: ran as aarch64" in (tmp_path / "ok" / "build.log").read_text()
    with pytest.raises(Exception, match="the smoke test ran as x86_64, not aarch64"):
        verify(tmp_path / "host", aarch64_library, f"{IMPORTED}{checks.MACHINE_MARK} x86_64\n")
    with pytest.raises(Exception, match="the smoke test ran as an unknown machine, not aarch64"):
        verify(tmp_path / "silent", aarch64_library, IMPORTED)  # an emulator that ran nothing says nothing


def test_an_x86_64_library_in_an_aarch64_wheel_fails_before_any_smoke(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="is an ELF file for x86_64, not for aarch64"):
        verify(tmp_path, HOST_ONLY, "")


def test_the_smoke_program_says_its_machine_after_its_result() -> None:
    program = "from __future__ import annotations\nprint('{}')" + checks.MACHINE_PROBE  # as native_smoke.py starts
    done = subprocess.run(["python3", "-c", program], capture_output=True, text=True, check=True)
    assert checks.smoke_machine(done.stdout) == host_arch()
    assert checks.smoke_machine("wheelfactory-smoke-machine arm64\n{}") == "aarch64"
    assert checks.smoke_machine("{}") is None
