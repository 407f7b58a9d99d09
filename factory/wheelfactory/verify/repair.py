"""auditwheel repair settings and wheel checks shared by every engine."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from wheelfactory._runtime import BUILD_RECORD_FILE
from wheelfactory._runtime._errors import RecordError
from wheelfactory.plan.torch_releases import manylinux_floor
from wheelfactory.project.build_system import LEGACY
from wheelfactory.verify.wheel_identity import is_shared_library, read_build_record

# Libraries torch and the toolkits provide at run time: grafting them would ship hundreds of MB
# and a second copy of libtorch. auditwheel fnmatches the raw soname, so versioned sonames
# need the trailing wildcard (librocblas.so does not match librocblas.so.5).
# libgomp: an extension built with -fopenmp NEEDs libgomp.so.1, and torch ships its own OpenMP
# runtime with that SONAME (torch/lib/libgomp.so.1; up to 2.6 the file is libgomp-<hash>.so.1,
# SONAME still libgomp.so.1). Once torch is imported the dynamic loader finds the NEEDED name
# among the loaded SONAMEs, so the extension uses torch's copy: no second OpenMP runtime in the
# process, and none needed on the system. A grafted copy would be that second runtime.
AUDITWHEEL_EXCLUDES = (
    "libtorch*.so*",
    "libc10*.so*",
    "libshm*.so*",
    "libgomp*.so*",
    "libcuda.so*",
    "libcudart*.so*",
    "libnvrtc*.so*",
    "libnvToolsExt*.so*",
    "libcublas*.so*",
    "libcusparse*.so*",
    "libcufft*.so*",
    "libcurand*.so*",
    "libcusolver*.so*",
    "libnccl*.so*",
    "libamdhip64.so*",
    "librocblas.so*",
    "libhipblas*.so*",
    "libMIOpen*.so*",
    "librccl.so*",
    "libroctx64.so*",
    "libhsa-runtime64.so*",
)
FORBIDDEN_IN_WHEEL = (
    "libtorch",
    "libc10",
    "libcudart",
    "libcuda.",
    "libnvrtc",
    "libamdhip64",
    "librocblas",
    "libgomp",
)


# A bring-your-own project builds abi3 itself (any cp3X-abi3 tag is its choice of floor); the fix
# is in its build backend's words (project/build_system.py abi3_fix).
ABI3_BYO_HINT = (
    "{wheel} is not an abi3 wheel, and matrix.toml [matrix] python asks for abi3: the project must "
    'build it ({fix}), or list CPython versions, e.g. python = ["3.11"]'
)


def auditwheel_command(python: str, wheel: Path, dest: Path) -> list[str]:
    command = [python, "-m", "auditwheel", "repair", "-w", str(dest)]
    for pattern in AUDITWHEEL_EXCLUDES:
        command += ["--exclude", pattern]
    return [*command, str(wheel)]


_GLIBC_VERSION = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")
_NAMESPACE = re.compile(r"^_[a-z_][a-z0-9_]*_(cpu|cuda|rocm)_[0-9a-f]{8}$")


def required_glibc(library: bytes) -> Version | None:
    """The newest GLIBC_x.y symbol version an ELF library needs (None: it needs none)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    needed: list[Version] = []
    for section in ELFFile(io.BytesIO(library)).iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                needed += [
                    Version(m.group(1))
                    for aux in auxiliaries
                    if (m := _GLIBC_VERSION.match(aux.name))
                ]
    return max(needed, default=None)


def tag_glibc(platform: str) -> Version | None:
    """manylinux_2_28_x86_64 -> 2.28; manylinux2014_x86_64 -> 2.17; None for other platforms."""
    parts = platform.split("_")  # the tag less its arch: manylinux_2_28, or a legacy name
    floor = manylinux_floor("_".join(parts[:3])) or manylinux_floor(parts[0])
    return Version("{}.{}".format(*floor)) if floor else None


