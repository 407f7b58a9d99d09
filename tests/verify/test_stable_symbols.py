"""The stable-ABI symbol check (verify/stable_symbols.py) on real libraries built here by g++,
against the shim versions read from this interpreter's torch headers: a shim at or below the
target, the C/C++ runtime and the Python C API pass; an ATen function is refused by its C++ name,
a shim newer than the target by its name and the release that added it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from wheelfactory.verify.stable_symbols import declared_stable_target, shim_versions, stable_abi_problems

SOURCE = """#include <cstdint>
#include <string>
extern "C" int aoti_torch_get_numel(void*, int64_t*);  // in the stable surface since before 2.10
extern "C" void* PyLong_FromLong(long);
%s
extern "C" int use(void* t) {
  int64_t n = 0;
  aoti_torch_get_numel(t, &n);
  PyLong_FromLong(1);
  std::string s(static_cast<const char*>(t));
  %s
  return static_cast<int>(n + s.size());
}
"""


@pytest.fixture(scope="module")
def shims() -> dict[str, str | None]:
    torch = pytest.importorskip("torch")
    found = shim_versions(Path(os.path.dirname(torch.__file__)) / "include")
    assert found.get("aoti_torch_get_numel", "absent") is None  # no version guard: older than the stable ABI's
    return found


def library(tmp_path: Path, declaration: str = "", call: str = "") -> dict[str, bytes]:
    if shutil.which("g++") is None:
        pytest.skip("g++ builds the test library")
    (tmp_path / "lib.cpp").write_text(SOURCE % (declaration, call))
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "lib.so"), str(tmp_path / "lib.cpp")],
                   check=True, capture_output=True)
    return {"pkg/_C.abi3.so": (tmp_path / "lib.so").read_bytes()}


def test_the_stable_surface_and_the_runtimes_pass(tmp_path: Path, shims: dict[str, str | None]) -> None:
    assert stable_abi_problems(library(tmp_path), shims, "2.10") == []


def test_an_aten_function_is_refused_by_its_cxx_name(tmp_path: Path, shims: dict[str, str | None]) -> None:
    libs = library(tmp_path, "namespace at { struct Tensor { int64_t numel() const; }; }",
                   "n += reinterpret_cast<const at::Tensor*>(t)->numel();")
    (problem,) = stable_abi_problems(libs, shims, "2.10")
    assert problem.startswith("pkg/_C.abi3.so imports at::Tensor::numel() const (_ZNK2at6Tensor5numelEv), which is "
                              "not in torch's stable ABI"), problem


def test_a_shim_newer_than_the_target_is_refused_with_its_release(tmp_path: Path,
                                                                   shims: dict[str, str | None]) -> None:
    newest = max((v for v in shims.values() if v), key=lambda v: tuple(map(int, v.split("."))))
    name = sorted(n for n, v in shims.items() if v == newest)[0]
    libs = library(tmp_path, f'extern "C" int {name}(void*);', f"n += {name}(t);")
    (problem,) = stable_abi_problems(libs, shims, "2.10")
    assert problem.startswith(f"pkg/_C.abi3.so calls {name}, a shim torch {newest} added, above the stable-ABI "
                              f"target 2.10"), problem
    assert f'raise [matrix] stable_abi to "{newest}"' in problem
    assert stable_abi_problems(libs, shims, newest) == []  # at its own release it is in the surface


@pytest.mark.parametrize(("name", "text", "target"), [
    ("setup.py", 'define_macros=[("TORCH_TARGET_VERSION", "0x020a000000000000")]', "2.10"),
    ("setup.py", 'extra_compile_args={"cxx": ["-DTORCH_TARGET_VERSION=0x020c000000000000"]}', "2.12"),
    ("CMakeLists.txt", "target_compile_definitions(_C PRIVATE TORCH_TARGET_VERSION=0x020b000000000000)", "2.11"),
    ("setup.py", "ext_modules=[CppExtension('x._C', ['x.cpp'])]", None),
])
def test_a_projects_own_build_files_declare_its_target(tmp_path: Path, name: str, text: str,
                                                        target: str | None) -> None:
    (tmp_path / name).write_text(text + "\n")
    assert declared_stable_target(tmp_path) == target


def test_two_different_targets_are_no_one_claim(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("-DTORCH_TARGET_VERSION=0x020a000000000000\n")
    (tmp_path / "CMakeLists.txt").write_text("TORCH_TARGET_VERSION=0x020c000000000000\n")
    assert declared_stable_target(tmp_path) is None
