"""One GPU architecture's device code kept, the rest taken out: how a variant of a split CUDA
build ([cuda] split_archs, plan/expand.py) gets its wheel from the build of the whole arch list.

nvcc puts each translation unit's device code in a fat binary: a header (magic 0xBA55ED50,
version, header size, size of what follows) and entries, each a header (kind: 1 PTX, 2 ELF/SASS;
its own header size, its payload size, the arch number, e.g. 90 or 120) and the payload. The
linker concatenates them, 8-byte aligned, into the library's ``.nv_fatbin`` section (with -rdc
also ``__nv_relfatbin``); each is registered with the CUDA runtime through a pointer to its
start, and the runtime reads only as far as the header's size says. So each fat binary is
rewritten where it lies: its header, then the entries of the kept arch, then zeros to its old
end. Nothing moves in the ELF file and no pointer changes.

The library keeps its size on disk (the removed code's bytes are zeros); the wheel's deflate
stores those zeros in a few bytes, and the wheel is what an index's size limit and a download
count. nvprune does this for object files and static libraries only, and relinking each part
would compile-or-link once per part; this keeps one compile for all parts.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import WheelfactoryError
from wheelfactory.plan.identity import GpuSlice, Variant
from wheelfactory.support.timeline import note
from wheelfactory.support.wheel_rewrite import rewrite_wheel
from wheelfactory.verify.wheel_identity import is_shared_library

MAGIC = 0xBA55ED50
SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries after it
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
# the entry header's u32 arch number (80, 90, 120), after kind .. payload size and 3 u32
_ARCH_AT = 28
# u64 flags: 0x2000 (LZ4) or 0x8000 (nvcc --compress-mode's) when the payload is compressed
_FLAGS_AT = 40
_UNPACKED_AT = 56  # u64 size of a compressed payload once unpacked (headers of 64 bytes and more)
_COMPRESSED = 0x2000 | 0x8000
KINDS = {1: "ptx", 2: "sass"}


class FatbinError(WheelfactoryError):
    """A fat binary this module cannot read, or a library without the part's device code."""

    exit_code = 1


@dataclass(frozen=True)
class Entry:
    kind: str  # "sass" or "ptx"
    arch: int  # 80, 90, 120
    start: int  # the entry's header, from its fat binary's start
    end: int  # past its payload
    stored: int = 0  # the payload's bytes
    unpacked: int = 0  # what they unpack to (``stored`` where not compressed)


@dataclass(frozen=True)
class KeptPart:
    """What keeping one part did to one library."""

    library: bytes
    removed: int  # bytes of device code taken out
    kept: int  # entries kept


def fat_binaries(section: bytes) -> Iterator[tuple[int, int, list[Entry]]]:
    """(start, end, entries) of each fat binary in a ``.nv_fatbin`` section's bytes."""
    pos = 0
    while pos + _HEADER.size <= len(section):
        magic, _, header_size, size = _HEADER.unpack_from(section, pos)
        if magic != MAGIC:
            if not any(section[pos : pos + 8]):  # the linker's alignment padding
                pos += 8
                continue
            raise FatbinError(
                f"not a CUDA fat binary at offset {pos} of the section (magic {magic:#x})"
            )
        end = pos + header_size + size
        if header_size < _HEADER.size:
            raise FatbinError(
                f"a fat binary at offset {pos} has a header of {header_size} bytes (at least "
                f"{_HEADER.size})"
            )
        if end > len(section):
            raise FatbinError(
                f"a fat binary at offset {pos} runs past its section ({end} > {len(section)} bytes)"
            )
        entries, at = [], pos + header_size
        while at < end:
            kind, _, entry_header, payload = _ENTRY.unpack_from(section, at)
            if entry_header < _ARCH_AT + 4 or at + entry_header + payload > end:
                raise FatbinError(
                    f"a fat binary entry at offset {at} has a header of {entry_header} bytes "
                    f"and a payload of {payload}, past its fat binary"
                )
            if kind not in KINDS:
                raise FatbinError(
                    f"a fat binary entry of kind {kind} (known: 1 PTX, 2 SASS) at offset {at}: "
                    "a toolkit newer than this reader; build without [cuda] split_archs"
                )
            (arch,) = struct.unpack_from("<I", section, at + _ARCH_AT)
            (flags,) = (
                struct.unpack_from("<Q", section, at + _FLAGS_AT)
                if entry_header >= _FLAGS_AT + 8
                else (0,)
            )
            compressed = bool(flags & _COMPRESSED) and entry_header >= _UNPACKED_AT + 8
            (unpacked,) = (
                struct.unpack_from("<Q", section, at + _UNPACKED_AT) if compressed else (payload,)
            )
            entries.append(
                Entry(
                    KINDS[kind],
                    arch,
                    at - pos,
                    at + entry_header + payload - pos,
                    payload,
                    unpacked,
                )
            )
            at += entry_header + payload
        yield pos, end, entries
        pos = (end + 7) & ~7


