"""Bring-your-own projects in the shapes found in the wild, built unedited by the docker engine
(cibuildwheel, auditwheel repair with the factory's excludes, smoke test in a fresh container),
torch 2.13 CPU:

- tests/fixtures/byo_multi: two extension modules (one the package does not import itself), an
  OpenMP module (it loads, with torch's libgomp, in a container whose system libgomp is deleted),
  and a CUDA module built only with FORCE_CUDA=1 (none on a CPU variant);
- tests/fixtures/byo_abi3: a project that builds its own cp39-abi3 wheel, with python = ["abi3"].

The GPU side of the first shape (FORCE_CUDA=1 by default, a warning for a host-only CUDA wheel) is
covered without a GPU toolkit in tests/project/test_byo_gpu_switches.py and
tests/verify/test_device_code.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import docker
import pytest
from tests.docker.docker_helpers import make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import DEBUG_INFO, REPO, debug_files, debug_sections
from wheelfactory.images.containers import Container

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = REPO / "tests" / "fixtures"


def shape(name: str, import_name: str, python: str, build_keys: str = "") -> SharedBuild:
    return SharedBuild(f"docker-{name.replace('_', '-')}", FIXTURES / name,
                       f'import_name = "{import_name}"\n[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = {python}\n',
                       build_keys=build_keys)


# debug_info = true: the compile flags are read back from the DWARF (optimization_levels); the
# host tier builds the same project with the same key (tests/integration/test_host_byo.py).
MULTI = shape("byo_multi", "multi_ext", '["3.11"]', build_keys=DEBUG_INFO)
ABI3 = shape("byo_abi3", "abi3_ext", '["abi3"]')


def smoke_result(log: str) -> dict[str, object]:
    line = [line for line in log.splitlines() if line.startswith('{"mode": "imported"')][-1]
    return json.loads(line)  # type: ignore[no-any-return]


def needed(library: bytes) -> list[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    return [tag.needed for section in ELFFile(io.BytesIO(library)).iter_sections()
            if isinstance(section, DynamicSection) for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


# In the build image (which has gcc, hence a system libgomp) with that libgomp deleted: the wheel
# installed beside the prepared torch must still load, and use torch's OpenMP runtime.
NO_SYSTEM_GOMP = """
import glob, os
for path in glob.glob("/usr/lib/*/libgomp.so*") + glob.glob("/usr/lib/libgomp.so*"):
    os.remove(path)
