"""Bring-your-own projects in the shapes found in the wild, built unedited by the host engine
(`[build] engine = "host"`, this interpreter's torch):

- tests/fixtures/byo_multi: a CUDA module built only with FORCE_CUDA=1 or a GPU (so none on a CPU
  variant), two extension modules of which the package imports one, and an OpenMP module;
- tests/fixtures/byo_abi3: a project that builds its own cp39-abi3 wheel (py_limited_api), with
  `python = ["abi3"]`;
- tests/fixtures/skb_dsp: scikit-build-core + CMake, its build system installed for the host build
  with the host's pip, and a package that imports its declared dependencies (numpy, packaging,
  ninja) in its __init__.

One build each, shared by the tests of this module (cached across runs by the factory's key).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from tests.testkit import DEBUG_INFO, REPO, TEST_CACHE, build_on_host, debug_files, debug_sections

pytestmark = pytest.mark.slow

CACHE = TEST_CACHE
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def build(name: str, import_name: str, python: str, extra: str = "") -> tuple[Path, dict[str, object], str]:
    return build_on_host(REPO / "tests" / "fixtures" / name, import_name, python, extra)


def smoke_result(log: str) -> dict[str, object]:
    """The engine's smoke test output (the last one in the log)."""
    line = [line for line in log.splitlines() if line.startswith('{"mode": "imported"')][-1]
    return json.loads(line)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def multi() -> tuple[Path, dict[str, object], str]:
    # debug_info = true: the same build as the Docker tier's compile-flag test (tests/docker/test_docker_byo_shapes.py)
    return build("byo_multi", "multi_ext", f'["{PYTHON}"]', DEBUG_INFO)


@pytest.fixture(scope="module")
def abi3() -> tuple[Path, dict[str, object], str]:
    return build("byo_abi3", "abi3_ext", '["abi3"]')


