"""Detect the running environment as plain values (``Environment``) for the pure decisions.

``detect_environment`` only reads attributes of the imported torch and the platform;
``with_gpus`` asks the driver for compute capabilities, which initialises CUDA, so the loader
calls it only when a decision needs them and torch has a GPU backend.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
from dataclasses import dataclass

from ._fit import normalize_machine
from ._versions import Backend, MajorMinor, format_device_tag

__all__ = ["Environment", "detect_environment", "normalize_machine", "with_gpus"]


@dataclass(frozen=True)
class Environment:
    """What a prebuilt library or a JIT build has to match."""

    torch_version: str  # full, e.g. "2.13.0+cpu": shown in messages and hashed for JIT
    torch_git_version: str
    cuda: MajorMinor | None  # torch.version.cuda
    hip: MajorMinor | None  # torch.version.hip
    cxx11_abi: bool
    python: MajorMinor
    python_abi: str  # e.g. "cpython-311": what a Python-linked .so is tied to
    machine: str  # normalised platform.machine(): x86_64, aarch64
    gpu_capabilities: tuple[MajorMinor, ...] = ()  # CUDA devices visible, when probed
    gpu_archs: tuple[str, ...] = ()  # ROCm gfx names, when probed
    gpus_probed: bool = False

    @property
    def torch(self) -> MajorMinor:
        return MajorMinor.parse(self.torch_version)

    @property
    def backend(self) -> Backend:
        if self.hip is not None:
            return "rocm"
        return "cuda" if self.cuda is not None else "cpu"

    @property
    def toolkit(self) -> MajorMinor | None:
        return self.hip if self.hip is not None else self.cuda

    @property
    def device_tag(self) -> str:
        return format_device_tag(self.backend, self.toolkit)

    def summary(self) -> dict[str, object]:
        return {
            "torch": self.torch_version,
            "cuda": None if self.cuda is None else str(self.cuda),
            "hip": None if self.hip is None else str(self.hip),
            "cxx11_abi": self.cxx11_abi,
            "python": str(self.python),
            "machine": self.machine,
            "gpu_capabilities": [str(c) for c in self.gpu_capabilities],
            "gpu_archs": list(self.gpu_archs),
        }


def _optional_version(value: object) -> MajorMinor | None:
    return MajorMinor.parse(value) if isinstance(value, str) and value else None


def detect_environment() -> Environment:
    import torch  # imported here so the value types above stay usable without torch

    return Environment(
        torch_version=str(torch.__version__),
        torch_git_version=str(getattr(torch.version, "git_version", "") or ""),
        cuda=_optional_version(getattr(torch.version, "cuda", None)),
        hip=_optional_version(getattr(torch.version, "hip", None)),
        cxx11_abi=bool(torch.compiled_with_cxx11_abi()),
        python=MajorMinor(sys.version_info.major, sys.version_info.minor),
        python_abi=f"{sys.implementation.cache_tag}{getattr(sys, 'abiflags', '')}",
        machine=normalize_machine(platform.machine()),
    )


def with_gpus(env: Environment) -> Environment:
    """Add the visible GPUs' capabilities (CUDA) or gfx names (ROCm); no-op for a CPU torch."""
    if env.gpus_probed or env.backend == "cpu":
        return dataclasses.replace(env, gpus_probed=True)
    import torch

    caps: list[MajorMinor] = []
    archs: list[str] = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            if env.backend == "rocm":
                name = str(getattr(torch.cuda.get_device_properties(index), "gcnArchName", ""))
                if name:
                    archs.append(name.split(":", 1)[0])
            else:
                major, minor = torch.cuda.get_device_capability(index)
                caps.append(MajorMinor(major, minor))
    return dataclasses.replace(
        env,
        gpu_capabilities=tuple(sorted(set(caps))),
        gpu_archs=tuple(sorted(set(archs))),
        gpus_probed=True,
    )
