"""Whether this machine runs a variant's arch: natively, or through a binfmt_misc handler (QEMU user
emulation) that containers can use too.

A container sees the host's binfmt_misc table but not the host's files, so a handler serves
containers only when it was registered with the F flag (the kernel opens the interpreter at
registration). Debian's qemu-user-static registers ``qemu-<arch>`` that way through binfmt-support.

``arch_support`` reads the table (a directory, a parameter: tests pass their own) and nothing else.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wheelfactory._runtime._fit import normalize_machine
from wheelfactory.plan.versions import major_minor
from wheelfactory.support.proc import CommandFailed, TimeoutExpired, run

BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
# The ELF e_machine of each arch the planner knows (plan/identity.ARCHES)
ELF_MACHINE = {"x86_64": 0x3E, "aarch64": 0xB7}
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # debootstrap --arch, dpkg
OCI_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # an image config's "architecture"
INSTALL_QEMU = "apt-get install -y qemu-user-static binfmt-support"
MOUNT_BINFMT = f"mount -t binfmt_misc binfmt_misc {BINFMT_MISC}"
# The oldest QEMU measured to run torch's import as aarch64: Debian bookworm's 7.2 hangs or crashes
# in it (oneDNN's CPU probe, after "Can't open MIDR_EL1 sysfs entry"); bookworm-backports' 10.0.2
# runs it (import torch 2.13 in 16 s here). Nothing between was measured.
MIN_QEMU = (10, 0)
NEWER_QEMU = (
    "install QEMU >= 10 (Debian bookworm: add bookworm-backports to apt's sources, then "
    "apt-get install -y -t bookworm-backports qemu-user-static binfmt-support; trixie's own is 10.0)"
)
_QEMU_VERSION = re.compile(r"qemu-\S+ version (\d+\.\d+)")


def qemu_version(interpreter: str) -> tuple[int, int] | None:
    """What the QEMU behind a binfmt_misc handler's interpreter says its version is, or None when
    it says nothing readable (not a QEMU, not runnable from here). Asked of the file the name
    resolves to: QEMU refuses to run as ``*-binfmt-P`` outside binfmt_misc. (An F-flag handler
    keeps the file it opened when registered: a QEMU upgraded since needs registering again.)"""
    try:
        said = run([os.path.realpath(interpreter), "--version"], timeout=30)
    except (OSError, CommandFailed, TimeoutExpired):
        return None
    found = _QEMU_VERSION.search(said)
    return major_minor(found[1]) if found else None


def host_arch(machine: str | None = None) -> str:
    """``platform.machine()`` as the planner spells arches: x86_64, aarch64 (the runtime's own
    spelling rule, so that a build and a load name an arch alike)."""
    return normalize_machine(machine if machine is not None else platform.machine())


def elf_header(arch: str, kind: int) -> bytes:
    """The first 20 bytes of a little-endian 64-bit ELF of ``arch``: ``kind`` 2 an executable, 3 a PIE."""
    return (
        b"\x7fELF\x02\x01\x01"
        + bytes(9)
        + kind.to_bytes(2, "little")
        + ELF_MACHINE[arch].to_bytes(2, "little")
    )


@dataclass(frozen=True)
class Handler:
    """One binfmt_misc entry, as /proc/sys/fs/binfmt_misc/<name> shows it."""

    name: str
    enabled: bool
    interpreter: str
    flags: str  # "PF", "OCF"...
    offset: int
    magic: bytes
    mask: bytes

    def runs(self, header: bytes) -> bool:
        """Whether the kernel hands a file starting with ``header`` to this handler."""
        window = header[self.offset : self.offset + len(self.magic)]
        mask = self.mask or b"\xff" * len(self.magic)
        return len(window) == len(self.magic) and all(
            (w & m) == (g & m) for w, g, m in zip(window, self.magic, mask)
        )


def parse_handler(name: str, text: str) -> Handler | None:
    """The entry's fields; None for an entry that matches file name extensions, not magic bytes."""
    fields: dict[str, str] = {}
    enabled = False
    for line in text.splitlines():
        if line.strip() == "enabled":
            enabled = True
        key, _, value = line.partition(" ")
        fields[key.rstrip(":")] = value.strip()
    if "magic" not in fields:
        return None
    try:
        return Handler(
            name,
            enabled,
            fields.get("interpreter", ""),
            fields.get("flags", ""),
            int(fields.get("offset", "0")),
            bytes.fromhex(fields["magic"]),
            bytes.fromhex(fields.get("mask", "")),
        )
    except ValueError:
        return None  # not an entry this kernel writes: treated as absent


