"""images/emulation.py: which arches run here, read from a binfmt_misc table (a directory the
tests write, in the kernel's format: the qemu-aarch64 entry is what Debian bookworm's
qemu-user-static registers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import QEMU_AARCH64_BINFMT
from wheelfactory.images.emulation import (
    HOST_ARCH,
    arch_support,
    elf_header,
    host_arch,
    parse_handler,
    qemu_version,
)

DEBIAN_AARCH64 = QEMU_AARCH64_BINFMT
PYTHON = """enabled
interpreter /usr/bin/python3.11
flags: 
offset 0
magic a70d0d0a
"""
JAR = """enabled
interpreter /usr/bin/jexec
flags: 
extension .jar
"""


def table(tmp_path: Path, status: str | None = "enabled", **entries: str) -> Path:
    root = tmp_path / "binfmt_misc"
    root.mkdir()
    if status is not None:
        (root / "status").write_text(status + "\n")
        (root / "register").write_text("")
    for name, text in entries.items():
        (root / name.replace("_", "-")).write_text(text)
    return root


def test_the_host_arch_runs_natively_whatever_the_table(tmp_path: Path) -> None:
    support = arch_support("x86_64", host="x86_64", binfmt=tmp_path / "absent")
    assert (support.runs, support.emulated, support.how) == (True, False, HOST_ARCH)
    assert arch_support("aarch64", host="arm64", binfmt=tmp_path / "absent").how == HOST_ARCH


def test_debians_qemu_aarch64_entry_runs_aarch64_in_containers(tmp_path: Path) -> None:
    support = arch_support("aarch64", host="x86_64",
                           binfmt=table(tmp_path, qemu_aarch64=DEBIAN_AARCH64, python3_11=PYTHON, jar=JAR),
                           version_of=lambda interpreter: None)
    assert support.runs and support.emulated
    assert support.how == "emulated by qemu-aarch64 (/usr/libexec/qemu-binfmt/aarch64-binfmt-P)"


def test_a_handler_is_found_by_its_magic_not_its_name(tmp_path: Path) -> None:
    # tonistiigi/binfmt and others pick their own names
    assert arch_support("aarch64", host="x86_64", binfmt=table(tmp_path, arm64_any=DEBIAN_AARCH64),
                        version_of=lambda interpreter: None).runs


def test_an_aarch64_handler_does_not_make_x86_64_run_on_aarch64(tmp_path: Path) -> None:
    support = arch_support("x86_64", host="aarch64", binfmt=table(tmp_path, qemu_aarch64=DEBIAN_AARCH64))
    assert not support.runs
    assert support.fix.startswith("apt-get install -y qemu-user-static binfmt-support")


@pytest.mark.parametrize(("status", "entries", "reason", "fix"), [
    (None, {}, "binfmt_misc is not mounted", "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && apt-get"),
    ("disabled", {"qemu_aarch64": DEBIAN_AARCH64}, "binfmt_misc is disabled", "echo 1 > "),
    ("enabled", {"python3_11": PYTHON}, "no binfmt_misc handler runs it", "apt-get install -y qemu-user-static"),
    ("enabled", {"qemu_aarch64": DEBIAN_AARCH64.replace("enabled", "disabled")}, "qemu-aarch64, that is disabled",
     "update-binfmts --enable qemu-aarch64"),
    ("enabled", {"qemu_aarch64": DEBIAN_AARCH64.replace("flags: PF", "flags: P")}, "without the F flag",
     "echo -1 > "),
])
def test_each_way_aarch64_cannot_run_says_why_and_the_fix(tmp_path: Path, status: str | None,
                                                          entries: dict[str, str], reason: str, fix: str) -> None:
    support = arch_support("aarch64", host="x86_64", binfmt=table(tmp_path, status, **entries),
                           version_of=lambda interpreter: None)
    assert not support.runs and not support.emulated
    assert reason in support.how and support.fix.startswith(fix)
    assert "\n" not in support.how + support.fix


def test_the_mask_lets_one_entry_serve_executables_and_pies() -> None:
    handler = parse_handler("qemu-aarch64", DEBIAN_AARCH64)
    assert handler is not None and handler.flags == "PF"
    assert handler.runs(elf_header("aarch64", 2)) and handler.runs(elf_header("aarch64", 3))
    assert not handler.runs(elf_header("x86_64", 3))
    assert not handler.runs(elf_header("aarch64", 3)[:10])  # too short to match


def test_an_extension_entry_is_no_magic_handler() -> None:
    assert parse_handler("jar", JAR) is None


def test_host_arch_spells_machines_as_the_planner_does() -> None:
    assert [host_arch(m) for m in ("x86_64", "AMD64", "arm64", "aarch64")] == ["x86_64", "x86_64", "aarch64", "aarch64"]


def test_the_elf_header_is_what_real_binaries_start_with() -> None:
    import sys

    with open(sys.executable, "rb") as handle:  # this interpreter: a PIE or an executable of the host's arch
        head = handle.read(20)
    assert head in (elf_header(host_arch(), 2), elf_header(host_arch(), 3))


def test_a_qemu_too_old_to_import_torch_is_refused_with_the_upgrade(tmp_path: Path) -> None:
    """Debian bookworm's QEMU 7.2 hangs or crashes in torch's import as aarch64 (measured); 10.0 runs it."""
    binfmt = table(tmp_path, qemu_aarch64=DEBIAN_AARCH64)
    old = arch_support("aarch64", host="x86_64", binfmt=binfmt, version_of=lambda path: (7, 2))
    assert not old.runs
    assert old.how == ("aarch64 code is emulated by QEMU 7.2 (/usr/libexec/qemu-binfmt/aarch64-binfmt-P), which "
                       "hangs or crashes importing torch; QEMU >= 10.0 runs it")
    assert "bookworm-backports" in old.fix and old.fix.endswith(
        "update-binfmts --disable qemu-aarch64 && update-binfmts --enable qemu-aarch64")
    new = arch_support("aarch64", host="x86_64", binfmt=binfmt, version_of=lambda path: (10, 0))
    assert new.runs and new.how == "emulated by qemu-aarch64 (QEMU 10.0, /usr/libexec/qemu-binfmt/aarch64-binfmt-P)"
    # a handler that is no QEMU (or says no version) is taken at its word
    assert arch_support("aarch64", host="x86_64", binfmt=binfmt, version_of=lambda path: None).runs


def test_qemu_version_reads_what_the_emulator_prints(tmp_path: Path) -> None:
    fake = tmp_path / "qemu-aarch64"
    fake.write_text("#!/bin/sh\necho 'qemu-aarch64 version 10.0.2 (Debian 1:10.0.2+ds-2)'\n")
    fake.chmod(0o755)
    link = tmp_path / "aarch64-binfmt-P"
    link.symlink_to(fake)
    assert qemu_version(str(link)) == (10, 0)
    assert qemu_version(str(tmp_path / "absent")) is None
