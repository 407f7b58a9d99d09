"""Small ELF shared objects made in Python, with the sections a test names (no compiler needed)."""

from __future__ import annotations

import struct
from collections.abc import Mapping


def tiny_elf(sections: Mapping[str, bytes]) -> bytes:
    """A minimal ELF64 x86-64 shared object with the given PROGBITS sections (and .shstrtab)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in (*sections, ".shstrtab"))
    data, offsets = b"", []
    for content in sections.values():
        offsets.append(64 + len(data))
        data += content
    shstrtab_offset = 64 + len(data)
    data += names
    shoff = 64 + len(data) + (-len(data) % 8)
    data += b"\0" * (-len(data) % 8)
    count = len(sections) + 2  # the null section, ours, .shstrtab
    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, count, count - 1))
    table = bytes(64)
    name_at = 1
    for (name, content), offset in zip(sections.items(), offsets):
        table += struct.pack("<IIQQQQIIQQ", name_at, 1, 2, 0, offset, len(content), 0, 0, 1, 0)
        name_at += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, shstrtab_offset, len(names), 0, 0, 1, 0)
    return header + data + table


HOST_ONLY = tiny_elf({".text": b"\xc3", ".rodata": b"host"})
WITH_CUDA = tiny_elf({".text": b"\xc3", ".nv_fatbin": b"\x50\xed\x55\xba" + bytes(12), ".nvFatBinSegment": bytes(24)})
WITH_HIP = tiny_elf({".text": b"\xc3", ".hip_fatbin": b"__CLANG_OFFLOAD_BUNDLE__"})
