"""The -march=native shims (engines/cpu_baseline.py), run for real with sh and this machine's g++:
a unit compiled through them with -march=native holds no instruction beyond x86-64-v2 (read by
disassembly: no ymm/zmm register, which AVX/AVX2/AVX-512 code uses), where the same unit compiled
with -march=native directly on an AVX machine does; the rewrite is noted with the unit; a unit a
project compiles for a higher level on purpose (-mavx2) keeps it."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
from wheelfactory.engines.cpu_baseline import rewrite_note, rewritten, shims_script

# A loop GCC vectorizes at -O3 with the widest vectors -march allows.
LOOP = "void scale(float *x, const float *y, float s, int n) { for (int i = 0; i < n; ++i) x[i] = x[i] * s + y[i]; }\n"
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("g++") is None,
                                reason="x86-64 and g++ (what the build images have)")


def wide_registers(obj: Path) -> bool:
    listing = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    return "%ymm" in listing or "%zmm" in listing


def shims(tmp_path: Path) -> dict[str, str]:
    """The shims made in tmp_path/shims in front of this machine's compilers; the PATH to use."""
    notes = tmp_path / "notes.txt"
    script = tmp_path / "setup.sh"
    script.write_text(shims_script("x86-64-v2", shims=str(tmp_path / "shims"), notes=str(notes)))
    env = {**os.environ, "PATH": f"{tmp_path / 'shims'}:{os.environ['PATH']}"}
    subprocess.run(["sh", str(script)], env=env, check=True)
    return env


def test_native_becomes_the_baseline_and_is_noted(tmp_path: Path) -> None:
    (tmp_path / "loop.cpp").write_text(LOOP)
    env = shims(tmp_path)
    assert (tmp_path / "shims" / "g++").is_file() and (tmp_path / "shims" / "c++").is_file()
    subprocess.run(["g++", "-O3", "-march=native", "-mtune=native", "-c", "loop.cpp", "-o", "shimmed.o"],
                   cwd=tmp_path, env=env, check=True)
    assert not wide_registers(tmp_path / "shimmed.o")
    if "avx" in Path("/proc/cpuinfo").read_text():  # the control: without the shim, native is AVX code here
        subprocess.run(["/usr/bin/g++", "-O3", "-march=native", "-c", "loop.cpp", "-o", "native.o"], cwd=tmp_path,
                       check=True)
        assert wide_registers(tmp_path / "native.o")
    notes = (tmp_path / "notes.txt").read_text()
    assert rewritten(notes) == [("-march=native", "loop.cpp")]
    assert rewrite_note(notes, "x86-64-v2") == (
        "the project's build asks for -march=native (the build machine's CPU) in loop.cpp: compiled for x86-64-v2 "
        "instead, the variant's CPU baseline ([build] cpu_baseline)")


def test_a_unit_built_for_a_higher_level_on_purpose_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "loop.cpp").write_text(LOOP)
    env = shims(tmp_path)
    subprocess.run(["c++", "-O3", "-mavx2", "-c", "loop.cpp", "-o", "avx2.o"], cwd=tmp_path, env=env, check=True)
    assert wide_registers(tmp_path / "avx2.o")  # dispatched to at run time by its project: allowed
    assert not (tmp_path / "notes.txt").exists()
    assert rewrite_note("", "x86-64-v2") is None


def test_arguments_with_spaces_and_quotes_reach_the_compiler_whole(tmp_path: Path) -> None:
    (tmp_path / "q.cpp").write_text('#include <cstdio>\nint main() { std::puts(GREETING); }\n')
    env = shims(tmp_path)
    subprocess.run(["g++", "-march=native", '-DGREETING="hello there"', "q.cpp", "-o", "q"], cwd=tmp_path, env=env,
                   check=True)
    assert subprocess.run([str(tmp_path / "q")], capture_output=True, text=True).stdout == "hello there\n"
