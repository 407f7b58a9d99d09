"""set_up_emulation (wheelfactory engine start --emulate, build --setup): a foreign arch is made to
run through QEMU user emulation, step by step, on a fake machine whose binfmt_misc table is a
directory the fake's commands write as the kernel and Debian's packages would."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.testkit import QEMU_AARCH64_BINFMT
from wheelfactory.engines.dockerd import EmulationSetup, Machine, set_up_emulation
from wheelfactory.support.proc import CommandFailed


class FakeHost:
    """An x86-64 machine: ``mount`` makes the binfmt_misc table appear; installing qemu-user-static
    registers qemu-aarch64 only where the table is mounted (as its postinst does);
    ``update-binfmts --enable`` registers it afterwards."""

    def __init__(self, binfmt: Path, *, root: bool = True, mounted: bool = False, installed: bool = False,
                 mount_fails: bool = False) -> None:
        self.binfmt, self.root, self.mount_fails = binfmt, root, mount_fails
        self.programs = {"apt-get", "update-binfmts"} | ({"qemu-aarch64-static"} if installed else set())
        self.commands: list[list[str]] = []
        if mounted:
            self._mount()

    def machine(self) -> Machine:
        return Machine(answers=lambda: "20.10.24", which=lambda n: f"/usr/bin/{n}" if n in self.programs else None,
                       euid=lambda: 0 if self.root else 1000, command=self.command)

    def _mount(self) -> None:
        self.binfmt.mkdir(exist_ok=True)
        (self.binfmt / "status").write_text("enabled\n")

    def command(self, command: Sequence[str]) -> str:
        self.commands.append(list(command))
        if command[0] == "mount":
            if self.mount_fails:
                raise CommandFailed(command, 32, "mount: permission denied", None)
            self._mount()
        elif command[:2] == ["apt-get", "install"]:
            self.programs.add("qemu-aarch64-static")
            if (self.binfmt / "status").is_file():
                (self.binfmt / "qemu-aarch64").write_text(QEMU_AARCH64_BINFMT)
        elif command[0] == "update-binfmts" and (self.binfmt / "status").is_file():
            (self.binfmt / "qemu-aarch64").write_text(QEMU_AARCH64_BINFMT)
        return ""


def emulate(host: FakeHost, archs: Sequence[str] = ("x86_64", "aarch64"), **options: object) -> tuple[EmulationSetup, list[str]]:
    said: list[str] = []
    result = set_up_emulation(archs, say=said.append, machine=host.machine(), binfmt=host.binfmt, host="x86_64",
                              version_of=lambda interpreter: (10, 0),
                              **options)  # type: ignore[arg-type]
    return result, said


def test_a_bare_machine_gets_binfmt_mounted_qemu_installed_and_aarch64_running(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "binfmt_misc")
    result, said = emulate(host)
    assert result.ready and result.done == ("mounted binfmt_misc", "installed qemu-user-static binfmt-support")
    assert host.commands[0] == ["mount", "-t", "binfmt_misc", "binfmt_misc", str(host.binfmt)]
    assert ["apt-get", "install", "-y", "-qq", "qemu-user-static", "binfmt-support"] in host.commands
    assert said[-1] == "emulation: aarch64 code emulated by qemu-aarch64 (QEMU 10.0, /usr/libexec/qemu-binfmt/aarch64-binfmt-P)"
    assert all(line.startswith(("+ ", "emulation: ")) for line in said)  # each step is said before it runs


def test_emulation_that_already_runs_is_left_alone(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "binfmt_misc", mounted=True, installed=True)
    host.command(["update-binfmts", "--enable", "qemu-aarch64"])
    host.commands.clear()
    result, _ = emulate(host)
    assert result.ready and result.done == () and host.commands == []
    # the host's own arch needs nothing at all
    bare = FakeHost(tmp_path / "absent")
    assert emulate(bare, ("x86_64",))[0].ready and bare.commands == []


def test_installed_but_unregistered_qemu_is_enabled(tmp_path: Path) -> None:
    """binfmt_misc mounted after the package was installed: its postinst registered nothing."""
    host = FakeHost(tmp_path / "binfmt_misc", mounted=True, installed=True)
    result, _ = emulate(host)
    assert result.ready and result.done == ("enabled qemu-aarch64",)
    assert host.commands == [["update-binfmts", "--enable", "qemu-aarch64"]]


def test_without_root_nothing_is_done_and_the_fix_is_said(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "binfmt_misc", root=False)
    result, said = emulate(host)
    assert not result.ready and host.commands == []
    (line,) = said
    assert line.startswith("emulation: aarch64 code does not run here: aarch64 code needs QEMU user emulation "
                           "and binfmt_misc is not mounted")
    assert "fix: mount -t binfmt_misc" in line and "apt-get install -y qemu-user-static binfmt-support" in line


def test_a_mount_refused_in_an_unprivileged_container_is_said_not_raised(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "binfmt_misc", mount_fails=True)
    result, said = emulate(host, ("aarch64",))
    assert not result.ready
    assert any("mounting binfmt_misc failed (mount: permission denied)" in line for line in said)


def debian_root(root: Path, *, distro: str = "debian", backports: bool = False) -> Path:
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    (root / "etc/os-release").write_text(f'ID={distro}\nVERSION_CODENAME=bookworm\nPRETTY_NAME="x"\n')
    suites = "bookworm bookworm-updates" + (" bookworm-backports" if backports else "")
    (root / "etc/apt/sources.list.d/debian.sources").write_text(
        f"Types: deb\nURIs: http://mirror.example/debian\nSuites: {suites}\nComponents: main\n")
    (root / "usr/share/keyrings").mkdir(parents=True)
    (root / "usr/share/keyrings/debian-archive-keyring.gpg").write_bytes(b"")
    return root


def test_bookworms_qemu_72_is_replaced_by_the_one_from_backports_through_the_hosts_own_mirror(tmp_path: Path) -> None:
    """Debian bookworm's QEMU 7.2 hangs importing aarch64 torch: engine start --emulate adds the
    release's backports from the mirror apt already uses, installs QEMU from it and registers it
    again (an F-flag handler keeps the old binary open)."""
    host = FakeHost(tmp_path / "binfmt_misc", mounted=True, installed=True)
    host.command(["update-binfmts", "--enable", "qemu-aarch64"])
    host.commands.clear()
    root = debian_root(tmp_path / "root")

    def version_of(interpreter: str) -> tuple[int, int]:
        from_backports = any("bookworm-backports" in c for c in host.commands)
        return (10, 0) if from_backports and ["update-binfmts", "--enable", "qemu-aarch64"] in host.commands else (7, 2)

    said: list[str] = []
    result = set_up_emulation(["aarch64"], say=said.append, machine=host.machine(), binfmt=host.binfmt,
                              host="x86_64", version_of=version_of, apt_root=root)
    assert result.ready and result.done == ("installed QEMU from bookworm-backports",)
    source = (root / "etc/apt/sources.list.d/wheelfactory-backports.sources").read_text()
    assert "URIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\n" in source
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in source
    assert host.commands == [["apt-get", "update", "-qq"],
                             ["apt-get", "install", "-y", "-qq", "-t", "bookworm-backports", "qemu-user-static",
                              "binfmt-support"],
                             ["update-binfmts", "--disable", "qemu-aarch64"], ["update-binfmts", "--enable", "qemu-aarch64"]]
    assert said[-1].startswith("emulation: aarch64 code emulated by qemu-aarch64 (QEMU 10.0")


def test_backports_already_in_apt_sources_are_used_as_they_are_and_no_debian_means_no_guess(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "binfmt_misc", mounted=True, installed=True)
    host.command(["update-binfmts", "--enable", "qemu-aarch64"])
    root = debian_root(tmp_path / "root", backports=True)
    set_up_emulation(["aarch64"], machine=host.machine(), binfmt=host.binfmt, host="x86_64",
                     version_of=lambda interpreter: (7, 2), apt_root=root)
    assert not (root / "etc/apt/sources.list.d/wheelfactory-backports.sources").exists()
    assert ["apt-get", "install", "-y", "-qq", "-t", "bookworm-backports", "qemu-user-static", "binfmt-support"] in host.commands

    ubuntu = FakeHost(tmp_path / "binfmt2", mounted=True, installed=True)
    ubuntu.command(["update-binfmts", "--enable", "qemu-aarch64"])
    ubuntu.commands.clear()
    said: list[str] = []
    result = set_up_emulation(["aarch64"], say=said.append, machine=ubuntu.machine(), binfmt=ubuntu.binfmt,
                              host="x86_64", version_of=lambda interpreter: (8, 2),
                              apt_root=debian_root(tmp_path / "ubuntu", distro="ubuntu"))
    assert not result.ready and ubuntu.commands == []
    assert any("names no Debian release: install QEMU >= 10 by hand" in line for line in said)
    assert "QEMU 8.2" in said[-1] and "bookworm-backports" in said[-1]  # the fix, said
