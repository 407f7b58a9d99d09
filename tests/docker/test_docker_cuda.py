"""A CUDA variant built in Docker for real: torch 2.15 + CUDA 13.2 (the newest release the table
knows, as PyPI serves it), nvcc from NVIDIA's wheels,
--network none, auditwheel excluding the CUDA libraries, and verified without a GPU: cuobjdump
lists exactly the requested SASS archs plus PTX for the +PTX one; the smoke test loads the
prebuilt library in a fresh container with the CUDA torch (no GPU: the CPU ops run).

Slow (nvcc for three archs, a ~5 GB torch with its nvidia-* wheels): built once per cache.

Its wheel is then split by GPU architecture as a [cuda] split_archs build splits it
(verify/fatbin.py): cuobjdump reads each part back with exactly its own SASS or PTX, byte for
byte the fat library's; and the same matrix with split_archs builds four wheels (sm80, sm90,
sm120, ptx120; the compile cache serves them the whole build's objects), which the index lists
with their sm_arch and select.py chooses among by --gpu. The same image and torch then build
docs/add-an-op.md's result for CUDA (one arch): the page's `.cu` file compiles as written, and
the wheel's library holds its kernel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import build, check_cuda_variant, make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, follow_add_an_op
from wheelfactory.plan.identity import GpuSlice
from wheelfactory.verify import cuda_binary
from wheelfactory.verify.fatbin import keep_part_of_wheel

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]

VARIANT = "torch215-cxx11-cu132-x86_64-linux"


CU132 = SharedBuild("docker-cuda", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.15"]
backends = ["cu132"]

[cuda]
arch_list = "8.0;9.0;12.0+PTX"   # sm_120: the newest PyTorch builds for; one arch more costs nvcc ~2 s
""")

# The same build split by GPU architecture ([cuda] split_archs): four parts, each compiling what
# CU132 compiled (the compile cache serves them), each wheel with its own arch's device code.
SPLIT = SharedBuild("docker-cuda-split", REPO / "kernels" / "fusedops", """[matrix]
torch = ["2.15"]
backends = ["cu132"]

[cuda]
arch_list = "8.0;9.0;12.0+PTX"
split_archs = true
""")
PARTS = {"sm80": "sm_80", "sm90": "sm_90", "sm120": "sm_120", "ptx120": "no SASS + PTX compute_120"}


@pytest.fixture(scope="module")
def cuda_build(offline_build_tables: str) -> Path:
    return make_shared(CU132, offline_build_tables)


def test_cuda_wheel_holds_the_requested_archs_and_no_cuda_library(cuda_build: Path) -> None:
    check_cuda_variant(cuda_build, VARIANT, version="0.1.0+cu132torch2.15", toolkit="13.2",
                       archs=["8.0", "9.0", "12.0+PTX"], cuobjdump="sm_80, sm_90, sm_120 + PTX compute_120")




@pytest.mark.parametrize(("part", "listed"), list(PARTS.items()))
def test_a_part_of_the_wheel_holds_its_own_device_code_only(cuda_build: Path, tmp_path: Path, part: str,
                                                             listed: str) -> None:
    entry = manifest(cuda_build / "dist")[VARIANT]
    fat = cuda_build / "dist" / str(entry["wheel"])
    split = keep_part_of_wheel(fat, GpuSlice.parse(part), tmp_path)
    assert split.libraries == ("fusedops/_C.abi3.so",) and split.wheel.stat().st_size < fat.stat().st_size
    with zipfile.ZipFile(split.wheel) as archive, zipfile.ZipFile(fat) as whole:
        library, fat_library = archive.read("fusedops/_C.abi3.so"), whole.read("fusedops/_C.abi3.so")
    assert cuda_binary.contents(library).describe() == listed
    tool = cuda_binary.find_cuobjdump()
    assert tool is not None
    for data, name in ((library, "part"), (fat_library, "fat")):  # the kept code is the fat library's, unchanged
        (tmp_path / name).mkdir()
        (tmp_path / name / "lib.so").write_bytes(data)
        subprocess.run([tool, "-xelf", "all", "-xptx", "all", "lib.so"], cwd=tmp_path / name, check=True,
                       capture_output=True)
    kept, whole_code = ({".".join(p.name.split(".")[-2:]): p.read_bytes()  # "sm_80.cubin", "sm_120.ptx"
                         for pattern in ("*.cubin", "*.ptx") for p in (tmp_path / name).glob(pattern)}
                        for name in ("part", "fat"))
    assert len(kept) == 1 and kept.items() <= whole_code.items(), (sorted(kept), sorted(whole_code))


def test_the_add_an_op_page_compiles_for_cuda(cuda_build: Path, offline_build_tables: str, tmp_path: Path) -> None:
    """After the shared build (``cuda_build``): its image and torch 2.15 CUDA set serve this one."""
    project = tmp_path / "mykernels"
    subprocess.run([sys.executable, "-m", "wheelfactory", "new", "mykernels", "--path", str(project)], check=True,
                   capture_output=True, timeout=120)
    follow_add_an_op(project)
    work = tmp_path / "work"
    work.mkdir()
    (work / "matrix.toml").write_text(f"""[project]
path = "{project}"

[matrix]
torch = ["2.15"]
backends = ["cu132"]

[cuda]
arch_list = "8.0"
{offline_build_tables}""")
    built = build(work)
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-3000:]
    entry = manifest(work / "dist")[VARIANT]
    assert entry["status"] == "built", entry
    log = (work / "dist" / str(entry["log"])).read_text()
    assert "# cuobjdump mykernels/_C.abi3.so: sm_80" in log, log[-3000:]
    with zipfile.ZipFile(work / "dist" / str(entry["wheel"])) as wheel:
        library = wheel.read("mykernels/_C.abi3.so")
    # the page's kernel and its dispatch name (AT_DISPATCH's string) are in the library
    assert b"relu_squared_kernel" in library and b"relu_squared_cuda" in library


