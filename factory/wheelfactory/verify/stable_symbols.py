"""A stable-ABI wheel's libraries against torch's stable surface, before anything is published.

A stable-ABI variant (``[matrix] stable_abi = "2.10"``) is built once and claims every torch from
its target on. That holds only while its libraries import nothing but torch's C shim (the
``aoti_torch_*`` / ``torch_*`` functions torch keeps from release to release), each no newer than
the target, beside the C/C++ runtime, the Python C API and the CUDA runtime. A source that calls an
ATen or c10 function (``at::Tensor::numel``) builds fine and fails to load on another torch; one
that calls a shim newer than its target fails on the older torch releases it claims.

Which release added a shim is read from the torch headers of the build, where each group of
declarations stands under ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_Z`` (none: older than
the stable ABI's versions), not copied by hand. kernel-abi-check (0.14, the Hub's checker) reads
manylinux symbol versions and Python's abi3, not torch's stable ABI, so this module does it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.plan.versions import major_minor
from wheelfactory.support.proc import CommandFailed, TimeoutExpired, run

SHIM_HEADERS = (
    "torch/csrc/stable/c/shim.h",
    "torch/csrc/inductor/aoti_torch/c/shim.h",
    "torch/csrc/inductor/aoti_torch/generated/c_shim_aten.h",
    "torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h",
    "torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h",
)
_GUARD = re.compile(r"^\s*#\s*if\s+TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_\d+")
_OPEN = re.compile(r"^\s*#\s*if")
_ELSE = re.compile(r"^\s*#\s*(else|elif)")
_END = re.compile(r"^\s*#\s*endif")
_DECLARED = re.compile(r"\b((?:aoti_torch|torch)_\w+)\s*\(")
# Libraries of the C/C++ runtime: what their versioned symbols (GLIBC_2.17, GLIBCXX_3.4) come from.
RUNTIME_LIBRARIES = (
    "libc.so",
    "libm.so",
    "libstdc++.so",
    "libgcc_s.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "ld-linux",
)
# Unversioned imports that are the Python C API (an abi3 module's) or the CUDA runtime's.
_ALLOWED_NAMES = re.compile(r"^(_?Py|__cuda|cuda|cu[A-Z]|__fatbinwrap|__nv)")
# The C++ runtime, by demangled name: a symbol of it may come unversioned (an inline function's
# out-of-line copy, a newer libstdc++ member the build's toolchain resolved later).
_CXX_RUNTIME = (
    "std::",
    "__gnu_cxx::",
    "__cxxabiv1::",
    "operator new",
    "operator delete",
    "typeinfo for std::",
    "typeinfo name for std::",
    "vtable for std::",
    "VTT for std::",
    "__cxa_",
    "__gxx_",
)


def shim_versions(include: Path) -> dict[str, str | None]:
    """Every shim function the torch headers under ``include`` declare -> the release its guard
    names ("2.12"), or None where it stands under no version guard."""
    found: dict[str, str | None] = {}
    for relative in SHIM_HEADERS:
        header = include / relative
        if not header.is_file():
            continue
        stack: list[str | None] = []
        exported = False
        for line in header.read_text(encoding="utf-8", errors="replace").splitlines():
            guard = _GUARD.match(line)
            if guard:
                stack.append(f"{guard[1]}.{guard[2]}")
            elif _OPEN.match(line):
                stack.append(None)
            elif _ELSE.match(line) and stack:
                stack[-1] = None  # the other side of a version test is not that version
            elif _END.match(line) and stack:
                stack.pop()
            if "AOTI_TORCH_EXPORT" in line:
                exported = True
            if exported:
                names = _DECLARED.findall(line)
                if names:
                    versions = [v for v in stack if v]
                    found.setdefault(names[0], max(versions, key=major_minor) if versions else None)
                    exported = False
    return found


# A bring-your-own project declares a stable-ABI build by the macro torch reads, in its build files:
# -DTORCH_TARGET_VERSION=0x020a000000000000 (torch 2.10), as setup.py's define_macros or CMake's.
_TARGET = re.compile(r"TORCH_TARGET_VERSION['\"]?\s*[=,:]?\s*\(?\s*['\"]?(0x[0-9a-fA-F]{16})")
BUILD_FILES = ("setup.py", "pyproject.toml", "CMakeLists.txt", "meson.build")
_READ_AT_MOST = 1 << 20


def declared_stable_target(root: Path) -> str | None:
    """The torch release a project's own build files target with TORCH_TARGET_VERSION ("2.10");
    None where they set none (or two different ones: no one claim to check)."""
    found = set()
    for name in BUILD_FILES:
        path = root / name
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > _READ_AT_MOST:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for value in _TARGET.findall(text):
            found.add(f"{int(value[2:4], 16)}.{int(value[4:6], 16)}")
    return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class Import:
    name: str  # as the ELF names it (mangled)
    library: str | None  # the NEEDED library its symbol version comes from, where versioned
    weak: bool


def imports(library: bytes) -> list[Import]:
    """The undefined dynamic symbols of an ELF library, with the library each versioned one needs."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(library))
        dynsym = elf.get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            return []
        versions: dict[int, str] = {}
        symbol_versions = None
        for section in elf.iter_sections():
            if isinstance(section, GNUVerNeedSection):
                for requirement, auxiliaries in section.iter_versions():
                    for aux in auxiliaries:
                        versions[aux["vna_other"]] = str(requirement.name)
            elif isinstance(section, GNUVerSymSection):
                symbol_versions = section
        found = []
        for index, symbol in enumerate(dynsym.iter_symbols()):
            if not symbol.name or symbol["st_shndx"] != "SHN_UNDEF":
                continue
            version_index = symbol_versions.get_symbol(index).entry["ndx"] if symbol_versions else 0
            needed = versions.get(version_index) if isinstance(version_index, int) else None
            found.append(Import(symbol.name, needed, symbol["st_info"]["bind"] == "STB_WEAK"))
        return found
    except (ELFError, ValueError, KeyError):
        return []


