"""Whether a library carries GPU device code, read from its ELF sections (no cuobjdump), and what
verification does with a GPU wheel that carries none: a bring-your-own wheel warns, a
factory-native one fails; cuobjdump only ever sees libraries with device code."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from tests.verify.elf_fakes import HOST_ONLY, WITH_CUDA, WITH_HIP, tiny_elf
from tests.testkit import REPO, make_wheel
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.bring_your_own import ByoProject, ByoStage
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify import checks
from wheelfactory.verify import cuda_binary as cudacheck


@pytest.mark.parametrize("library, cuda, hip", [
    (HOST_ONLY, False, False),
    (WITH_CUDA, True, False),
    (tiny_elf({"__nv_relfatbin": b"rdc"}), True, False),  # nvcc -rdc=true
    (WITH_HIP, False, True),
    (tiny_elf({".nv_fatbin": b""}), False, False),  # an empty section holds nothing
    (b"not an ELF file", False, False),
])
def test_device_code_from_elf_sections(library: bytes, cuda: bool, hip: bool) -> None:
    found = cudacheck.device_code(library)
    assert (found.cuda, found.hip) == (cuda, hip)
    assert found.holds("cpu")
    assert found.holds("cuda") == cuda and found.holds("rocm") == hip


def test_missing_device_code_names_the_libraries_and_the_switches() -> None:
    libraries = {"pkg/_ops_cpu.so": HOST_ONLY, "pkg/_ops_omp.so": HOST_ONLY}
    message = cudacheck.missing_device_code("cuda", libraries)
    assert message is not None
    assert "no library in this CUDA wheel holds device code" in message
    assert "pkg/_ops_cpu.so, pkg/_ops_omp.so" in message and ".nv_fatbin" in message
    assert "FORCE_CUDA" in message and "cuda_env" in message
    assert cudacheck.missing_device_code("cuda", {**libraries, "pkg/_ops_cuda.so": WITH_CUDA}) is None
    assert cudacheck.missing_device_code("cpu", libraries) is None
    rocm = cudacheck.missing_device_code("rocm", {"pkg/_ops.so": WITH_CUDA})
    assert rocm is not None and "ROCm wheel" in rocm and ".hip_fatbin" in rocm
    assert cudacheck.missing_device_code("rocm", {"pkg/_ops.so": WITH_HIP}) is None


def gpu_variant(torch: str = "2.14", backend: str = "cu130") -> Variant:
    table = load_table()
    text = f'[matrix]\ntorch = ["{torch}"]\nbackends = ["{backend}"]\ncxx11_abi = "both"\npython = ["3.11"]\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants[0]


def byo_wheel(directory: Path, libraries: Mapping[str, bytes]) -> Path:
    return make_wheel(directory, "multi_ext", "0.2.0+cu130torch2.14", tag="cp311-cp311-manylinux_2_34_x86_64",
                      files=dict(libraries))


@pytest.mark.parametrize("torch, backend, kind", [("2.14", "cu130", "CUDA"), ("2.6", "rocm6.2.4", "ROCm")])
def test_a_byo_gpu_wheel_without_device_code_warns_and_passes(tmp_path: Path, torch: str, backend: str,
                                                              kind: str) -> None:
    variant = gpu_variant(torch, backend)
    stage = ByoStage(ByoProject(tmp_path, "multi_ext", (), (), ()), variant)
    wheel = byo_wheel(tmp_path / "w", {"multi_ext/_ops_cpu.cpython-311-x86_64-linux-gnu.so": HOST_ONLY,
                                       "multi_ext/_ops_omp.cpython-311-x86_64-linux-gnu.so": HOST_ONLY})
    log = tmp_path / "build.log"
    timeline = Timeline(log)
    smoked: list[str] = []

    def smoke(code: str, log: Path) -> str:
        smoked.append(code)
        return '{"mode": "imported", "variant": null, "module": "multi_ext", "extensions": {}}\n' \
            f"{checks.MACHINE_MARK} x86_64\n"

    found = checks.verify_wheel(stage, wheel, log, smoke=smoke, timeline=timeline)  # no cuobjdump: nothing to ask it
    (warning,) = found.warnings
    assert f"no library in this {kind} wheel holds device code" in warning
    assert f"# WARNING: {warning}" in log.read_text()
    assert '"multi_ext._ops_cpu", "multi_ext._ops_omp"' in smoked[0]  # every module is imported


def test_cuobjdump_sees_only_the_libraries_with_device_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    variant = gpu_variant()
    asked: list[bytes] = []

    def contents(library: bytes, *, log: Path | None = None) -> cudacheck.CudaContents:
        asked.append(library)  # cuobjdump exits 255 on a host-only library
        return cudacheck.expected(variant.arch_list)

    monkeypatch.setattr(cudacheck, "contents", contents)
    both = byo_wheel(tmp_path / "a", {"multi_ext/_ops_cpu.so": HOST_ONLY, "multi_ext/_ops_cuda.so": WITH_CUDA})
    assert checks.cuda_problems(variant, both, tmp_path / "log") == [] and asked == [WITH_CUDA]
    host_only = byo_wheel(tmp_path / "b", {"multi_ext/_ops_cpu.so": HOST_ONLY})
    # what a factory-native wheel gets (its verification fails on it): no cuobjdump run either
    assert checks.cuda_problems(variant, host_only, tmp_path / "log") == ["no library in the wheel holds CUDA device code"]
    assert asked == [WITH_CUDA]


def test_a_project_with_its_own_arch_flags_is_told_the_setting_that_matches_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A setup.py passing -gencode compiles its own archs whatever TORCH_CUDA_ARCH_LIST says: the
    mismatch names what it built and the [cuda] arch_list that would plan exactly that."""
    variant = gpu_variant()
    built = cudacheck.CudaContents(frozenset({"80", "90"}), frozenset())
    monkeypatch.setattr(cudacheck, "contents", lambda library, *, log=None: built)
    wheel = byo_wheel(tmp_path / "a", {"multi_ext/_ops_cuda.so": WITH_CUDA})
    problem = "; ".join(checks.cuda_problems(variant, wheel, tmp_path / "log", own_archs=True))
    assert "the library holds SASS for ['80', '90']" in problem and '[cuda] arch_list = "8.0;9.0"' in problem
    assert "-gencode" in problem and "\n" not in problem
    plain = checks.cuda_problems(variant, wheel, tmp_path / "log")  # factory-generated flags: no such hint
    assert plain and not any("arch_list =" in p for p in plain)
