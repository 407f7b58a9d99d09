"""What verification asks of bring-your-own wheels: several extension modules (each one imported by
the smoke test), abi3 built by the project itself, and no OpenMP runtime of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from tests.verify.elf_fakes import HOST_ONLY
from tests.testkit import make_wheel
from wheelfactory.verify.byo_smoke import extension_modules, smoke_code
from wheelfactory.verify.repair import check_wheel

TAG = "cp311-cp311-manylinux_2_34_x86_64"


def test_a_byo_wheel_with_several_modules_and_no_underscore_c_passes(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "multi_ext", "0.2.0", tag=TAG, files={
        "multi_ext/_ops_cpu.cpython-311-x86_64-linux-gnu.so": HOST_ONLY,
        "multi_ext/_ops_omp.cpython-311-x86_64-linux-gnu.so": HOST_ONLY})
    assert check_wheel(wheel, package="multi_ext", abi3=False, native=False) == []
    native = check_wheel(wheel, package="multi_ext", abi3=False, native=True)
    assert "the compiled library _C is missing" in native  # what a factory-native wheel must have


def test_a_grafted_openmp_runtime_fails(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "multi_ext", "0.2.0", tag=TAG, files={
        "multi_ext/_ops_omp.cpython-311-x86_64-linux-gnu.so": HOST_ONLY,
        "multi_ext.libs/libgomp-a34b3233.so.1": HOST_ONLY})
    (problem,) = check_wheel(wheel, package="multi_ext", abi3=False, native=False)
    assert "grafted into the wheel: multi_ext.libs/libgomp-a34b3233.so.1" in problem


@pytest.mark.parametrize("tag, ok", [
    ("cp39-abi3-manylinux_2_34_x86_64", True),
    ("cp310-abi3-manylinux_2_34_x86_64", True),  # the project's own floor: its choice
    ("cp311-cp311-manylinux_2_34_x86_64", False),
])
def test_abi3_for_a_byo_project_is_any_abi3_tag_it_builds(tmp_path: Path, tag: str, ok: bool) -> None:
    wheel = make_wheel(tmp_path, "abi3_ext", "1.0.0", tag=tag, files={"abi3_ext/_C.abi3.so": HOST_ONLY})
    problems = check_wheel(wheel, package="abi3_ext", abi3=True, native=False)
    if ok:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.startswith(f"abi3_ext-1.0.0-{tag}.whl is not an abi3 wheel")
        assert "[matrix] python" in problem and "py_limited_api = cp39 under [bdist_wheel]" in problem
    if tag.startswith("cp310"):  # a factory-native wheel is always cp39-abi3
        assert any("is not tagged cp39-abi3" in p for p in check_wheel(wheel, package="abi3_ext", abi3=True,
                                                                       native=True))


def test_extension_modules_are_the_packages_compiled_modules() -> None:
    names = ["pkg/__init__.py", "pkg/_a.cpython-311-x86_64-linux-gnu.so", "pkg/sub/_b.abi3.so", "pkg/_plain.so",
             "pkg/libhelper.so", "pkg.libs/libgomp-a34b3233.so.1", "pkg.libs/libz-1234abcd.so",
             "pkg-1.0.data/purelib/x.so", "pkg-1.0.dist-info/RECORD", "top.cpython-311-x86_64-linux-gnu.so",
             "pkg/not-a-module.so", "pkg/library.cpython-311-x86_64-linux-gnu.so"]
    assert extension_modules(names) == ("pkg._a", "pkg._plain", "pkg.library", "pkg.sub._b", "top")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_smoke_imports_each_module_and_loads_op_libraries(tmp_path: Path) -> None:
    """A Python module is imported; a library without PyInit_ (an op library) is loaded with
    torch.ops.load_library; a module that fails to load fails the smoke."""
    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (tmp_path / "mod.c").write_text('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '
                                    '"_mod", 0, -1, 0};\nPyMODINIT_FUNC PyInit__mod(void) { return PyModule_Create(&m); }\n')
    (tmp_path / "ops.c").write_text("int registered_op(void) { return 1; }\n")
    (tmp_path / "broken.c").write_text("extern int missing_symbol(void);\nint f(void) { return missing_symbol(); }\n")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for source, name in (("mod.c", f"_mod{suffix}"), ("ops.c", "_ops.so"), ("broken.c", "_broken.so")):
        subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(package / name),
                        str(tmp_path / source)], check=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([sys.executable, "-c", smoke_code("pkg", ["pkg._mod", "pkg._ops"])], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["mode"] == "imported" and result["module"] == "pkg"
    assert result["extensions"] == {"pkg._mod": "imported", "pkg._ops": "load_library"}
    failed = subprocess.run([sys.executable, "-c", smoke_code("pkg", ["pkg._broken"])], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=300)
    assert failed.returncode != 0 and "missing_symbol" in failed.stderr
