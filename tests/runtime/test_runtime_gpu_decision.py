"""A CUDA build record whose archs cannot serve the present GPU: the runtime decides before any
dlopen that the prebuilt library is not for this GPU, says why, and JIT-builds for that GPU.
The GPU is simulated (none here); the JIT build is stood in for by the fixture's real library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.runtime import rt_assemble as rt
import torch
from tests.runtime.rt_fakes import fake_env
from wheelfactory._runtime import _jit, _loader
from wheelfactory._runtime._decision import Decision
from wheelfactory._runtime._settings import read_settings
from wheelfactory.project.kernel_toml import KernelSpec


def test_a_gpu_the_record_cannot_serve_takes_the_jit_path_with_the_reason(
        kernel: KernelSpec, prebuilt_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = rt.current_record(kernel, rt.PREBUILT_NAMESPACE, backend="cuda", toolkit="13.0",
                               arch_list=["8.0", "9.0"], variant="torch213-cxx11-cu130-x86_64-linux")
    package = rt.assemble(kernel, tmp_path, record=record, library=prebuilt_library)
    torch_version = torch.__version__.split("+")[0]
    env = fake_env(torch=f"{torch_version}+cu130", cuda="13.0", caps=("12.0",))  # an RTX 50xx-class GPU
    monkeypatch.setattr(_loader, "detect_environment", lambda: env)
    monkeypatch.setattr(_loader, "with_gpus", lambda e: e)
    seen: dict[str, Any] = {}

    def fake_jit(package_name: str, package_dir: Path, jit_env: Any, settings: Any,
                 record_archs: tuple[str, ...]) -> _jit.JitResult:
        seen.update(env=jit_env, record_archs=record_archs)
        return _jit.JitResult(prebuilt_library, rt.PREBUILT_NAMESPACE, "torch2.13_cu130-0.0.1-fake", tmp_path, "built",
                              Decision("jit", True, "built for the present GPU (sm_120)"))

    monkeypatch.setattr(_jit, "ensure_jit_library", fake_jit)
    settings = read_settings(kernel.name, {"HOME": str(tmp_path), "PATH": ""})
    result = _loader.load_package(kernel.name, package, kernel.ops, settings)
    assert result.mode == "jit"
    prebuilt, jit = result.decisions
    assert not prebuilt.accepted and "has no kernel for the GPU's compute capability 12.0 (sm_120)" in prebuilt.reason
    assert jit.accepted and seen["env"].gpu_capabilities == env.gpu_capabilities  # the JIT targets this GPU
    assert seen["record_archs"] == ("8.0", "9.0")
