"""Detect the running environment as plain values (``Environment``) for the pure decisions.

``detect_environment`` only reads attributes of the imported torch and the platform;
``with_gpus`` asks the driver for compute capabilities, which initialises CUDA, so the loader
calls it only when a decision needs them and torch has a GPU backend. Both probe through the
lean check's own functions (``_prebuilt.environment_facts``, ``_gpus.visible_gpus``), so it and
the full decision see the same values; ``environment_from`` turns the facts into an ``Environment``.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._fit import normalize_machine
from ._gpus import visible_gpus
from ._prebuilt import environment_facts
from ._versions import Backend, MajorMinor, format_device_tag

if TYPE_CHECKING:
    from ._prebuilt import Facts

__all__ = ["Environment", "detect_environment", "environment_from", "with_gpus"]


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


def environment_from(
    facts: Facts, torch_git_version: str = "", python_abi: str = ""
) -> Environment:
    """The ``Environment`` of ``facts`` (``_prebuilt.environment_facts()``: what torch reports)."""
    torch_version, cuda, hip, cxx11_abi, python, machine = facts
    return Environment(
        torch_version=str(torch_version),
        torch_git_version=torch_git_version,
        cuda=_optional_version(cuda),
        hip=_optional_version(hip),
        cxx11_abi=cxx11_abi,
        python=MajorMinor(*python),
        python_abi=python_abi,
        machine=normalize_machine(machine),
    )


def detect_environment() -> Environment:
    import torch  # imported here so the value types above stay usable without torch

    return environment_from(
        environment_facts(),
        torch_git_version=str(getattr(torch.version, "git_version", "") or ""),
        python_abi=f"{sys.implementation.cache_tag}{getattr(sys, 'abiflags', '')}",
    )


def with_gpus(env: Environment) -> Environment:
    """Add the visible GPUs' capabilities (CUDA) or gfx names (ROCm); no-op for a CPU torch."""
    if env.gpus_probed or env.backend == "cpu":
        return dataclasses.replace(env, gpus_probed=True)
    capabilities, archs = visible_gpus(env.backend)
    return dataclasses.replace(
        env,
        gpu_capabilities=tuple(sorted({MajorMinor(*c) for c in capabilities})),
        gpu_archs=tuple(sorted(set(archs))),
        gpus_probed=True,
    )
