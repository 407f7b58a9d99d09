"""Debug info out of the shipped libraries, kept beside the wheel ([build] strip, default true).

The factory compiles with -g0 (engines/compile_flags.py), but a project's own -g, a CMake
RelWithDebInfo build or a static library linked in still brings DWARF: DeepSpeed's cpu_adam is
15.8 MB with it. Each library of the repaired wheel that has ``.debug_*`` sections is split with
GNU objcopy, as distributions ship -dbg packages: ``--only-keep-debug`` writes the debug file,
``--strip-debug --add-gnu-debuglink`` leaves the library its code and symbols and a link (name and
CRC) to that file. The debug files go to ``dist/<variant>/debug/.build-id/<xx>/<rest>.debug``,
the layout gdb and eu-unstrip look up by the library's GNU build id (``set debug-file-directory``).

objcopy only reads its own machine's ELF: an aarch64 wheel needs aarch64-linux-gnu-objcopy
(binutils-aarch64-linux-gnu) on an x86_64 host. Where it is missing the library keeps its debug
info and the build says so in a warning: nothing is lost, the wheel is only bigger.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.images.emulation import host_arch
from wheelfactory.support.proc import run
from wheelfactory.support.timeline import note
from wheelfactory.support.wheel_rewrite import rewrite_wheel
from wheelfactory.verify.wheel_identity import is_shared_library

DEBUG_DIR = "debug"  # in the build's work directory, then dist/<variant>/debug
_OBJCOPY_PREFIX = {"x86_64": "x86_64-linux-gnu-", "aarch64": "aarch64-linux-gnu-"}


@dataclass(frozen=True)
class Stripped:
    wheel: Path
    saved: int  # bytes out of the libraries
    debug_files: tuple[str, ...]  # paths under the debug directory
    missing_tool: str | None = None  # the objcopy this arch needs and this host lacks


def objcopy_for(arch: str) -> str | None:
    """The objcopy that reads ``arch``'s ELF here: the host's own for its machine, else the cross one."""
    native = host_arch() == arch
    for name in (("objcopy",) if native else ()) + (
        f"{_OBJCOPY_PREFIX.get(arch, arch + '-linux-gnu-')}objcopy",
    ):
        if shutil.which(name):
            return name
    return None


def _debug_info(data: bytes) -> tuple[bool, str | None]:
    """(whether the ELF has .debug_* sections, its GNU build id as hex)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import NoteSection

    try:
        elf = ELFFile(io.BytesIO(data))
        sections = list(elf.iter_sections())
    except (ELFError, ValueError, KeyError):
        return False, None
    debug = any(s.name.startswith((".debug_", ".zdebug_")) and s["sh_size"] for s in sections)
    build_id = None
    for section in sections:
        if isinstance(section, NoteSection):
            for note in section.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    build_id = str(note["n_desc"])
    return debug, build_id


def strip_wheel(wheel: Path, arch: str, dest_dir: Path, debug_dir: Path, log: Path) -> Stripped:
    """``wheel`` with its libraries' debug info moved to ``debug_dir`` (module docstring); the
    wheel itself where no library has any."""
    tool = objcopy_for(arch)
    saved: list[int] = []
    written: list[str] = []
    needing: list[str] = []

    def contents(member: str, data: bytes) -> bytes:
        if not is_shared_library(member):
            return data
        debug, build_id = _debug_info(data)
        if not debug:
            return data
        if tool is None:
            needing.append(member)
            return data
        with tempfile.TemporaryDirectory(prefix="wf-strip-") as tmp:
            library, debug_file = Path(tmp) / "lib.so", Path(tmp) / "lib.debug"
            stripped = Path(tmp) / "stripped.so"
            library.write_bytes(data)
            run([tool, "--only-keep-debug", str(library), str(debug_file)], log=log)
            # the link names the debug file as gdb finds it by build id; without one, beside the library
            name = f"{build_id[2:]}.debug" if build_id else f"{Path(member).name}.debug"
            linked = Path(tmp) / name
            debug_file.rename(linked)
            run(
                [
                    tool,
                    "--strip-debug",
                    f"--add-gnu-debuglink={linked}",
                    str(library),
                    str(stripped),
                ],
                log=log,
            )
            relative = f".build-id/{build_id[:2]}/{name}" if build_id else f"{member}.debug"
            target = debug_dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(linked, target)
            result = stripped.read_bytes()
        saved.append(len(data) - len(result))
        written.append(relative)
        note(
            log,
            f"strip: {member}: {len(data)} -> {len(result)} bytes; its debug info in "
            f"{DEBUG_DIR}/{relative}",
        )
        return result

    out = rewrite_wheel(wheel, dest_dir, contents=contents)
    if not written:
        out.unlink(missing_ok=True)
        missing = (
            None
            if not needing
            else (
                f"the debug info stays in {', '.join(needing)}: no objcopy for {arch} here "
                f"(apt-get install binutils-{_OBJCOPY_PREFIX.get(arch, arch + '-linux-gnu-').rstrip('-')})"
            )
        )
        return Stripped(wheel, 0, (), missing)
    return Stripped(out, sum(saved), tuple(written))


def ship_stripped(
    strip: bool, arch: str, wheel: Path, workdir: Path, log: Path, warn: Callable[[str], None]
) -> Path:
    """The wheel a variant ships with [build] strip (on by default): its libraries without debug
    info, which goes to ``workdir/debug`` (the runner moves it beside the wheel in dist)."""
    if not strip:
        return wheel
    done = strip_wheel(wheel, arch, workdir / "stripped", workdir / DEBUG_DIR, log)
    if done.missing_tool:
        warn(done.missing_tool)
    if done.saved:
        note(
            log,
            f"strip: {done.saved} bytes of debug info out of the wheel's libraries; wheel "
            f"{wheel.stat().st_size} -> {done.wheel.stat().st_size} bytes",
        )
    return done.wheel
