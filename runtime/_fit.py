"""Does a build fit an environment? The one rule, on plain values.

Used by the runtime before it loads a prebuilt library (``_record.decide_prebuilt``), by
``wheelfactory which`` and by the index's ``select.py`` (which picks the variant to install), and
its CUDA minor-version groups by the JIT toolchain check and the factory's compatibility table.
Its spellings are the runtime's and the factory's too: the machine names (``normalize_machine``)
and the major.minor reading (``parse_major_minor``, under ``_versions.MajorMinor.parse``).

Standard library only and no imports from its own package, on purpose: ``wheelfactory index``
pastes this file's source into ``select.py``, which the target interpreter runs on its own
(``curl -s URL/select.py | python -``). Keep it that way: the test of select.py runs it with
nothing but the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "Fit",
    "FitBuild",
    "FitEnv",
    "check_fit",
    "gpu_part_rank",
    "gpu_part_serves",
    "normalize_machine",
    "parse_major_minor",
    "same_cuda_group",
]

_FIT_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
_FIT_MAJOR_MINOR = r"^\s*v?(\d+)\.(\d+)"
ABI3_MIN_PYTHON = (3, 9)  # cp39-abi3 wheels


def normalize_machine(machine: str) -> str:
    """``platform.machine()`` spellings -> one name (AMD64 -> x86_64, arm64 -> aarch64)."""
    lowered = machine.lower()
    return _FIT_MACHINE_ALIASES.get(lowered, lowered)


def parse_major_minor(text: str) -> tuple[int, int]:
    """``2.13.0+cpu``, ``6.2.41133-dd7f95766``, ``13.0`` -> (major, minor); ValueError quoting the text."""
    match = re.match(_FIT_MAJOR_MINOR, text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not a major.minor version: {text!r}")
    return int(match.group(1)), int(match.group(2))


def _mm(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


class FitBuild(NamedTuple):
    """What a build was made for (a build record, or a row of the index's index.json)."""

    torch: str  # "2.13" or "2.13.0"; a stable-ABI build: the oldest torch it serves
    backend: str  # "cpu" | "cuda" | "rocm"
    toolkit: str | None  # CUDA/ROCm version it was built with; None for cpu
    cxx11_abi: bool
    python: str  # "abi3" or "3.11"
    arch: str  # machine, "x86_64"
    stable_abi: bool = False
    name: str = ""  # for the accepting message ("<variant> matches this environment")
    # a part of a split CUDA build: "sm90" (that arch's SASS only), "ptx120" (PTX only)
    gpu: str = ""


class FitEnv(NamedTuple):
    """The environment that would load it: the installed torch, this Python and machine."""

    torch: str  # torch.__version__, "2.13.0+cu130"
    backend: str  # "cpu" | "cuda" | "rocm"
    toolkit: str | None  # torch.version.cuda / torch.version.hip
    cxx11_abi: bool
    python: str  # "3.11"
    arch: str  # platform.machine()
    # compute capabilities of the GPUs to serve; (): not known
    gpus: tuple[tuple[int, int], ...] = ()


class Fit(NamedTuple):
    """The verdict: every problem (empty: it fits) and notes on a fit that is not exact."""

    problems: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.problems


def _abi_name(cxx11: bool) -> str:
    return (
        "cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=1)"
        if cxx11
        else "pre-cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=0)"
    )


def _flavour(env: FitEnv) -> str:
    if env.backend == "cpu" or env.toolkit is None:
        return "a CPU-only build"
    name = "ROCm" if env.backend == "rocm" else "CUDA"
    return f"a {name} {_mm(parse_major_minor(env.toolkit))} build"


def _backend_problems(build: FitBuild, env: FitEnv, notes: list[str]) -> list[str]:
    if build.backend == "cpu":
        if env.backend != "cpu":
            # A CPU build loads into a GPU torch: its CPU ops run prebuilt, GPU tensors use the
            # reference ops.
            notes.append(
                f"CPU-only build in {_flavour(env)} of torch: {env.backend} tensors use the reference ops"
            )
        return []
    built = parse_major_minor(build.toolkit) if build.toolkit else None
    shown = _mm(built) if built else "?"
    here = parse_major_minor(env.toolkit) if env.toolkit and env.backend == build.backend else None
    if build.backend == "cuda":
        if built is None or here is None:
            return [f"built for CUDA {shown}, this torch is {_flavour(env)}"]
        if here[0] != built[0]:
            return [
                f"built with CUDA {shown}, this torch uses CUDA {_mm(here)} (major versions differ)"
            ]
        if here[1] < built[1]:
            return [f"built with CUDA {shown}, newer than this torch's CUDA {_mm(here)}"]
        if here != built:
            notes.append(f"CUDA {shown} build runs on CUDA {_mm(here)} (same major, newer minor)")
        return []
    # ROCm promises no binary compatibility across minor releases: require the same major.minor.
    if built is None or here is None:
        return [f"built for ROCm {shown}, this torch is {_flavour(env)}"]
    if here != built:
        return [f"built for ROCm {shown}, this torch uses ROCm {_mm(here)}"]
    return []


_GPU_PART = re.compile(r"^(sm|ptx)(\d+)(\d)([af]?)$")


def gpu_part_serves(part: str, capability: tuple[int, int]) -> str | None:
    """Why the part ``part`` of a split build ("sm80", "sm90a", "ptx120") runs on a GPU of
    ``capability`` ("sm_86 -> sm_80 wheel: same major, lower minor SASS runs"); None when it does not.
    SASS runs on its own major at its minor or newer (an "a" arch: that GPU only); PTX is compiled
    by the driver for its arch or any newer one."""
    found = _GPU_PART.match(part)
    if found is None:
        return None
    kind, major, minor, suffix = (
        found.group(1),
        int(found.group(2)),
        int(found.group(3)),
        found.group(4),
    )
    gpu = f"sm_{capability[0]}{capability[1]}"
    own = f"{major}{minor}{suffix}"
    if kind == "ptx":
        if capability < (major, minor):
            return None
        why = "its own arch" if capability == (major, minor) else "newer than the PTX's arch"
        return f"{gpu} -> compute_{own} PTX wheel: {why}, the driver compiles the PTX on first load"
    if suffix == "a":
        return f"{gpu} -> sm_{own} wheel: its own SASS" if capability == (major, minor) else None
    if capability[0] != major or capability[1] < minor:
        return None
    if capability[1] == minor:
        return f"{gpu} -> sm_{own} wheel: its own SASS"
    return f"{gpu} -> sm_{own} wheel: same major, lower minor SASS runs"


def gpu_part_rank(part: str) -> tuple[int, int]:
    """How builds that serve a GPU are preferred (higher first): a part with SASS before a whole
    build (``part`` ""), the closest SASS (the highest arch that runs) first, the PTX part last
    (its code is compiled by the driver on first load)."""
    digits = int(re.sub(r"\D", "", part) or 0)
    return (
        (2, digits) if part.startswith("sm") else (0, digits) if part.startswith("ptx") else (1, 0)
    )


def _gpu_problems(build: FitBuild, env: FitEnv, notes: list[str]) -> list[str]:
    problems = []
    for capability in env.gpus:
        why = gpu_part_serves(build.gpu, capability)
        if why is None:
            kind = "PTX" if build.gpu.startswith("ptx") else "SASS"
            problems.append(
                f"its {build.gpu} {kind} does not run on sm_{capability[0]}{capability[1]}"
            )
        else:
            notes.append(why)
    return problems


def check_fit(build: FitBuild, env: FitEnv) -> Fit:
    """Pure: can ``build`` be loaded prebuilt into ``env``? Every problem is named, in words.

    Same machine; the same torch major.minor (a stable-ABI build: that torch or newer, whatever
    its C++ ABI); the same C++ ABI; a Python the build serves; the backend of this torch (CUDA:
    same major, built minor <= torch's; ROCm: same major.minor), or a CPU build (CPU ops prebuilt).
    A part of a split CUDA build (``build.gpu``) must also serve each GPU of ``env.gpus`` (none
    listed: not judged); a whole build's arch list is the runtime's check (index.json does not
    list it).
    """
    problems: list[str] = []
    notes: list[str] = []
    arch, machine = normalize_machine(build.arch), normalize_machine(env.arch)
    if arch != machine:
        problems.append(f"built for {arch}, this machine is {machine}")
    built_torch, torch = parse_major_minor(build.torch), parse_major_minor(env.torch)
    if build.stable_abi:
        # torch's stable ABI is a C shim: later torch versions keep serving it, and no
        # libstdc++ types cross it, so the C++ ABI flag does not matter.
        if torch < built_torch:
            problems.append(
                f"stable-ABI build needs torch >= {_mm(built_torch)}, this is torch {_mm(torch)}"
            )
        elif torch != built_torch:
            notes.append(
                f"stable-ABI build for torch >= {_mm(built_torch)} serves torch {_mm(torch)}"
            )
    else:
        if torch != built_torch:
            problems.append(f"built for torch {_mm(built_torch)}, this is torch {_mm(torch)}")
        if env.cxx11_abi != build.cxx11_abi:
            problems.append(
                f"built with the {_abi_name(build.cxx11_abi)}, this torch uses the {_abi_name(env.cxx11_abi)}"
            )
    python = parse_major_minor(env.python)
    if build.python == "abi3":
        if python < ABI3_MIN_PYTHON:
            problems.append(
                f"built for CPython >= {_mm(ABI3_MIN_PYTHON)} (abi3), this is Python {_mm(python)}"
            )
    elif parse_major_minor(build.python) != python:
        problems.append(f"built for Python {build.python} (not abi3), this is Python {_mm(python)}")
    problems += _backend_problems(build, env, notes)
    if build.gpu:
        problems += _gpu_problems(build, env, notes)
    return Fit(tuple(problems), tuple(notes))


def same_cuda_group(groups: Iterable[Iterable[str]], nvcc: str, torch_cuda: str) -> bool:
    """May an extension compiled by CUDA ``nvcc`` be used with a torch built for ``torch_cuda``?

    Yes for the same major.minor, or two minors listed in one group of ``groups`` (the
    compatibility table's ``[cuda_groups]``, DeepSpeed's table). A major mismatch never is.
    """
    a, b = parse_major_minor(nvcc), parse_major_minor(torch_cuda)
    if a == b:
        return True
    if a[0] != b[0]:
        return False
    for group in groups:
        members = {parse_major_minor(v) for v in group}
        if a in members and b in members:
            return True
    return False