def demangled(names: list[str]) -> dict[str, str]:
    """C++ names as a person reads them (binutils' c++filt); the mangled name where it is missing."""
    if not names:
        return {}
    try:
        out = run(["c++filt", *names], timeout=60).splitlines()
    except (OSError, CommandFailed, TimeoutExpired):
        return {name: name for name in names}
    return dict(zip(names, out)) if len(out) == len(names) else {name: name for name in names}


def stable_abi_problems(
    libraries: Mapping[str, bytes], shims: Mapping[str, str | None], target: str
) -> list[str]:
    """What in ``libraries`` breaks the stable-ABI claim from torch ``target`` on: an import outside
    the stable surface, or a shim newer than ``target``. ``shims``: ``shim_versions`` of the build's torch."""
    outside: list[tuple[str, str]] = []
    too_new: list[tuple[str, str, str]] = []
    for member, data in sorted(libraries.items()):
        for symbol in imports(data):
            if symbol.name in shims:
                added = shims[symbol.name]
                if added is not None and major_minor(added) > major_minor(target):
                    too_new.append((member, symbol.name, added))
                continue
            if symbol.weak or _ALLOWED_NAMES.match(symbol.name):
                continue
            if symbol.library and symbol.library.startswith(RUNTIME_LIBRARIES):
                continue
            outside.append((member, symbol.name))
    names = demangled(sorted({name for _, name in outside}))
    outside = [
        (member, name)
        for member, name in outside
        if not names.get(name, name).startswith(_CXX_RUNTIME)
    ]
    problems = [
        f"{member} imports {names.get(name, name)} ({name}), which is not in torch's stable ABI: a "
        f"stable-ABI build may call only the C shim (torch/csrc/stable); this wheel would fail to load "
        f"on another torch"
        for member, name in outside
    ]
    problems += [
        f"{member} calls {name}, a shim torch {added} added, above the stable-ABI target {target}: it "
        f'fails to load on torch {target}; raise [matrix] stable_abi to "{added}" or drop the call'
        for member, name, added in too_new
    ]
    return problems