def device_code_sizes(library: bytes) -> tuple[int, int]:
    """(bytes the library's device code takes, bytes it unpacks to): what nvcc's fat binary
    compression saved. (0, 0) for a library without fat binaries."""
    stored = unpacked = 0
    try:
        for offset, size in _sections(library):
            for _, _, entries in fat_binaries(library[offset : offset + size]):
                stored += sum(e.stored for e in entries)
                unpacked += sum(e.unpacked for e in entries)
    except FatbinError:  # a layout this reader does not know: cuobjdump's listing is the check
        return 0, 0
    return stored, unpacked


def _sections(library: bytes) -> list[tuple[int, int]]:
    """(file offset, size) of the library's fat binary sections; [] for a file that is not ELF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        return [
            (s["sh_offset"], s["sh_size"])
            for s in ELFFile(io.BytesIO(library)).iter_sections()
            if s.name in SECTIONS and s["sh_type"] != "SHT_NOBITS" and s["sh_size"]
        ]
    except (ELFError, ValueError, KeyError):
        return []


def _matches(entry: Entry, part: GpuSlice) -> bool:
    number = int(part.digits.rstrip("af"))
    return entry.arch == number and entry.kind == ("ptx" if part.ptx else "sass")


def keep_part(library: bytes, part: GpuSlice, *, name: str = "the library") -> KeptPart:
    """``library`` with only ``part``'s device code left in each fat binary (module docstring);
    a library with no fat binary comes back as it is. FatbinError where the fat binaries hold
    none of the part's code (the build did not compile that arch)."""
    sections = _sections(library)
    if not sections:
        return KeptPart(library, 0, 0)
    out = bytearray(library)
    removed = kept = 0
    for offset, size in sections:
        section = bytes(library[offset : offset + size])
        for start, end, entries in fat_binaries(section):
            keep = [e for e in entries if _matches(e, part)]
            header = bytearray(section[start : start + _HEADER.size])
            header_size = _HEADER.unpack_from(header)[2]
            body = b"".join(section[start + e.start : start + e.end] for e in keep)
            struct.pack_into("<Q", header, 8, len(body))
            rewritten = bytes(header) + section[start + _HEADER.size : start + header_size] + body
            old = end - start
            out[offset + start : offset + end] = rewritten + bytes(old - len(rewritten))
            removed += sum(e.end - e.start for e in entries) - len(body)
            kept += len(keep)
    if not kept:
        what = f"PTX of compute_{part.digits}" if part.ptx else f"SASS of sm_{part.digits}"
        raise FatbinError(f"{name} holds no {what}: the build did not compile that arch for it")
    return KeptPart(bytes(out), removed, kept)


@dataclass(frozen=True)
class SplitWheel:
    wheel: Path
    removed: int  # device-code bytes taken out of its libraries
    libraries: tuple[str, ...]  # the libraries that had device code


def keep_part_of_wheel(wheel: Path, part: GpuSlice, dest_dir: Path) -> SplitWheel:
    """A copy of ``wheel`` in ``dest_dir`` whose libraries hold only ``part``'s device code.
    FatbinError when no library holds the part's code."""
    removed: list[int] = []
    touched: list[str] = []
    found: list[FatbinError] = []

    def contents(member: str, data: bytes) -> bytes:
        if not is_shared_library(member):
            return data
        try:
            result = keep_part(data, part, name=member)
        except FatbinError as exc:
            found.append(exc)
            return data
        if result.kept:
            removed.append(result.removed)
            touched.append(member)
        return result.library

    split = rewrite_wheel(wheel, dest_dir, contents=contents)
    if not touched:
        split.unlink(missing_ok=True)
        raise (
            found[0]
            if found
            else FatbinError(f"{wheel.name} has no library with CUDA device code to split")
        )
    return SplitWheel(split, sum(removed), tuple(touched))


def ship_gpu_part(variant: Variant, wheel: Path, dest_dir: Path, log: Path) -> Path:
    """The wheel a variant ships: ``wheel`` itself, or for a part of a split build (key.gpu) a
    copy holding only the part's device code, the saving said in the log."""
    part = variant.key.gpu_slice
    if part is None:
        return wheel
    split = keep_part_of_wheel(wheel, part, dest_dir)
    what = f"the PTX of compute_{part.digits}" if part.ptx else f"the SASS of sm_{part.digits}"
    note(
        log,
        f"split: {variant.id} keeps {what} of {variant.split_from} ({';'.join(variant.arch_list)}): "
        f"{split.removed} bytes of device code out of {', '.join(split.libraries)}; wheel "
        f"{wheel.stat().st_size} -> {split.wheel.stat().st_size} bytes",
    )
    return split.wheel