def check_wheel(
    wheel: Path,
    *,
    package: str,
    abi3: bool,
    native: bool = True,
    glibc_floor: str | None = None,
    abi3_fix: str = LEGACY.abi3_fix(),
) -> list[str]:
    """Problems found in a finished wheel (empty when it is fine).

    Beyond tags and contents: every library's newest GLIBC symbol must be within the platform
    tag (and within ``glibc_floor``, the oldest glibc the project promises to run on); a native
    wheel's op namespace must be its own (``_<pkg>_<backend>_<8 hex>``) and be what _C registers."""
    problems = []
    _, _, _, tags = parse_wheel_filename(wheel.name)
    if abi3 and native and not any(t.abi == "abi3" and t.interpreter == "cp39" for t in tags):
        problems.append(f"{wheel.name} is not tagged cp39-abi3")
    if abi3 and not native and not any(t.abi == "abi3" for t in tags):
        problems.append(ABI3_BYO_HINT.format(wheel=wheel.name, fix=abi3_fix))
    if not any(t.platform.startswith("manylinux") for t in tags):
        problems.append(f"{wheel.name} has no manylinux platform tag (was it repaired?)")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        libraries = {n: archive.read(n) for n in names if is_shared_library(n)}
        try:
            record: dict[str, object] | RecordError | None = read_build_record(archive, package)
        except RecordError as exc:
            record = exc
    problems += _glibc_problems(wheel.name, tags, libraries, glibc_floor)
    if native and isinstance(record, RecordError):
        problems.append(f"the build record is unusable: {record}")
    elif native and record is None:
        problems.append(f"the build record {BUILD_RECORD_FILE} is missing")
    elif native and isinstance(record, dict):
        problems += _namespace_problems(record, libraries, package)
    if native and not any(n.startswith(f"{package}/_C") and n.endswith(".so") for n in names):
        problems.append("the compiled library _C is missing")
    if not any(n.endswith(".so") for n in names):
        problems.append("the wheel holds no compiled extension")
    grafted = [n for n in names if any(Path(n).name.startswith(f) for f in FORBIDDEN_IN_WHEEL)]
    if grafted:
        problems.append(
            f"torch/toolkit libraries were grafted into the wheel: {', '.join(grafted)}"
        )
    return problems


def _glibc_problems(
    name: str, tags: frozenset[Tag], libraries: dict[str, bytes], glibc_floor: str | None
) -> list[str]:
    declared = [g for t in tags if (g := tag_glibc(t.platform)) is not None]
    promised = min(declared, default=None)
    problems = []
    floor = Version(glibc_floor) if glibc_floor else None
    if floor is not None and promised is not None and promised > floor:
        problems.append(
            f"{name} is tagged for glibc {promised}, newer than [build] glibc_floor {floor}: build on an "
            'older base (e.g. quay.io/pypa/manylinux_2_28, or debian_base = "bullseye")'
        )
    for path, data in sorted(libraries.items()):
        need = required_glibc(data)
        if need is None:
            continue
        if promised is not None and need > promised:
            problems.append(
                f"{path} needs GLIBC_{need} but the wheel is tagged for glibc {promised}"
            )
        if floor is not None and need > floor:
            problems.append(f"{path} needs GLIBC_{need}, newer than [build] glibc_floor {floor}")
    return problems


def _namespace_problems(
    record: dict[str, object], libraries: dict[str, bytes], package: str
) -> list[str]:
    namespace = str(record.get("namespace", ""))
    if not _NAMESPACE.match(namespace) or not namespace.startswith(f"_{package}_"):
        return [
            f"the build record's op namespace {namespace!r} is not _{package}_<backend>_<8 hex>: two builds "
            "could collide in one process"
        ]
    library = libraries.get(f"{package}/{record.get('library')}")
    if library is None:
        return []  # reported above as a missing _C
    if namespace.encode() not in library:
        return [
            f"{package}/{record.get('library')} does not register ops under {namespace} (was the namespace "
            "macro applied?)"
        ]
    return []