def test_a_split_build_gives_one_wheel_per_gpu_architecture(cuda_build: Path, offline_build_tables: str) -> None:
    """After the whole build (``cuda_build``), whose compiles the parts share."""
    fat = cuda_build / "dist" / str(manifest(cuda_build / "dist")[VARIANT]["wheel"])
    work = make_shared(SPLIT, offline_build_tables)
    entries = manifest(work / "dist")
    assert set(entries) == {VARIANT.replace("-cu132-", f"-cu132-{part}-") for part in PARTS}
    for part, listed in PARTS.items():
        entry = entries[VARIANT.replace("-cu132-", f"-cu132-{part}-")]
        assert entry["status"] in ("built", "cached"), entry
        wheel = work / "dist" / str(entry["wheel"])
        assert wheel.name.startswith(f"fusedops-0.1.0+cu132torch2.15{part}-cp39-abi3-")
        assert wheel.stat().st_size < fat.stat().st_size
        log = (work / "dist" / str(entry["log"])).read_text()
        assert f"# cuobjdump fusedops/_C.abi3.so: {listed} (asked: {listed})" in log, log[-3000:]
        assert "# split: " in log and '{"mode": "prebuilt"' in log
        with zipfile.ZipFile(wheel) as archive:
            record = json.loads(archive.read("fusedops/_build.json"))
        assert record["arch_list"] == [GpuSlice.parse(part).arch_list_entry] and record["parts"] == list(PARTS)


@pytest.fixture(scope="module")
def split_index(cuda_build: Path, offline_build_tables: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the split build's dist/ (the shared build stays as built), indexed."""
    dist = tmp_path_factory.mktemp("split-index") / "dist"
    shutil.copytree(make_shared(SPLIT, offline_build_tables) / "dist", dist)
    indexed = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(dist)], capture_output=True,
                             text=True, timeout=600)
    assert indexed.returncode == 0, indexed.stderr[-3000:]
    return dist


def test_each_part_carries_its_sm_arch_in_the_index(split_index: Path) -> None:
    doc = json.loads((split_index / "index" / "variants" / "simple" / "fusedops" /
                      "fusedops-0.1.0-variants.json").read_text())
    for part in PARTS:
        assert doc["variants"][f"torch215_cxx11_cu132_{part}"]["nvidia"]["sm_arch"] == [GpuSlice.parse(part).sm_arch]


@pytest.fixture(scope="module")
def cuda_torch(cuda_build: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """An interpreter that imports the CUDA torch 2.15 the builds used, and its environment: this
    one with the prepared environment on PYTHONPATH, as the build containers use it, or (once the
    run collected that) a venv hard-linked from the same wheel set."""
    from tests.docker.docker_helpers import REQUIRED, prepared_torch_env
    from tests.testkit import TEST_CACHE, wheelhouse_sets_with, wheelhouse_venv

    python = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    prepared = prepared_torch_env(TEST_CACHE / "wheelhouse", "2.15.0", f"{python}-{python}")
    if prepared is not None:
        return sys.executable, {"PYTHONPATH": str(prepared)}
    sets = wheelhouse_sets_with("2.15.0")
    if not sets:
        message = f"no torch 2.15.0 wheel set for this CPython {sys.version_info[:2]} in the test wheelhouse"
        if REQUIRED:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    venv = wheelhouse_venv(tmp_path_factory.mktemp("cuda-torch") / "venv", ("torch==2.15.0",), sets[0])
    return str(venv / "bin" / "python"), {}


@pytest.mark.parametrize(("gpu", "part", "why"), [
    ("9.0", "sm90", "sm_90 -> sm_90 wheel: its own SASS"),
    ("8.6", "sm80", "sm_86 -> sm_80 wheel: same major, lower minor SASS runs"),
    ("13.0", "ptx120", "sm_130 -> compute_120 PTX wheel: newer than the PTX's arch"),
])
def test_the_index_of_a_split_build_chooses_by_gpu_under_the_cuda_torch(
        split_index: Path, cuda_torch: tuple[str, dict[str, str]], gpu: str, part: str, why: str) -> None:
    """select.py, as the index serves it, run with the CUDA torch 2.15 (no GPU here: --gpu names one)."""
    from wheelfactory.publish.select_script import DEFAULT_BASE_URL, select_script

    python, env = cuda_torch
    chosen = subprocess.run([python, "-", "--index", str(split_index), "--gpu", gpu],
                            input=select_script(DEFAULT_BASE_URL), capture_output=True, text=True, timeout=600,
                            env={**os.environ, **env})
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert f"-> {VARIANT.replace('-cu132-', f'-cu132-{part}-')}" in chosen.stdout, chosen.stdout
    assert f"# {why}" in chosen.stdout and "(cuda 13.2, cxx11 ABI)" in chosen.stdout, chosen.stdout