def needed(library: bytes) -> list[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    return [tag.needed for section in ELFFile(io.BytesIO(library)).iter_sections()
            if isinstance(section, DynamicSection) for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


def test_several_modules_one_wheel_each_imported_by_the_smoke(multi: tuple[Path, dict[str, object], str]) -> None:
    wheel, entry, log = multi
    assert wheel.name.startswith(f"multi_ext-0.2.0+cputorch2.13-{TAG}-{TAG}-manylinux_")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    libraries = sorted(n for n in names if ".so" in n)
    assert [n.split(".")[0] for n in libraries] == ["multi_ext/_ops_cpu", "multi_ext/_ops_omp"]  # no _ops_cuda
    assert smoke_result(log)["extensions"] == {"multi_ext._ops_cpu": "imported", "multi_ext._ops_omp": "imported"}
    assert entry.get("warnings") is None  # a CPU variant needs no device code
    # [build] debug_info = true keeps the -g of Python's compile flags, and [build] strip (default)
    # moves the DWARF beside the wheel: one debug file per library, by its build id, each library
    # linked to its file (.gnu_debuglink)
    assert debug_sections(wheel) == {name: [] for name in libraries}, debug_sections(wheel)
    files = debug_files(wheel.parent)
    assert len(files) == len(libraries) and all(path.startswith(".build-id/") for path in files), sorted(files)
    for data in files.values():
        assert ELFFile(io.BytesIO(data)).get_section_by_name(".debug_info") is not None
    with zipfile.ZipFile(wheel) as archive:
        for name in libraries:
            link = ELFFile(io.BytesIO(archive.read(name))).get_section_by_name(".gnu_debuglink")
            assert link is not None and link.data().split(b"\0")[0].decode() in {Path(p).name for p in files}
    assert re.search(r"^# strip: \d+ bytes of debug info out of the wheel's libraries", log, re.MULTILINE)


def test_openmp_is_linked_not_grafted_and_torch_provides_it(multi: tuple[Path, dict[str, object], str],
                                                            tmp_path: Path) -> None:
    wheel, _, _ = multi
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if "libgomp" in n or ".libs/" in n]  # nothing grafted
        (omp,) = [n for n in archive.namelist() if n.startswith("multi_ext/_ops_omp")]
        assert "libgomp.so.1" in needed(archive.read(omp))
        archive.extractall(tmp_path / "site")
    import torch

    torch_lib = Path(torch.__file__).parent / "lib"
    check = ("import json, torch, multi_ext\nfrom multi_ext import _ops_omp\n"
             "maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l})\n"
             "print(json.dumps({'threads': _ops_omp.parallel_threads(3), 'library': _ops_omp.openmp_library(),\n"
             "                  'maps': maps, 'scaled': multi_ext.scale(torch.ones(2), 2.0).tolist()}))\n")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["threads"] == 3 and result["scaled"] == [2.0, 2.0]
    # one OpenMP runtime in the process: torch's, even with a system libgomp on this machine
    assert [Path(p).resolve() for p in result["maps"]] == [(torch_lib / "libgomp.so.1").resolve()]
    assert Path(result["library"]).resolve() == (torch_lib / "libgomp.so.1").resolve()


def test_a_torch_libgomp_under_a_hashed_file_name_serves_it_by_soname(
        multi: tuple[Path, dict[str, object], str], tmp_path: Path) -> None:
    """torch <= 2.6 ships torch/lib/libgomp-<hash>.so.1 (SONAME libgomp.so.1) and libtorch_cpu NEEDs
    it by that file name: the extension's NEEDED libgomp.so.1 must resolve to it, not to a system one."""
    wheel, _, _ = multi
    import torch

    hashed = tmp_path / "libgomp-0123abcd.so.1"
    shutil.copyfile(Path(torch.__file__).parent / "lib" / "libgomp.so.1", hashed)
    with zipfile.ZipFile(wheel) as archive:
        (omp,) = [n for n in archive.namelist() if n.startswith("multi_ext/_ops_omp")]
        (tmp_path / "omp.so").write_bytes(archive.read(omp))
    check = (f"import ctypes, importlib.util\nctypes.CDLL({str(hashed)!r})  # as libtorch_cpu loads it\n"
             f"spec = importlib.util.spec_from_file_location('_ops_omp', {str(tmp_path / 'omp.so')!r})\n"
             "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
             "print(module.parallel_threads(2), module.openmp_library())\n")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", str(hashed)]


def test_a_project_that_builds_abi3_itself(abi3: tuple[Path, dict[str, object], str]) -> None:
    wheel, entry, log = abi3
    assert wheel.name.startswith("abi3_ext-1.0.0+cputorch2.13-cp39-abi3-manylinux_")
    assert entry["wheel"].startswith("torch213-cxx11-cpu-x86_64-linux/")  # type: ignore[union-attr]
    assert "abi3audit --strict" in log and '"is_abi3": true' in log
    assert smoke_result(log)["extensions"] == {"abi3_ext._C": "imported"}
    assert debug_sections(wheel) == {"abi3_ext/_C.abi3.so": []}  # by default compiled with -g0


@pytest.fixture(scope="module")
def cmake_project() -> tuple[Path, dict[str, object], str]:
    tests = '[test]\ncommand = "python -m pytest -q {project}/tests"\nrequires = ["pytest"]\nsources = ["tests"]\n'
    return build("skb_dsp", "tinydsp", '["abi3"]', tests)


def test_a_scikit_build_core_project_and_its_declared_dependency(cmake_project: tuple[Path, dict[str, object],
                                                                                     str]) -> None:
    wheel, entry, log = cmake_project
    assert wheel.name.startswith("tinydsp_torch-0.4.1+cputorch2.13-cp39-abi3-manylinux_")
    # the project's build system, installed beside this interpreter's torch for the build
    assert "'scikit-build-core>=0.10' 'cmake>=3.26' 'ninja>=1.5'" in log and "*** Configuring CMake..." in log
    # its __init__ imports numpy, packaging and ninja: the smoke environment got the wheel's dependencies
    assert "-m pip install -q numpy 'packaging>=20' ninja" in log
    assert smoke_result(log)["extensions"] == {"tinydsp._C": "imported"}
    assert entry["tests"]["passed"] is True  # type: ignore[index]


OPTKIT_TABLES = f"""
[project.env]
OPTKIT_BUILD_OPS = "0"
OPTKIT_BUILD_CPU_ADAM = "1"

[test]
command = "pytest -p no:cacheprovider {{project}}/tests/unit"
requires = ["pytest", "adamref"]
sources = ["tests"]
find_links = ["{REPO / 'tests' / 'fixtures' / 'wheels'}"]
"""


@pytest.fixture(scope="module")
def optkit() -> tuple[Path, dict[str, object], str]:
    return build("optkit", "optkit", f'["{PYTHON}"]', OPTKIT_TABLES)


def test_an_op_chosen_by_the_environment_is_prebuilt_for_the_baseline_not_this_cpu(
        optkit: tuple[Path, dict[str, object], str], tmp_path: Path) -> None:
    """tests/fixtures/optkit (DeepSpeed's shape) on the host: the op the environment asks for is in
    the wheel and its loader takes it in the project's own tests; the builder's -march=native is
    compiled for x86-64-v2 here too, since the wheel is for other machines than this one."""
    wheel, entry, log = optkit
    library = f"optkit/ops/adam/cpu_adam_op.cpython-{TAG[2:]}-x86_64-linux-gnu.so"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (tmp_path / "op.so").write_bytes(archive.read(library))
    assert not [n for n in names if "cpu_lion_op" in n], names
    tests: dict[str, object] = entry["tests"]  # type: ignore[assignment]
    assert tests["passed"] is True, tests
    counts = tests.get("counts")  # adamref's test ran too: the wheel the project brings was installed
    assert entry["status"] == "cached" or isinstance(counts, dict) and counts["passed"] == 15, tests
    if entry["status"] == "built":
        assert ("# WARNING: the project's build asks for -march=native (the build machine's CPU) in "
                "csrc/adam/cpu_adam.cpp: compiled for x86-64-v2 instead") in log
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(tmp_path / "op.so")], capture_output=True,
                             text=True, check=True).stdout
    assert "adam_update" in listing and "%ymm" not in listing and "%zmm" not in listing
