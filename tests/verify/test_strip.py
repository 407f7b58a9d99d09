"""[build] strip: a library's debug info moves out of the wheel into a debug file named by the
library's GNU build id, with real GNU objcopy (and the aarch64 one for an aarch64 library); the
library keeps its code and symbols and links to the file; where no objcopy reads the library's
machine, the wheel stays as it was and the build says why."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from tests.testkit import debug_sections, make_wheel
from wheelfactory.verify import strip
from wheelfactory.verify.strip import ship_stripped, strip_wheel

SOURCE = "int twice(int x) { return 2 * x; }\nint answer(void) { return 42; }\n"
REQUIRED = os.environ.get("CI") == "true"  # .ci/run installs the aarch64 cross tools


def library(tmp_path: Path, compiler: str) -> bytes:
    if shutil.which(compiler) is None:
        if REQUIRED and compiler != "gcc":
            pytest.fail(f"{compiler} is installed by .ci/run (g++-aarch64-linux-gnu)")
        pytest.skip(f"{compiler} builds the test library")
    (tmp_path / "lib.c").write_text(SOURCE)
    out = tmp_path / f"{compiler}.so"
    subprocess.run([compiler, "-g", "-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o", str(out),
                    str(tmp_path / "lib.c")], check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize(("compiler", "arch"), [("gcc", "x86_64"), ("aarch64-linux-gnu-gcc", "aarch64")])
def test_debug_info_moves_beside_the_wheel_by_build_id(tmp_path: Path, compiler: str, arch: str) -> None:
    data = library(tmp_path, compiler)
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": data, "tiny/data.txt": "kept\n"})
    log = tmp_path / "build.log"
    done = strip_wheel(wheel, arch, tmp_path / "out", tmp_path / "debug", log)
    assert done.missing_tool is None and done.wheel != wheel and done.saved > 0
    assert debug_sections(done.wheel) == {"tiny/_C.abi3.so": []}
    (relative,) = done.debug_files
    build_id = next(note["n_desc"] for section in ELFFile(io.BytesIO(data)).iter_sections()
                    if section.name == ".note.gnu.build-id" for note in section.iter_notes())
    assert relative == f".build-id/{build_id[:2]}/{build_id[2:]}.debug"
    debug = ELFFile(io.BytesIO((tmp_path / "debug" / relative).read_bytes()))
    assert debug.get_section_by_name(".debug_info") is not None
    assert debug["e_machine"] == ELFFile(io.BytesIO(data))["e_machine"]
    with zipfile.ZipFile(done.wheel) as archive:
        stripped = ELFFile(io.BytesIO(archive.read("tiny/_C.abi3.so")))
        assert archive.read("tiny/data.txt") == b"kept\n"
    link = stripped.get_section_by_name(".gnu_debuglink")
    assert link is not None and link.data().split(b"\0")[0].decode() == f"{build_id[2:]}.debug"
    assert stripped.get_section_by_name(".symtab") is not None  # symbols stay: a backtrace names functions
    assert stripped["e_machine"] == debug["e_machine"]
    assert f"# strip: tiny/_C.abi3.so: {len(data)} -> " in log.read_text()


def test_a_wheel_without_debug_info_is_shipped_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "lib.c").write_text(SOURCE)
    subprocess.run(["gcc", "-g0", "-shared", "-fPIC", "-o", str(tmp_path / "lib.so"), str(tmp_path / "lib.c")],
                   check=True)
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": (tmp_path / "lib.so").read_bytes()})
    done = strip_wheel(wheel, "x86_64", tmp_path / "out", tmp_path / "debug", tmp_path / "build.log")
    assert done.wheel == wheel and done.debug_files == () and not list((tmp_path / "out").glob("*.whl"))


def test_without_an_objcopy_for_the_machine_the_wheel_keeps_its_debug_info_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": library(tmp_path, "gcc")})
    monkeypatch.setattr(strip, "objcopy_for", lambda arch: None)
    warnings: list[str] = []
    shipped = ship_stripped(True, "aarch64", wheel, tmp_path / "work", tmp_path / "build.log", warnings.append)
    assert shipped == wheel
    assert warnings == ["the debug info stays in tiny/_C.abi3.so: no objcopy for aarch64 here "
                        "(apt-get install binutils-aarch64-linux-gnu)"]


def test_strip_false_ships_the_wheel_as_built(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": library(tmp_path, "gcc")})
    assert ship_stripped(False, "x86_64", wheel, tmp_path / "work", tmp_path / "build.log", print) == wheel
    assert not (tmp_path / "work").exists()
