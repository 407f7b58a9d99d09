"""Whether this machine runs a variant's arch: natively, or through a binfmt_misc handler (QEMU user
emulation) that containers can use too.

A container sees the host's binfmt_misc table but not the host's files, so a handler serves
containers only when it was registered with the F flag (the kernel opens the interpreter at
registration). Debian's qemu-user-static registers ``qemu-<arch>`` that way through binfmt-support.

``arch_support`` reads the table (a directory, a parameter: tests pass their own) and nothing else.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

BINFMT_MISC = Path("/proc/sys/fs/binfmt_misc")
# The ELF e_machine of each arch the planner knows (plan/identity.ARCHES)
ELF_MACHINE = {"x86_64": 0x3E, "aarch64": 0xB7}
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # debootstrap --arch, dpkg
OCI_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # an image config's "architecture"
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
INSTALL_QEMU = "apt-get install -y qemu-user-static binfmt-support"
MOUNT_BINFMT = f"mount -t binfmt_misc binfmt_misc {BINFMT_MISC}"


def host_arch(machine: str | None = None) -> str:
    """``platform.machine()`` as the planner spells arches: x86_64, aarch64."""
    lowered = (machine if machine is not None else platform.machine()).lower()
    return _MACHINE_ALIASES.get(lowered, lowered)


def elf_header(arch: str, kind: int) -> bytes:
    """The first 20 bytes of a little-endian 64-bit ELF of ``arch``: ``kind`` 2 an executable, 3 a PIE."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + kind.to_bytes(2, "little") + ELF_MACHINE[arch].to_bytes(2, "little")


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
        window = header[self.offset:self.offset + len(self.magic)]
        mask = self.mask or b"\xff" * len(self.magic)
        return len(window) == len(self.magic) and all(
            (w & m) == (g & m) for w, g, m in zip(window, self.magic, mask))


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
        return Handler(name, enabled, fields.get("interpreter", ""), fields.get("flags", ""),
                       int(fields.get("offset", "0")), bytes.fromhex(fields["magic"]),
                       bytes.fromhex(fields.get("mask", "")))
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

    @property
    def emulated(self) -> bool:
        return self.runs and self.how != HOST_ARCH


def arch_support(arch: str, *, host: str | None = None, binfmt: Path = BINFMT_MISC) -> ArchSupport:
    """How this machine runs ``arch`` (a planner arch: x86_64, aarch64): natively when it is the
    host's, else through an enabled binfmt_misc handler for its ELF executables and PIEs that
    containers can use (F flag)."""
    own = host_arch(host)
    if arch == own:
        return ArchSupport(arch, True, HOST_ARCH)
    register = f"{INSTALL_QEMU} (as root: it registers qemu-{arch} for containers too)"
    if arch not in ELF_MACHINE:
        return ArchSupport(arch, False, f"no known ELF machine for {arch!r}")
    status = binfmt / "status"
    if not status.is_file():
        return ArchSupport(arch, False, f"{arch} code needs QEMU user emulation and binfmt_misc is not mounted "
                                        f"at {binfmt}", f"{MOUNT_BINFMT} && {register}")
    if status.read_text().strip() != "enabled":
        return ArchSupport(arch, False, f"{arch} code needs QEMU user emulation and binfmt_misc is disabled "
                                        f"({status})", f"echo 1 > {status}")
    headers = (elf_header(arch, 2), elf_header(arch, 3))
    found = [h for h in _handlers(binfmt) if all(h.runs(header) for header in headers)]
    usable = [h for h in found if h.enabled and "F" in h.flags]
    if usable:
        return ArchSupport(arch, True, f"emulated by {usable[0].name} ({usable[0].interpreter})")
    if any(h.enabled for h in found):
        handler = next(h for h in found if h.enabled)
        return ArchSupport(arch, False, f"{arch} code is emulated by {handler.name} ({handler.interpreter}), "
                                        "registered without the F flag: containers cannot reach its interpreter",
                           f"echo -1 > {binfmt / handler.name} && {register}")
    if found:
        return ArchSupport(arch, False, f"{arch} code has a binfmt_misc handler, {found[0].name}, that is disabled",
                           f"update-binfmts --enable {found[0].name}")
    return ArchSupport(arch, False, f"{arch} code needs QEMU user emulation and no binfmt_misc handler runs it",
                       register)


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
