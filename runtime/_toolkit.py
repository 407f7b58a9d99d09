"""Pure toolkit checks for the JIT path: nvcc vs torch's CUDA, which archs to target, compilers.

Everything here takes plain values (versions, paths found or not) and returns a verdict, so the
tables are unit-tested; ``_probe`` gathers the values (running tools, reading PATH).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from ._arch import CudaArch
from ._errors import InvalidArch, InvalidVersion
from ._versions import MajorMinor

__all__ = [
    "CUDA_MINOR_GROUPS",
    "DEFAULT_CUDA_ARCHS",
    "ArchSelection",
    "ToolCheck",
    "check_build_tools",
    "check_nvcc_version",
    "gencode_flags",
    "parse_arch_list",
    "parse_nvcc_version",
    "select_cuda_archs",
]


class ToolCheck(NamedTuple):
    """A verdict on one tool, with how to fix a failure."""

    ok: bool
    reason: str
    fix: str = ""


# Minor versions of one CUDA major that may build extensions for each other (DeepSpeed's table,
# see COMPAT.md; there is no 12.7). None: every minor of that major is one group (CUDA 13).
CUDA_MINOR_GROUPS: dict[int, tuple[frozenset[int], ...] | None] = {
    10: (frozenset({0, 1, 2}),),
    11: (frozenset(range(0, 9)),),
    12: (frozenset({0, 1, 2, 3, 4, 5, 6, 8, 9}),),
    13: None,
}

# TORCH_CUDA_ARCH_LIST of PyTorch's own wheels per CUDA release (COMPAT.md): the default target
# list when neither TORCH_CUDA_ARCH_LIST, a visible GPU nor a build record says otherwise.
DEFAULT_CUDA_ARCHS: dict[MajorMinor, str] = {
    MajorMinor(12, 6): "5.0;6.0;7.0;7.5;8.0;8.6;9.0",
    MajorMinor(12, 8): "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
    MajorMinor(12, 9): "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    MajorMinor(13, 0): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}
_FALLBACK_ARCHS = "7.5;8.0;8.6;9.0+PTX"

# Oldest arch each nvcc major can still compile for (CUDA 13 dropped sm_70 and older).
_MIN_ARCH = {11: MajorMinor(3, 5), 12: MajorMinor(5, 0), 13: MajorMinor(7, 5)}

_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> MajorMinor:
    """``nvcc --version`` output -> its release (``Cuda compilation tools, release 13.0, V13.0.88``)."""
    match = _NVCC_RELEASE.search(text)
    if match is None:
        raise InvalidVersion(f"no 'release X.Y' in nvcc output: {text.strip()[-200:]!r}")
    return MajorMinor(int(match.group(1)), int(match.group(2)))


def _same_group(major: int, a: int, b: int) -> bool:
    if major not in CUDA_MINOR_GROUPS:
        return a == b  # unknown major: no promise beyond an exact match
    groups = CUDA_MINOR_GROUPS[major]
    if groups is None:
        return True
    return any(a in group and b in group for group in groups)


def check_nvcc_version(nvcc: MajorMinor, torch_cuda: MajorMinor) -> ToolCheck:
    """Can this nvcc build extensions for a torch built with ``torch_cuda``?"""
    if nvcc == torch_cuda:
        return ToolCheck(True, f"nvcc {nvcc} matches torch's CUDA {torch_cuda}")
    fix = (
        f"install CUDA {torch_cuda.major}.x matching torch (or point CUDA_HOME at one), "
        f"or install the torch build for CUDA {nvcc}"
    )
    if nvcc.major != torch_cuda.major:
        return ToolCheck(
            False, f"nvcc {nvcc} cannot build for torch's CUDA {torch_cuda}: major versions differ", fix
        )
    if _same_group(nvcc.major, nvcc.minor, torch_cuda.minor):
        return ToolCheck(
            True, f"nvcc {nvcc} is compatible with torch's CUDA {torch_cuda} (same minor-version group)"
        )
    return ToolCheck(
        False,
        f"nvcc {nvcc} cannot build for torch's CUDA {torch_cuda}: "
        "minor versions are not in one compatibility group",
        fix,
    )


def check_build_tools(cxx_name: str, cxx_path: str | None, ninja_path: str | None) -> ToolCheck:
    """A JIT build needs a C++ compiler and ninja (torch.utils.cpp_extension drives ninja)."""
    missing = []
    fixes = []
    if cxx_path is None:
        missing.append(f"no C++ compiler ({cxx_name!r} is not on PATH; set CXX to choose one)")
        fixes.append("install a C++ compiler (e.g. `apt install g++` or `conda install gxx`)")
    if ninja_path is None:
        missing.append("ninja is not on PATH")
        fixes.append("`pip install ninja`")
    if missing:
        return ToolCheck(
            False, "; ".join(missing), " and ".join(fixes) + " so the shipped sources can be compiled"
        )
    return ToolCheck(True, f"{cxx_name} at {cxx_path}, ninja at {ninja_path}")


_NAMED_ARCHS = {
    "Volta": "7.0",
    "Turing": "7.5",
    "Ampere": "8.0;8.6",
    "Ada": "8.9",
    "Hopper": "9.0",
    "Blackwell": "10.0;12.0",
}


def parse_arch_list(text: str) -> tuple[CudaArch, ...]:
    """``TORCH_CUDA_ARCH_LIST`` syntax: ``;`` or space separated, a few names (Ampere, Hopper)."""
    entries: list[CudaArch] = []
    for token in re.split(r"[;\s]+", text.strip()):
        if not token:
            continue
        base, plus, ptx = token.partition("+")
        if base in _NAMED_ARCHS:
            expanded = [CudaArch.parse(a) for a in _NAMED_ARCHS[base].split(";")]
            if plus:
                expanded[-1] = CudaArch.parse(f"{expanded[-1]}+{ptx}")
            entries += expanded
        else:
            entries.append(CudaArch.parse(token))
    if not entries:
        raise InvalidArch(f"empty CUDA arch list: {text!r}")
    return tuple(sorted(set(entries)))


class ArchSelection(NamedTuple):
    """The CUDA archs a JIT build targets and where that list came from."""

    archs: tuple[CudaArch, ...]
    source: str  # where the list came from, for messages and the report

    def __str__(self) -> str:
        return f"{';'.join(str(a) for a in self.archs)} (from {self.source})"


def _default_archs(torch_cuda: MajorMinor) -> str:
    if torch_cuda in DEFAULT_CUDA_ARCHS:
        return DEFAULT_CUDA_ARCHS[torch_cuda]
    same_major = sorted(v for v in DEFAULT_CUDA_ARCHS if v.major == torch_cuda.major)
    older = [v for v in same_major if v <= torch_cuda]
    if older or same_major:
        return DEFAULT_CUDA_ARCHS[(older or same_major)[-1]]
    return _FALLBACK_ARCHS


def select_cuda_archs(
    *,
    arch_list_env: str | None,
    gpu_capabilities: Sequence[MajorMinor],
    record_archs: Sequence[str],
    torch_cuda: MajorMinor,
) -> ArchSelection:
    """TORCH_CUDA_ARCH_LIST if set; else the GPUs present; else the record's list; else torch's defaults."""
    if arch_list_env and arch_list_env.strip().lower() != "native":
        selection = ArchSelection(parse_arch_list(arch_list_env), "TORCH_CUDA_ARCH_LIST")
    elif gpu_capabilities:
        caps = sorted(set(gpu_capabilities))
        selection = ArchSelection(tuple(CudaArch(c.major, c.minor) for c in caps), "the GPUs present")
    elif record_archs:
        selection = ArchSelection(
            tuple(sorted({CudaArch.parse(a) for a in record_archs})), "the build record"
        )
    else:
        selection = ArchSelection(
            parse_arch_list(_default_archs(torch_cuda)), f"PyTorch's defaults for CUDA {torch_cuda}"
        )
    oldest = _MIN_ARCH.get(torch_cuda.major)
    if oldest is not None and selection.source != "TORCH_CUDA_ARCH_LIST":
        kept = tuple(a for a in selection.archs if a.capability >= oldest)
        if kept and kept != selection.archs:
            selection = ArchSelection(
                kept, f"{selection.source}, without archs CUDA {torch_cuda.major} dropped"
            )
    return selection


def gencode_flags(archs: Sequence[CudaArch]) -> list[str]:
    return sorted({flag for arch in archs for flag in arch.gencode_flags()})
