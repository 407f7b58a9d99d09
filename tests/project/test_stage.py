from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable
from email.parser import BytesParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from tests.testkit import REPO
from wheelfactory._runtime._record import BuildRecord
from wheelfactory._runtime._toolkit import TOOLKITS_FILE, ToolkitFacts
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import Plan, expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.project.native import plan_stage, write_stage


def variants(text: str) -> dict[str, Variant]:
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text(text, "matrix.toml"), table, base_dir=REPO)
    return {v.id: v for v in expand(matrix, table).variants}


@pytest.fixture(scope="module")
def planned() -> dict[str, Variant]:
    return variants('[matrix]\ntorch = ["2.6", "2.13"]\nbackends = ["cpu", "cu124", "cu130"]\n')


def test_record_and_namespace(planned: dict[str, Variant]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    stage = plan_stage(kernel, planned["torch26-cxx98-cu124-x86_64-linux"])
    assert stage.version == "0.1.0+cu124torch2.6cxx98"
    assert stage.namespace.startswith("_fusedops_cuda_") and stage.namespace.isidentifier()
    record = stage.record
    assert record.variant == "torch26-cxx98-cu124-x86_64-linux" and record.torch == MajorMinor(2, 6)
    assert record.built_with_torch == "2.6.0" and record.source_digest == stage.source_digest
    assert record.toolkit == MajorMinor(12, 4) and record.cxx11_abi is False and record.library == "_C.abi3.so"
    assert "9.0" in record.arch_list
    other = plan_stage(kernel, planned["torch213-cxx11-cpu-x86_64-linux"])
    assert other.namespace != stage.namespace


def test_generated_setup_py(planned: dict[str, Variant]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    old = plan_stage(kernel, planned["torch26-cxx98-cu124-x86_64-linux"]).setup_py
    ast.parse(old)
    assert "CUDAExtension(" in old and "launchers.cu" in old and "py_limited_api=True" in old
    assert "('Py_LIMITED_API', '0x03090000')" in old  # torch < 2.7 does not define it itself
    new = plan_stage(kernel, planned["torch213-cxx11-cpu-x86_64-linux"]).setup_py
    assert "CppExtension(" in new and ".cu'" not in new and "Py_LIMITED_API" not in new
    assert "EXPECTED_TORCH = '2.13.0'" in new


def test_write_stage_layout(tmp_path: Path, planned: dict[str, Variant]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    stage = plan_stage(kernel, planned["torch213-cxx11-cpu-x86_64-linux"])
    write_stage(stage, tmp_path / "src")
    package = tmp_path / "src" / "fusedops"
    assert (package / "__init__.py").is_file() and (package / "_reference.py").is_file()
    assert (package / "_runtime" / "__init__.py").is_file()
    spec = json.loads((package / "_sources" / "jit.json").read_text())
    for files in spec["sources"].values():
        for rel in files:
            assert (package / "_sources" / rel).is_file()
    assert json.loads((package / "_build.json").read_text())["namespace"] == stage.namespace
    assert not list(package.rglob("__pycache__"))


def test_cpu_variants_ship_and_hash_only_cpu_sources(tmp_path: Path, planned: dict[str, Variant]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    cpu = plan_stage(kernel, planned["torch213-cxx11-cpu-x86_64-linux"])
    write_stage(cpu, tmp_path / "cpu")
    shipped = {p.suffix for p in (tmp_path / "cpu" / "fusedops" / "_sources").rglob("*") if p.is_file()}
    assert ".cu" not in shipped and ".cpp" in shipped and ".h" in shipped
    assert set(cpu.jit_spec["sources"]) == {"cpu"} and cpu.jit_spec["nvcc_flags"] == []  # type: ignore[call-overload]
    cuda = plan_stage(kernel, planned["torch213-cxx11-cu130-x86_64-linux"])
    write_stage(cuda, tmp_path / "cuda")
    assert list((tmp_path / "cuda" / "fusedops" / "_sources").rglob("*.cu"))


def _key_materials(root: Path, planned: dict[str, Variant]) -> dict[str, object]:
    kernel = load_kernel(root)
    return {vid: plan_stage(kernel, planned[vid]).key_material()
            for vid in ("torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux")}


@pytest.mark.parametrize("edited, rebuilt", [
    ("csrc/cuda/launchers.cu", {"torch213-cxx11-cu130-x86_64-linux"}),
    ("csrc/cuda/ops.cpp", {"torch213-cxx11-cu130-x86_64-linux"}),  # host C++ among the CUDA sources
    ("csrc/cpu/activation.cpp", {"torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux"}),
    ("csrc/fusedops.h", {"torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux"}),
])
def test_editing_a_source_changes_only_the_variants_that_read_it(
        tmp_path: Path, planned: dict[str, Variant], edited: str, rebuilt: set[str]) -> None:
    import shutil

    root = tmp_path / "fusedops"
    shutil.copytree(REPO / "kernels" / "fusedops", root, ignore=shutil.ignore_patterns("__pycache__"))
    before = _key_materials(root, planned)
    with (root / edited).open("a") as source:
        source.write("\n// edited\n")
    after = _key_materials(root, planned)
    assert {vid for vid in before if before[vid] != after[vid]} == rebuilt


def test_nvcc_flags_in_kernel_toml_do_not_touch_cpu_variants(tmp_path: Path, planned: dict[str, Variant]) -> None:
    import shutil

    root = tmp_path / "fusedops"
    shutil.copytree(REPO / "kernels" / "fusedops", root, ignore=shutil.ignore_patterns("__pycache__"))
    before = _key_materials(root, planned)
    toml = root / "kernel.toml"
    toml.write_text(toml.read_text().replace('nvcc = ["-O3",', 'nvcc = ["-O2",'))
    after = _key_materials(root, planned)
    assert {vid for vid in before if before[vid] != after[vid]} == {"torch213-cxx11-cu130-x86_64-linux"}


def test_the_record_is_the_runtime_s_type_and_round_trips(tmp_path: Path, planned: dict[str, Variant]) -> None:
    """The factory writes the record with the runtime's BuildRecord, and the runtime reads back
    exactly what was written: every field, for a CPU, a CUDA and a pre-cxx11 variant."""
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    for vid in ("torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux",
                "torch26-cxx98-cu124-x86_64-linux"):
        stage = plan_stage(kernel, planned[vid])
        assert isinstance(stage.record, BuildRecord)
        assert BuildRecord.from_json(json.loads(json.dumps(stage.record.to_json()))) == stage.record
        write_stage(stage, tmp_path / vid)
        written = json.loads((tmp_path / vid / "fusedops" / "_build.json").read_text())
        assert written == stage.record.to_json()
        assert set(written) == {"schema", *BuildRecord._fields}  # a new field is written without a writer change
        assert BuildRecord.from_json(written) == stage.record


def test_the_compat_table_s_toolkit_facts_ship_with_the_runtime(tmp_path: Path, planned: dict[str, Variant]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    stage = plan_stage(kernel, planned["torch213-cxx11-cpu-x86_64-linux"])
    write_stage(stage, tmp_path / "src")
    shipped = json.loads((tmp_path / "src" / "fusedops" / "_runtime" / TOOLKITS_FILE).read_text())
    table = load_table()
    assert shipped == table.toolkit_facts().to_json()
    assert ToolkitFacts.from_json(shipped).cuda == table.toolkit_facts().cuda
    # all of the table's toolkits, not only this (CPU) variant's: a JIT build may meet any of them
    assert set(shipped["cuda"]) == {c.version for c in table.cuda}
    assert shipped["cuda"]["12.4"]["arch_list"] == ";".join(table.cuda_toolkit("12.4").arch_list)
    assert f"'fusedops._runtime': ['{TOOLKITS_FILE}']" in stage.setup_py  # packaged into the wheel


def test_the_staged_build_s_metadata_pins_its_torch_line(tmp_path: Path) -> None:
    """METADATA as setuptools writes it for the staged project (PEP 517 prepare_metadata_for_build_wheel:
    the generated setup.py runs against this interpreter's torch, nothing is compiled)."""
    installed = Version(importlib.metadata.version("torch"))
    (variant,) = variants(f'[matrix]\ntorch = "{installed.public}"\ncxx11_abi = true\n').values()
    stage = plan_stage(load_kernel(REPO / "kernels" / "fusedops"), variant)
    write_stage(stage, tmp_path / "src")
    (tmp_path / "meta").mkdir()
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "meta")], cwd=tmp_path / "src",
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    dist_info = done.stdout.strip().splitlines()[-1]
    metadata = BytesParser().parsebytes((tmp_path / "meta" / dist_info / "METADATA").read_bytes())
    major, minor = installed.release[:2]
    assert metadata.get_all("Requires-Dist") == [f"torch<{major}.{minor + 1},>={major}.{minor}"]
    assert Requirement(metadata["Requires-Dist"]).specifier.contains(str(installed))  # 2.13.0+cpu: a local build


def test_the_setting_reaches_the_generated_setup_py(planned: dict[str, Variant],
                                                    plan_of: Callable[[str], Plan]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    pinned = plan_stage(kernel, planned["torch26-cxx98-cu124-x86_64-linux"])
    assert "install_requires=['torch>=2.6,<2.7']," in pinned.setup_py
    unpinned = plan_stage(kernel, planned["torch26-cxx98-cu124-x86_64-linux"], torch_requirement="unpinned")
    assert "install_requires=['torch']," in unpinned.setup_py and unpinned.key_material() != pinned.key_material()
    stable = plan_of('[matrix]\ntorch = ["2.12"]\nstable_abi = "2.10"\n').variants[0]
    assert "install_requires=['torch>=2.10']," in plan_stage(kernel, stable).setup_py