import json, multi_ext
from multi_ext import _ops_omp
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libgomp" in l})
print(json.dumps({"threads": _ops_omp.parallel_threads(3), "library": _ops_omp.openmp_library(), "maps": maps}))
"""


def test_several_modules_and_openmp(offline_build_tables: str, tmp_path: Path,
                                    docker_client: docker.DockerClient) -> None:
    workdir = make_shared(MULTI, offline_build_tables)
    (entry,) = manifest(workdir / "dist").values()
    assert entry["status"] in ("built", "cached"), entry
    wheel = workdir / "dist" / str(entry["wheel"])
    assert wheel.name.startswith("multi_ext-0.2.0+cputorch2.13-cp311-cp311-manylinux_") and "x86_64" in wheel.name
    log = (workdir / "dist" / str(entry["log"])).read_text()
    environment = [line for line in log.splitlines() if line.startswith("CIBW_ENVIRONMENT=")]
    assert environment and "FORCE_CUDA" not in environment[-1]  # a CPU variant gets no GPU switch
    # the smoke container imported both modules, the one the package leaves to its users too
    assert smoke_result(log)["extensions"] == {"multi_ext._ops_cpu": "imported", "multi_ext._ops_omp": "imported"}
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert sorted(n.split(".")[0] for n in names if ".so" in n) == ["multi_ext/_ops_cpu", "multi_ext/_ops_omp"]
        assert not [n for n in names if "libgomp" in n or ".libs/" in n]  # auditwheel grafted no OpenMP runtime
        (omp,) = [n for n in names if n.startswith("multi_ext/_ops_omp")]
        assert "libgomp.so.1" in needed(archive.read(omp))
        archive.extractall(tmp_path / "site")
    # The wheel from the container, with this interpreter's torch 2.13: torch's libgomp serves it.
    import torch

    torch_gomp = (Path(torch.__file__).parent / "lib" / "libgomp.so.1").resolve()
    check = ("import json, multi_ext\nfrom multi_ext import _ops_omp\n"
             "maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l})\n"
             "print(json.dumps({'threads': _ops_omp.parallel_threads(3), 'maps': maps}))\n")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["threads"] == 3 and [Path(p).resolve() for p in result["maps"]] == [torch_gomp]
    # The same in a container from the build image, its own libgomp deleted, with the variant's
    # prepared torch (the one the smoke test mounts; its path is in build.log).
    prepared = [line for line in log.splitlines() if "prepared environment torch-" in line][-1]
    torch_env = Path(prepared.split("(", 1)[1].split(",")[0].rstrip(")"))
    interpreter = "/opt/python/cp311-cp311/bin/python"
    with Container(docker_client, str(entry["image"]), volumes={torch_env: "/torchenv:ro", wheel.parent: "/dist:ro"},
                   labels={"wheelfactory.test": "byo-shapes"}) as box:
        box.run([interpreter, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check",
                 "--target", "/tmp/site", f"/dist/{wheel.name}"])
        output = box.run([interpreter, "-s", "-c", NO_SYSTEM_GOMP], workdir="/tmp",
                         environment={"PYTHONPATH": "/tmp/site:/torchenv"})
    inside = json.loads(output.strip().splitlines()[-1])
    assert inside == {"threads": 3, "library": "/torchenv/torch/lib/libgomp.so.1",
                      "maps": ["/torchenv/torch/lib/libgomp.so.1"]}


def test_a_project_that_builds_abi3_itself(offline_build_tables: str) -> None:
    workdir = make_shared(ABI3, offline_build_tables)
    entries = manifest(workdir / "dist")
    assert list(entries) == ["torch213-cxx11-cpu-x86_64-linux"]  # one wheel for every CPython
    (entry,) = entries.values()
    assert entry["status"] in ("built", "cached"), entry
    assert Path(str(entry["wheel"])).name.startswith("abi3_ext-1.0.0+cputorch2.13-cp39-abi3-manylinux_")
    log = (workdir / "dist" / str(entry["log"])).read_text()
    assert "abi3audit --strict" in log and '"is_abi3": true' in log
    assert smoke_result(log)["extensions"] == {"abi3_ext._C": "imported"}
    # [build] debug_info left at false: Python's -g dropped (-g0), as in released torch wheels
    assert debug_sections(workdir / "dist" / str(entry["wheel"])) == {"abi3_ext/_C.abi3.so": []}


def optimization_levels(wheel: Path) -> dict[str, str]:
    """Each compilation unit of the wheel's libraries -> the last -O flag GCC recorded for it
    (DW_AT_producer: the command-line options, with -grecord-gcc-switches, GCC's default), read
    from the debug files [build] strip put beside the wheel."""
    import re

    from elftools.elf.elffile import ELFFile

    levels: dict[str, str] = {}
    files = debug_files(wheel.parent)
    assert files, f"no debug file beside {wheel.name}: Python's CFLAGS have -g, and debug_info = true"
    for name, data in files.items():
        elf = ELFFile(io.BytesIO(data))
        assert elf.has_dwarf_info(), f"{name} has no DWARF: Python's CFLAGS have -g, and debug_info = true"
        for unit in elf.get_dwarf_info().iter_CUs():
            top = unit.get_top_DIE()
            producer = top.attributes["DW_AT_producer"].value.decode()
            flags = re.findall(r"(?:^| )(-O(?:\d|s|fast|g)?)\b", producer)
            levels[top.attributes["DW_AT_name"].value.decode()] = flags[-1] if flags else "-O0 (none given)"
    return levels


def test_both_engines_compile_with_the_optimization_python_gives(offline_build_tables: str,
                                                                 docker_client: docker.DockerClient) -> None:
    """The same project built by each engine: every unit is compiled with the -O level of the
    building interpreter's own CFLAGS (sysconfig), which setuptools uses unless CFLAGS is set in
    the environment. The host engine's path mapping once went into CFLAGS and replaced them: -O0."""
    import sysconfig

    from tests.testkit import build_on_host

    workdir = make_shared(MULTI, offline_build_tables)
    (entry,) = manifest(workdir / "dist").values()
    in_docker = optimization_levels(workdir / "dist" / str(entry["wheel"]))
    with Container(docker_client, str(entry["image"]), labels={"wheelfactory.test": "byo-shapes"}) as box:
        container_cflags = box.run(["/opt/python/cp311-cp311/bin/python", "-c",
                                    "import sysconfig; print(sysconfig.get_config_var('CFLAGS'))"]).strip()
    host_wheel, _, _ = build_on_host(FIXTURES / "byo_multi", "multi_ext", f'["{sys.version_info[0]}.{sys.version_info[1]}"]',
                                     DEBUG_INFO)
    on_host = optimization_levels(host_wheel)
    expected_docker = [f for f in container_cflags.split() if f.startswith("-O")][-1]
    expected_host = [f for f in str(sysconfig.get_config_var("CFLAGS")).split() if f.startswith("-O")][-1]
    assert set(in_docker.values()) == {expected_docker}, in_docker
    assert set(on_host.values()) == {expected_host}, on_host
    # the same units, each built by both (named where each compiled them: /project, or the mapped copy)
    assert sorted(Path(u).name for u in in_docker) == sorted(Path(u).name for u in on_host)
