"""What a CUDA binary holds, read with cuobjdump, against the arch list it was built for.

Nothing built for the GPU can run on our machines; what the library contains can be checked:
one SASS image (``sm_80``) per requested arch and PTX (``compute_120``) for the ``+PTX`` ones.
cuobjdump comes from NVIDIA's ``nvidia-cuda-cuobjdump`` wheel (a dependency of wheelfactory) or
a toolkit on PATH / CUDA_HOME.

Whether a library carries device code at all is read from its ELF sections first (``device_code``,
no tool needed): nvcc and clang put the fat binary in ``.nv_fatbin`` (``__nv_relfatbin`` with
-rdc) and its descriptor in ``.nvFatBinSegment``; HIP's are ``.hip_fatbin`` and
``.hipFatBinSegment``. cuobjdump is only run on libraries that have them: it fails on a
host-only one (a project's CPU module beside its CUDA module, as torch_scatter ships).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import WheelfactoryError
from wheelfactory.support.proc import CommandFailed, run

_ARCH = re.compile(r"\bsm_(\d+[af]?)\b")


class CuobjdumpMissing(WheelfactoryError):
    exit_code = 1


@dataclass(frozen=True)
class CudaContents:
    sass: frozenset[str]  # "80", "90a", "120"
    ptx: frozenset[str]

    def describe(self) -> str:
        sass = ", ".join(f"sm_{a}" for a in sorted(self.sass, key=_order)) or "no SASS"
        ptx = ", ".join(f"compute_{a}" for a in sorted(self.ptx, key=_order))
        return sass + (f" + PTX {ptx}" if ptx else "")

    def arch_list(self) -> str:
        """The TORCH_CUDA_ARCH_LIST that asks for exactly this: SASS {80, 120}, PTX {120} -> "8.0;12.0+PTX"."""
        return ";".join(
            f"{_dotted(a)}{'+PTX' if a in self.ptx else ''}"
            for a in sorted(self.sass | self.ptx, key=_order)
        )


def _dotted(arch: str) -> str:
    """``"90a"`` -> ``"9.0a"``, ``"120"`` -> ``"12.0"``."""
    digits = arch.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}{arch[len(digits) :]}"


def _order(arch: str) -> tuple[int, str]:
    digits = arch.rstrip("af")
    return int(digits), arch[len(digits) :]


CUDA_SECTIONS = frozenset({".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment"})
HIP_SECTIONS = frozenset({".hip_fatbin", ".hipFatBinSegment"})


@dataclass(frozen=True)
class DeviceCode:
    """The device-code sections a library's ELF has (non-empty ones only)."""

    sections: frozenset[str]

    @property
    def cuda(self) -> bool:
        return bool(self.sections & CUDA_SECTIONS)

    @property
    def hip(self) -> bool:
        return bool(self.sections & HIP_SECTIONS)

    def holds(self, backend: str) -> bool:
        """Device code for ``backend`` ("cuda", "rocm"); a CPU build needs none."""
        return self.cuda if backend == "cuda" else self.hip if backend == "rocm" else True


def device_code(library: bytes) -> DeviceCode:
    """The device-code sections of an ELF shared library (none for anything that is not ELF)."""
    import io

    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        sections = [(s.name, s["sh_size"]) for s in ELFFile(io.BytesIO(library)).iter_sections()]
    except (ELFError, ValueError, KeyError):
        return DeviceCode(frozenset())
    return DeviceCode(
        frozenset(name for name, size in sections if size and name in CUDA_SECTIONS | HIP_SECTIONS)
    )


def missing_device_code(backend: str, libraries: Mapping[str, bytes]) -> str | None:
    """None when some library holds device code for ``backend`` (always for "cpu"); otherwise
    what to tell the user: the wheel of a GPU variant is host-only."""
    if backend not in ("cuda", "rocm") or any(
        device_code(data).holds(backend) for data in libraries.values()
    ):
        return None
    sections = ", ".join(sorted(CUDA_SECTIONS if backend == "cuda" else HIP_SECTIONS))
    names = ", ".join(sorted(libraries)) or "none"
    return (
        f"no library in this {backend.upper() if backend == 'cuda' else 'ROCm'} wheel holds device code (no "
        f"{sections} section in {names}): it runs on the CPU only. A project that builds its GPU code only "
        "with a GPU present or a switch set gets FORCE_CUDA/WITH_CUDA/USE_CUDA=1; name any other switch "
        "in [project] cuda_env"
    )


def expected(arch_list: tuple[str, ...]) -> CudaContents:
    """``("8.0", "9.0a", "12.0+PTX")`` -> SASS {80, 90a, 120}, PTX {120}; ``"12.0+PTX-only"`` (a
    split build's PTX part, identity.GpuSlice) -> PTX {120} and no SASS."""
    sass, ptx = set(), set()
    for arch in arch_list:
        name = arch.split("+")[0].replace(".", "")
        if not arch.endswith("+PTX-only"):
            sass.add(name)
        if arch.endswith(("+PTX", "+PTX-only")):
            ptx.add(name)
    return CudaContents(frozenset(sass), frozenset(ptx))


def find_cuobjdump() -> str | None:
    candidates = [shutil.which("cuobjdump")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home:
            candidates.append(os.path.join(home, "bin", "cuobjdump"))
    # NVIDIA's wheels: site-packages/nvidia/cu13/bin/cuobjdump
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += [
            os.path.join(root, sub, "bin", "cuobjdump")
            for sub in sorted(os.listdir(root))
            if sub.startswith("cu")
        ]
    candidates.append(str(Path(sys.executable).parent / "cuobjdump"))
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def contents(library: bytes, *, log: Path | None = None) -> CudaContents:
    tool = find_cuobjdump()
    if tool is None:
        raise CuobjdumpMissing(
            "cuobjdump is needed to verify CUDA wheels and none was found: "
            "pip install nvidia-cuda-cuobjdump (or put a CUDA toolkit's bin on PATH)"
        )
    with tempfile.TemporaryDirectory(prefix="wf-cuobjdump-") as tmp:
        path = Path(tmp) / "library.so"
        path.write_bytes(library)
        elf = run([tool, "--list-elf", str(path)], log=log)
        try:
            ptx = run([tool, "--list-ptx", str(path)], log=log)
        except CommandFailed as exc:  # "No PTX file found" is not an error for us
            ptx = exc.tail if "No PTX" in exc.tail else ""
            if not ptx:
                raise
    return CudaContents(frozenset(_ARCH.findall(elf)), frozenset(_ARCH.findall(ptx)))


def problems(found: CudaContents, wanted: CudaContents, *, exact_ptx: bool = False) -> list[str]:
    """What ``found`` lacks of ``wanted``'s SASS and PTX (SASS must match exactly; PTX beyond the
    asked is fine, unless ``exact_ptx``: a split build's part holds its own code and nothing else)."""
    out = []
    if found.sass != wanted.sass:
        out.append(
            f"the library holds SASS for {sorted(found.sass, key=_order)}, "
            f"the arch list asks for {sorted(wanted.sass, key=_order)}"
        )
    if not wanted.ptx <= found.ptx:
        out.append(f"PTX for {sorted(wanted.ptx - found.ptx, key=_order)} is missing")
    if exact_ptx and found.ptx - wanted.ptx:
        out.append(
            f"the library holds PTX for {sorted(found.ptx - wanted.ptx, key=_order)}, which this part "
            "must not carry"
        )
    return out
