"""A Docker engine on this machine, set up the way CI runs it: Debian's docker.io (installed with
apt-get where this runs as root on Debian/Ubuntu, with debootstrap for the offline base image),
then ``dockerd --bridge=none --iptables=false`` (no bridge network and no iptables rules: image
builds use --network host, build containers --network none), detached so that it outlives the
command. Idempotent: an engine that answers is left alone.

The one copy of this logic: `wheelfactory engine start` and `wheelfactory build --setup` call
``start_engine``, and .ci/start-docker runs `wheelfactory engine start`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wheelfactory.errors import DockerUnavailable
from wheelfactory.images.emulation import BINFMT_MISC, ArchSupport, arch_support, qemu_version
from wheelfactory.support.proc import CommandFailed, run, tail_of

DOCKERD_ARGS = ("--bridge=none", "--iptables=false")
DEFAULT_LOG = Path("/tmp/dockerd.log")
DEFAULT_WAIT_S = 60
# Debian package -> the program it brings (what tells us it is missing)
ENGINE_PACKAGES = {"docker.io": "dockerd"}
# What a build route needs besides the engine: debootstrap makes [build] debian_base's image. Also
# installed when an engine already answers (most machines run Docker, few have debootstrap).
DEBIAN_BASE_PACKAGES = {"debootstrap": "debootstrap"}
APT_TIMEOUT_S = 900

Say = Callable[[str], None]


def engine_version() -> str | None:
    """The version of the Docker engine that answers (DOCKER_HOST or the local socket), or None."""
    from wheelfactory.images.containers import docker_client

    try:
        client = docker_client(hint="")
    except DockerUnavailable:
        return None
    try:
        return str(client.version().get("Version", "?"))
    finally:
        client.close()


def _command(command: Sequence[str]) -> str:
    return run(command, env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=APT_TIMEOUT_S)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has exited


@dataclass(frozen=True)
class Machine:
    """How ``start_engine`` looks at and acts on this machine (tests pass fakes)."""

    answers: Callable[[], str | None] = engine_version  # the answering engine's version, or None
    which: Callable[[str], str | None] = shutil.which
    euid: Callable[[], int] = os.geteuid
    # runs a command (support/proc.py), returns its output
    command: Callable[[Sequence[str]], str] = _command
    alive: Callable[[int], bool] = _alive
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class EngineSetup:
    ready: bool
    detail: str  # ready: "Docker 20.10.24"; otherwise why no engine answers and what to do
    # what was done, for the summary ("installed docker.io")
    done: tuple[str, ...] = field(default=())
    warning: str = ""  # ready, but a part the route needs is missing: what and how to get it


def _install(m: Machine, packages: Sequence[str], say: Say) -> str | None:
    """apt-get install ``packages``; None, or why it failed (the command, its exit code, its last line)."""
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        say(f"+ {shlex.join(command)}")
        try:
            m.command(command)
        except CommandFailed as exc:
            last = exc.tail.strip().splitlines()[-1:] or [""]
            return f"`{shlex.join(command)}` failed with exit code {exc.returncode}: {last[0]}"
    return None


def start_engine(
    *,
    install: bool = True,
    log: Path = DEFAULT_LOG,
    wait_s: int = DEFAULT_WAIT_S,
    say: Say = lambda line: None,
    machine: Machine | None = None,
    route: Mapping[str, str] = DEBIAN_BASE_PACKAGES,
) -> EngineSetup:
    """Make a Docker engine answer here where that can be done, with what the build ``route`` needs
    (package -> its program): install the packages (``install``, root, apt-get), start dockerd
    (root). Each step is told to ``say`` before it runs."""
    m = machine or Machine()
    version = m.answers()
    root = m.euid() == 0
    route_missing = [package for package, program in route.items() if m.which(program) is None]
    if version is not None:
        if not route_missing:
            say(f"engine: Docker {version} already answers")
            return EngineSetup(True, f"Docker {version}")
        say(
            f"engine: Docker {version} already answers; the build also needs {' '.join(route_missing)}"
        )
        if install and root and m.which("apt-get"):
            failed = _install(m, route_missing, say)
            if failed is None:
                return EngineSetup(
                    True, f"Docker {version}", (f"installed {' '.join(route_missing)}",)
                )
        else:
            failed = "installing it needs root and apt-get" if install else "--no-install"
        return EngineSetup(
            True,
            f"Docker {version}",
            warning=(
                f"{' '.join(route_missing)} is missing ({failed}): install it (Debian/Ubuntu: "
                f"apt-get install -y {' '.join(route_missing)})"
            ),
        )
    done: list[str] = []
    missing = [
        package for package, program in ENGINE_PACKAGES.items() if m.which(program) is None
    ] + route_missing
    if missing and install and root and m.which("apt-get"):
        failed = _install(m, missing, say)
        if failed is not None:
            return EngineSetup(False, failed, tuple(done))
        done.append(f"installed {' '.join(missing)}")
    dockerd = m.which("dockerd")
    if dockerd is None:
        if not install:
            why = "install Docker (Debian/Ubuntu: apt-get install -y docker.io)"
        elif not root:
            why = "installing Docker needs root: run `sudo wheelfactory engine start` (Debian/Ubuntu) or install it"
        elif not m.which("apt-get"):
            why = "no apt-get here to install it: install Docker your platform's way"
        else:
            why = "apt-get installed docker.io, yet no dockerd is on PATH"
        return EngineSetup(False, f"no dockerd on PATH: {why}", tuple(done))
    if not root:
        return EngineSetup(
            False,
            "no Docker engine answers, and starting dockerd needs root: run "
            "`sudo wheelfactory engine start`, or start Docker your usual way "
            "(e.g. systemctl start docker)",
            tuple(done),
        )
    say(f"+ {shlex.join([dockerd, *DOCKERD_ARGS])} >{log} 2>&1 &")
    log.parent.mkdir(parents=True, exist_ok=True)
    # setsid: the engine outlives this command; it is not tied to the factory like a build is.
    output = m.command(
        [
            "sh",
            "-c",
            'log=$1; shift; setsid "$@" >"$log" 2>&1 </dev/null & echo $!',
            "sh",
            str(log),
            dockerd,
            *DOCKERD_ARGS,
        ]
    )
    pid = int(output.strip().splitlines()[-1])
    for _ in range(wait_s):
        version = m.answers()
        if version is not None:
            done.append(f"started dockerd (pid {pid}, log {log})")
            say(f"engine: Docker {version} answers (dockerd pid {pid}, log {log})")
            return EngineSetup(True, f"Docker {version}", tuple(done))
        if not m.alive(pid):
            break
        m.sleep(1)
    tail = tail_of(log)
    if tail:
        say(f"last lines of {log}:\n{tail}")
    return EngineSetup(False, f"dockerd did not answer within {wait_s} s (log: {log})", tuple(done))


# What QEMU user emulation needs on Debian/Ubuntu: the static emulators, and binfmt-support, which
# registers them with the F flag (images/emulation.py: containers can use them).
EMULATION_PACKAGES = ("qemu-user-static", "binfmt-support")


@dataclass(frozen=True)
class EmulationSetup:
    """What ``set_up_emulation`` found and did for each foreign arch."""

    # after the setup: for each arch asked, whether it runs and how
    support: tuple[ArchSupport, ...]
    done: tuple[str, ...] = ()  # "mounted binfmt_misc", "installed qemu-user-static binfmt-support"

    @property
    def ready(self) -> bool:
        return all(s.runs for s in self.support)


# under the apt root
BACKPORTS_SOURCE = Path("etc/apt/sources.list.d/wheelfactory-backports.sources")
DEBIAN_KEYRING = Path("usr/share/keyrings/debian-archive-keyring.gpg")


def backports_source(root: Path) -> tuple[str, str | None]:
    """(suite, the deb822 text of an apt source for it) of this Debian release's backports, from
    the mirror the host's apt already uses; text None when a source names the suite already.
    Raises ConfigError when this is no Debian release with a codename, or no mirror is found."""
    from wheelfactory.errors import ConfigError
    from wheelfactory.plan.indexes import debian_mirror, read_apt_sources

    release = {}
    try:
        for line in (root / "etc/os-release").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            release[key] = value.strip().strip('"')
    except OSError:
        pass
    codename = release.get("VERSION_CODENAME", "")
    if release.get("ID") != "debian" or not codename:
        raise ConfigError(
            f"{root / 'etc/os-release'} names no Debian release: install QEMU >= 10 by hand"
        )
    suite = f"{codename}-backports"
    if any(suite in text.split() for _, text in read_apt_sources(root)):
        return suite, None
    mirror = debian_mirror(None, root=root)
    signed = f"Signed-By: /{DEBIAN_KEYRING}\n" if (root / DEBIAN_KEYRING).is_file() else ""
    return (
        suite,
        f"# written by wheelfactory engine start --emulate: QEMU >= 10\nTypes: deb\nURIs: {mirror}\n"
        f"Suites: {suite}\nComponents: main\n{signed}",
    )


def _newer_qemu(m: Machine, outdated: Sequence[ArchSupport], root: Path, say: Say) -> str:
    """Install QEMU from this Debian release's backports and register it again (an F-flag handler
    keeps the binary it opened at registration). What was done, or "" after saying why not."""
    from wheelfactory.errors import ConfigError

    try:
        suite, text = backports_source(root)
    except ConfigError as exc:
        say(f"emulation: {exc}")
        return ""
    if text is not None:
        target = root / BACKPORTS_SOURCE
        say(f"+ write {target} ({suite} from the host's apt mirror)")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    commands = [
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "-t", suite, *EMULATION_PACKAGES],
    ]
    for found in outdated:
        commands += [
            ["update-binfmts", "--disable", found.outdated],
            ["update-binfmts", "--enable", found.outdated],
        ]
    for command in commands:
        say(f"+ {shlex.join(command)}")
        try:
            m.command(command)
        except CommandFailed as exc:
            say(f"emulation: {shlex.join(command)} failed ({tail_of_failure(exc)})")
            return ""
    return f"installed QEMU from {suite}"


def set_up_emulation(
    archs: Sequence[str],
    *,
    install: bool = True,
    say: Say = lambda line: None,
    machine: Machine | None = None,
    binfmt: Path = BINFMT_MISC,
    host: str | None = None,
    apt_root: Path = Path("/"),
    version_of: Callable[[str], tuple[int, int] | None] = qemu_version,
) -> EmulationSetup:
    """Make ``archs`` (planner arches) run here: the host's own as it is, another through QEMU user
    emulation, as docker/setup-qemu-action does on CI: mount binfmt_misc, install Debian's
    qemu-user-static and binfmt-support (root, apt-get), then enable the arch's handler; where the
    release's QEMU is too old to run torch (bookworm's 7.2), the one from its backports, through the
    host's own apt mirror (``apt_root``: where /etc/apt and /etc/os-release are read and written).
    Each step is told to ``say`` first; what cannot be done is left to the arch's ``fix``."""
    m = machine or Machine()
    done: list[str] = []

    def check() -> dict[str, ArchSupport]:
        return {
            arch: arch_support(arch, host=host, binfmt=binfmt, version_of=version_of)
            for arch in sorted(set(archs))
        }

    support = check()
    missing = [s for s in support.values() if not s.runs]
    can_act = install and m.euid() == 0
    if missing and can_act and not (binfmt / "status").is_file():
        command = ["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)]
        say(f"+ {shlex.join(command)}")
        try:
            m.command(command)
            done.append("mounted binfmt_misc")
        except CommandFailed as exc:
            say(
                f"emulation: mounting binfmt_misc failed ({tail_of_failure(exc)}): a container without "
                "privileges cannot; run it on the host"
            )
    if (
        missing
        and can_act
        and m.which("apt-get")
        and any(m.which(f"qemu-{s.arch}-static") is None for s in missing)
    ):
        failed = _install(m, EMULATION_PACKAGES, say)
        if failed is None:
            done.append(f"installed {' '.join(EMULATION_PACKAGES)}")
        else:
            say(f"emulation: {failed}")
    support = check()
    for arch, found in support.items():
        # Installed, yet not registered (binfmt_misc was mounted after the package's postinst ran).
        if (
            not found.runs
            and not found.outdated
            and can_act
            and m.which("update-binfmts")
            and m.which(f"qemu-{arch}-static")
        ):
            command = ["update-binfmts", "--enable", f"qemu-{arch}"]
            say(f"+ {shlex.join(command)}")
            try:
                m.command(command)
                done.append(f"enabled qemu-{arch}")
            except CommandFailed as exc:
                say(f"emulation: {shlex.join(command)} failed ({tail_of_failure(exc)})")
    support = check()
    outdated = [found for found in support.values() if found.outdated]
    if outdated and can_act and m.which("apt-get"):
        newer = _newer_qemu(m, outdated, apt_root, say)
        if newer:
            done.append(newer)
        support = check()
    for found in support.values():
        if found.emulated:
            say(f"emulation: {found.arch} code {found.how}")
        elif not found.runs:
            say(f"emulation: {found.arch} code does not run here: {found.how}; fix: {found.fix}")
    return EmulationSetup(tuple(support.values()), tuple(done))


def tail_of_failure(exc: CommandFailed) -> str:
    last = exc.tail.strip().splitlines()[-1:] or [f"exit code {exc.returncode}"]
    return last[0]
