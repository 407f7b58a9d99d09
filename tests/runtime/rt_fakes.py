"""Fake environments for the pure decisions: plain values, no torch or GPU probing."""

from __future__ import annotations

from wheelfactory._runtime._env import Environment
from wheelfactory._runtime._versions import MajorMinor


def fake_env(
    torch: str = "2.13.0+cpu",
    cuda: str | None = None,
    hip: str | None = None,
    abi: bool = True,
    python: str = "3.11",
    machine: str = "x86_64",
    caps: tuple[str, ...] = (),
    gfx: tuple[str, ...] = (),
) -> Environment:
    return Environment(
        torch_version=torch,
        torch_git_version="0123456789ab",
        cuda=MajorMinor.parse(cuda) if cuda else None,
        hip=MajorMinor.parse(hip) if hip else None,
        cxx11_abi=abi,
        python=MajorMinor.parse(python),
        python_abi="cpython-" + python.replace(".", ""),
        machine=machine,
        gpu_capabilities=tuple(MajorMinor.parse(c) for c in caps),
        gpu_archs=gfx,
        gpus_probed=True,
    )
