"""What a CUDA binary holds, read with cuobjdump, against the arch list it was built for.

Nothing built for the GPU can run on our machines; what the library contains can be checked:
one SASS image (``sm_80``) per requested arch and PTX (``compute_120``) for the ``+PTX`` ones.
cuobjdump comes from NVIDIA's ``nvidia-cuda-cuobjdump`` wheel (a dependency of wheelfactory) or
a toolkit on PATH / CUDA_HOME.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
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


def _order(arch: str) -> tuple[int, str]:
    digits = arch.rstrip("af")
    return int(digits), arch[len(digits):]


def expected(arch_list: tuple[str, ...]) -> CudaContents:
    """``("8.0", "9.0a", "12.0+PTX")`` -> SASS {80, 90a, 120}, PTX {120}."""
    sass, ptx = set(), set()
    for arch in arch_list:
        name = arch.split("+")[0].replace(".", "")
        sass.add(name)
        if arch.endswith("+PTX"):
            ptx.add(name)
    return CudaContents(frozenset(sass), frozenset(ptx))


def find_cuobjdump() -> str | None:
    candidates = [shutil.which("cuobjdump")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home:
            candidates.append(os.path.join(home, "bin", "cuobjdump"))
    spec = importlib.util.find_spec("nvidia")  # NVIDIA's wheels: site-packages/nvidia/cu13/bin/cuobjdump
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += [os.path.join(root, sub, "bin", "cuobjdump") for sub in sorted(os.listdir(root))
                       if sub.startswith("cu")]
    candidates.append(str(Path(sys.executable).parent / "cuobjdump"))
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def contents(library: bytes, *, log: Path | None = None) -> CudaContents:
    tool = find_cuobjdump()
    if tool is None:
        raise CuobjdumpMissing("cuobjdump is needed to verify CUDA wheels and none was found: "
                               "pip install nvidia-cuda-cuobjdump (or put a CUDA toolkit's bin on PATH)")
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


def problems(found: CudaContents, wanted: CudaContents) -> list[str]:
    out = []
    if found.sass != wanted.sass:
        out.append(f"the library holds SASS for {sorted(found.sass, key=_order)}, "
                   f"the arch list asks for {sorted(wanted.sass, key=_order)}")
    if not wanted.ptx <= found.ptx:
        out.append(f"PTX for {sorted(wanted.ptx - found.ptx, key=_order)} is missing")
    return out
