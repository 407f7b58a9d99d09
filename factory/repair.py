"""auditwheel repair settings and wheel checks shared by every engine."""

from __future__ import annotations

import zipfile
from pathlib import Path

from packaging.utils import parse_wheel_filename

# Libraries torch and the toolkits provide at run time: grafting them would ship hundreds of MB
# and a second copy of libtorch. auditwheel fnmatches the raw soname, so versioned sonames
# need the trailing wildcard (librocblas.so does not match librocblas.so.5).
AUDITWHEEL_EXCLUDES = (
    "libtorch*.so*", "libc10*.so*", "libshm*.so*", "libgomp*.so*",
    "libcuda.so*", "libcudart*.so*", "libnvrtc*.so*", "libnvToolsExt*.so*", "libcublas*.so*",
    "libcusparse*.so*", "libcufft*.so*", "libcurand*.so*", "libcusolver*.so*", "libnccl*.so*",
    "libamdhip64.so*", "librocblas.so*", "libhipblas*.so*", "libMIOpen*.so*", "librccl.so*",
    "libroctx64.so*", "libhsa-runtime64.so*",
)
FORBIDDEN_IN_WHEEL = ("libtorch", "libc10", "libcudart", "libcuda.", "libnvrtc", "libamdhip64", "librocblas")


def auditwheel_command(python: str, wheel: Path, dest: Path) -> list[str]:
    command = [python, "-m", "auditwheel", "repair", "-w", str(dest)]
    for pattern in AUDITWHEEL_EXCLUDES:
        command += ["--exclude", pattern]
    return [*command, str(wheel)]


def check_wheel(wheel: Path, *, package: str, abi3: bool, native: bool = True) -> list[str]:
    """Problems found in a finished wheel (empty when it is fine)."""
    problems = []
    _, _, _, tags = parse_wheel_filename(wheel.name)
    if abi3 and not any(t.abi == "abi3" and t.interpreter == "cp39" for t in tags):
        problems.append(f"{wheel.name} is not tagged cp39-abi3")
    if not any(t.platform.startswith("manylinux") for t in tags):
        problems.append(f"{wheel.name} has no manylinux platform tag (was it repaired?)")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    if native and f"{package}/_build.json" not in names:
        problems.append("the build record _build.json is missing")
    if native and not any(n.startswith(f"{package}/_C") and n.endswith(".so") for n in names):
        problems.append("the compiled library _C is missing")
    if not any(n.endswith(".so") for n in names):
        problems.append("the wheel holds no compiled extension")
    grafted = [n for n in names if any(Path(n).name.startswith(f) for f in FORBIDDEN_IN_WHEEL)]
    if grafted:
        problems.append(f"torch/toolkit libraries were grafted into the wheel: {', '.join(grafted)}")
    return problems