HOST_ARCH = "runs on the host's own arch"  # ArchSupport.how where nothing is emulated


@dataclass(frozen=True)
class ArchSupport:
    """Whether ``arch``'s programs run here, how, and else why not and the command that fixes it."""

    arch: str
    runs: bool
    how: str  # HOST_ARCH, "emulated by qemu-aarch64 (/usr/libexec/...)", or why not
    fix: str = ""
    outdated: str = ""  # the binfmt handler whose QEMU is older than MIN_QEMU, when that is why not

    @property
    def emulated(self) -> bool:
        return self.runs and self.how != HOST_ARCH


def arch_support(
    arch: str,
    *,
    host: str | None = None,
    binfmt: Path = BINFMT_MISC,
    version_of: Callable[[str], tuple[int, int] | None] = qemu_version,
) -> ArchSupport:
    """How this machine runs ``arch`` (a planner arch: x86_64, aarch64): natively when it is the
    host's, else through an enabled binfmt_misc handler for its ELF executables and PIEs that
    containers can use (F flag), and, when the handler is a QEMU, one new enough to run torch
    (``version_of``: the handler's QEMU version; tests pass their own)."""
    own = host_arch(host)
    if arch == own:
        return ArchSupport(arch, True, HOST_ARCH)
    # binfmt-support registers qemu-<arch> with the F flag: containers use it too
    register = INSTALL_QEMU
    if arch not in ELF_MACHINE:
        return ArchSupport(arch, False, f"no known ELF machine for {arch!r}")
    status = binfmt / "status"
    if not status.is_file():
        return ArchSupport(
            arch,
            False,
            f"{arch} code needs QEMU user emulation and binfmt_misc is not mounted at {binfmt}",
            f"{MOUNT_BINFMT} && {register}",
        )
    if status.read_text().strip() != "enabled":
        return ArchSupport(
            arch,
            False,
            f"{arch} code needs QEMU user emulation and binfmt_misc is disabled ({status})",
            f"echo 1 > {status}",
        )
    headers = (elf_header(arch, 2), elf_header(arch, 3))
    found = [h for h in _handlers(binfmt) if all(h.runs(header) for header in headers)]
    usable = [h for h in found if h.enabled and "F" in h.flags]
    if usable:
        handler = usable[0]
        version = version_of(handler.interpreter)
        if version is not None and version < MIN_QEMU:
            shown = ".".join(map(str, version))
            return ArchSupport(
                arch,
                False,
                f"{arch} code is emulated by QEMU {shown} ({handler.interpreter}), which "
                f"hangs or crashes importing torch; QEMU >= {'.'.join(map(str, MIN_QEMU))} "
                "runs it",
                f"{NEWER_QEMU}, then update-binfmts --disable {handler.name} "
                f"&& update-binfmts --enable {handler.name}",
                outdated=handler.name,
            )
        said = f"QEMU {'.'.join(map(str, version))}, " if version else ""
        return ArchSupport(arch, True, f"emulated by {handler.name} ({said}{handler.interpreter})")
    if any(h.enabled for h in found):
        handler = next(h for h in found if h.enabled)
        return ArchSupport(
            arch,
            False,
            f"{arch} code is emulated by {handler.name} ({handler.interpreter}), "
            "registered without the F flag: containers cannot reach its interpreter",
            f"echo -1 > {binfmt / handler.name} && {register}",
        )
    if found:
        return ArchSupport(
            arch,
            False,
            f"{arch} code has a binfmt_misc handler, {found[0].name}, that is disabled",
            f"update-binfmts --enable {found[0].name}",
        )
    return ArchSupport(
        arch,
        False,
        f"{arch} code needs QEMU user emulation and no binfmt_misc handler runs it",
        register,
    )


def _handlers(binfmt: Path) -> list[Handler]:
    handlers = []
    for entry in sorted(binfmt.iterdir()):
        if entry.name in ("status", "register") or not entry.is_file():
            continue
        try:
            text = entry.read_text()
        except OSError:
            continue  # removed in between
        handler = parse_handler(entry.name, text)
        if handler is not None:
            handlers.append(handler)
    return handlers
