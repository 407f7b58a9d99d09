"""The JIT cache key: what invalidates it, and that computing it runs no program."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.runtime.rt_fakes import fake_env
from wheelfactory._runtime import _jit
from wheelfactory._runtime._errors import JitUnavailable
from wheelfactory._runtime._settings import read_settings

SPEC = {
    "schema": 1,
    "name": "tinyops",
    "version": "0.0.1",
    "namespace_macro": "TINYOPS_NAMESPACE",
    "sources": {"cpu": ["csrc/a.cpp"], "cuda": ["csrc/a.cu"]},
    "include_dirs": ["csrc"],
    "cxx_flags": ["-O2"],
    "nvcc_flags": ["-O2", "--use_fast_math"],
    "ops": ["silu_and_mul"],
}


def make_package(parent: Path, spec: dict[str, object] = SPEC) -> Path:
    package = parent / "tinyops"
    (package / "_sources" / "csrc").mkdir(parents=True)
    (package / "_sources" / "csrc" / "a.cpp").write_text("// op\n")
    (package / "_sources" / "csrc" / "a.cu").write_text("// cuda op\n")
    (package / "_sources" / "csrc" / "a.h").write_text("// header\n")
    (package / "_sources" / "jit.json").write_text(json.dumps(spec))
    return package


@pytest.fixture
def no_subprocess(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a program was run while computing the cache key: {args!r}")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def plan(package: Path, env_vars: dict[str, str] | None = None, **env_kw: object) -> _jit._Planned:
    settings = read_settings("tinyops", {"HOME": "/nonexistent", "PATH": "", **(env_vars or {})})
    planned, _ = _jit._plan("tinyops", package, fake_env(**env_kw), settings, ())  # type: ignore[arg-type]
    return planned


def test_key_and_namespace_format(tmp_path: Path, no_subprocess: None) -> None:
    planned = plan(make_package(tmp_path))
    assert re.fullmatch(r"torch2\.13_cpu-0\.0\.1-[0-9a-f]{16}", planned.key)
    assert planned.namespace == f"_tinyops_jit_{planned.digest}"
    assert planned.key.endswith(planned.digest)
    assert plan(make_package(tmp_path / "again")).key != planned.key  # other install path
    assert plan(tmp_path / "tinyops") == planned  # deterministic


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: (p / "_sources/csrc/a.cpp").write_text("// edited\n"), id="source edit"),
        pytest.param(lambda p: (p / "_sources/csrc/a.h").write_text("// edited header\n"), id="header edit"),
        pytest.param(
            lambda p: (p / "_sources/jit.json").write_text(json.dumps({**SPEC, "cxx_flags": ["-O3"]})),
            id="flags",
        ),
        pytest.param(
            lambda p: (p / "_sources/jit.json").write_text(json.dumps({**SPEC, "version": "0.0.2"})),
            id="version",
        ),
    ],
)
def test_package_changes_invalidate(tmp_path: Path, change: object, no_subprocess: None) -> None:
    package = make_package(tmp_path)
    before = plan(package).digest
    change(package)  # type: ignore[operator]
    assert plan(package).digest != before


@pytest.mark.parametrize(
    ("env_vars", "env_kw"),
    [
        ({}, {"torch": "2.13.1+cpu"}),
        ({}, {"abi": False}),
        ({}, {"python": "3.12"}),
        ({"CXX": "clang++"}, {}),
    ],
    ids=["torch version", "C++ ABI", "python ABI", "CXX"],
)
def test_environment_changes_invalidate(
    tmp_path: Path, env_vars: dict[str, str], env_kw: dict[str, object], no_subprocess: None
) -> None:
    package = make_package(tmp_path)
    assert plan(package, env_vars, **env_kw).digest != plan(package).digest


def test_torch_git_version_is_hashed(tmp_path: Path, no_subprocess: None) -> None:
    inputs = plan(make_package(tmp_path)).inputs
    assert _jit.jit_hash(inputs._replace(torch_git_version="feedface")) != _jit.jit_hash(inputs)


def test_cuda_plan_targets_archs_and_toolkit_without_running_anything(
    tmp_path: Path, no_subprocess: None
) -> None:
    package = make_package(tmp_path)
    cuda_env = {"CUDA_HOME": "/opt/cuda-13.0", "TORCH_CUDA_ARCH_LIST": "9.0;12.0+PTX"}
    planned = plan(package, cuda_env, cuda="13.0")
    assert planned.key.startswith("torch2.13_cu130-0.0.1-")
    assert planned.inputs.sources == ("csrc/a.cpp", "csrc/a.cu")
    assert "-gencode=arch=compute_90,code=sm_90" in planned.inputs.device_flags
    assert "-gencode=arch=compute_120,code=compute_120" in planned.inputs.device_flags
    assert planned.inputs.toolkit_home == "/opt/cuda-13.0"
    assert plan(package, {**cuda_env, "CUDA_HOME": "/opt/cuda-13.1"}, cuda="13.0").digest != planned.digest
    assert plan(package, {**cuda_env, "TORCH_CUDA_ARCH_LIST": "9.0"}, cuda="13.0").digest != planned.digest
    # without TORCH_CUDA_ARCH_LIST the present GPU is the target (the fake env has it probed)
    gpu = plan(package, {"CUDA_HOME": "/opt/cuda-13.0"}, cuda="13.0", caps=("8.6",))
    assert [f for f in gpu.inputs.device_flags if "gencode" in f] == ["-gencode=arch=compute_86,code=sm_86"]


def test_cuda_torch_without_gpu_or_arch_list_builds_cpu_ops_only(tmp_path: Path, no_subprocess: None) -> None:
    package = make_package(tmp_path)
    planned = plan(package, {"CUDA_HOME": "/opt/cuda-13.0"}, cuda="13.0")  # fake env: probed, no GPU
    assert planned.key.startswith("torch2.13_cpu-0.0.1-")
    assert planned.inputs.sources == ("csrc/a.cpp",) and planned.inputs.device_flags == ()
    assert planned.note == _jit.CPU_ONLY_NOTE
    # Asking for archs forces the CUDA build even without a GPU (e.g. compiling on a login node).
    forced = plan(package, {"CUDA_HOME": "/opt/cuda-13.0", "TORCH_CUDA_ARCH_LIST": "9.0"}, cuda="13.0")
    assert forced.key.startswith("torch2.13_cu130-") and not forced.note


def test_cpu_variant_package_on_a_gpu_torch_builds_its_cpu_ops(tmp_path: Path, no_subprocess: None) -> None:
    # A CPU variant's wheel ships no device sources: even with archs asked for, the CPU ops only.
    package = make_package(tmp_path, {**SPEC, "sources": {"cpu": ["csrc/a.cpp"]}, "nvcc_flags": []})
    planned = plan(package, {"CUDA_HOME": "/opt/cuda-13.0", "TORCH_CUDA_ARCH_LIST": "9.0"}, cuda="13.0")
    assert planned.key.startswith("torch2.13_cpu-0.0.1-") and planned.inputs.sources == ("csrc/a.cpp",)
    assert planned.note == _jit.CPU_SOURCES_NOTE


def test_rocm_plan_drops_nvcc_only_flags(tmp_path: Path, no_subprocess: None) -> None:
    planned = plan(
        make_package(tmp_path), {"ROCM_HOME": "/opt/rocm-7.1", "PYTORCH_ROCM_ARCH": "gfx942"}, hip="7.1.1"
    )
    assert planned.key.startswith("torch2.13_rocm71-")
    assert planned.inputs.device_flags == ("-O2",)
    assert planned.inputs.gpu_archs == "gfx942"


def test_missing_or_corrupt_spec_makes_jit_unavailable(tmp_path: Path) -> None:
    package = make_package(tmp_path)
    (package / "_sources" / "jit.json").write_text("{")
    with pytest.raises(JitUnavailable, match="corrupt"):
        plan(package)
    shutil.rmtree(package / "_sources")
    with pytest.raises(JitUnavailable, match="the sources were not shipped"):
        plan(package)


@pytest.mark.parametrize(
    ("mutation", "words"),
    [
        ({"sources": {"cpu": ["../../etc/passwd"]}}, "must stay inside _sources/"),
        ({"sources": {"cpu": ["/abs.cpp"]}}, "must stay inside _sources/"),
        ({"namespace_macro": "NOT A MACRO"}, "not an identifier"),
        ({"schema": 9}, "schema 9"),
        ({"ops": []}, "'ops' must list op names"),
    ],
)
def test_bad_specs_are_refused(tmp_path: Path, mutation: dict[str, object], words: str) -> None:
    package = make_package(tmp_path, {**SPEC, **mutation})
    with pytest.raises(JitUnavailable, match=re.escape(words)):
        plan(package)
