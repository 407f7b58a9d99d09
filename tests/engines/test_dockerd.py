"""start_engine (wheelfactory engine start, build --setup, .ci/start-docker) on a fake machine."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from wheelfactory.engines.dockerd import EngineSetup, Machine, start_engine
from wheelfactory.support.proc import CommandFailed


class FakeMachine:
    """A machine without Docker: records commands; apt-get install brings dockerd; a started
    dockerd answers after ``answers_after`` polls (never, with None)."""

    def __init__(self, *, root: bool = True, programs: Sequence[str] = ("apt-get",), answers_after: int | None = 2,
                 apt_fails: bool = False) -> None:
        self.root, self.programs, self.answers_after, self.apt_fails = root, set(programs), answers_after, apt_fails
        self.commands: list[list[str]] = []
        self.polls = 0
        self.started = False

    def machine(self) -> Machine:
        return Machine(answers=self.answers, which=self.which, euid=lambda: 0 if self.root else 1000,
                       command=self.command, alive=lambda pid: self.answers_after is not None, sleep=lambda s: None)

    def answers(self) -> str | None:
        if not self.started:
            return None
        self.polls += 1
        return "20.10.24" if self.answers_after is not None and self.polls >= self.answers_after else None

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.programs else None

    def command(self, command: Sequence[str]) -> str:
        self.commands.append(list(command))
        if command[:2] == ["apt-get", "install"]:
            if self.apt_fails:
                raise CommandFailed(command, 100, "E: Unable to locate package docker.io", None)
            self.programs |= {"dockerd", "debootstrap"}
        if command[0] == "sh":
            self.started = True
            return "4242\n"
        return ""


def setup(fake: FakeMachine, tmp_path: Path, **options: object) -> tuple[EngineSetup, list[str]]:
    said: list[str] = []
    result = start_engine(log=tmp_path / "dockerd.log", wait_s=5, say=said.append, machine=fake.machine(),
                          **options)  # type: ignore[arg-type]
    return result, said


def test_an_engine_that_answers_is_left_alone(tmp_path: Path) -> None:
    fake = FakeMachine(programs=("apt-get", "dockerd", "debootstrap"))
    fake.started = True
    fake.answers_after = 1
    result, said = setup(fake, tmp_path)
    assert result.ready and result.detail == "Docker 20.10.24"
    assert fake.commands == [] and said == ["engine: Docker 20.10.24 already answers"]


def test_root_on_debian_installs_then_starts_dockerd_without_a_bridge(tmp_path: Path) -> None:
    fake = FakeMachine()
    result, said = setup(fake, tmp_path)
    assert result.ready, result
    assert fake.commands[0] == ["apt-get", "update", "-qq"]
    assert fake.commands[1] == ["apt-get", "install", "-y", "-qq", "docker.io", "debootstrap"]
    spawn = fake.commands[2]
    assert spawn[0] == "sh" and spawn[-3:] == ["/usr/bin/dockerd", "--bridge=none", "--iptables=false"]
    assert "setsid" in spawn[2]  # detached: the engine outlives the command
    assert result.done == ("installed docker.io debootstrap", f"started dockerd (pid 4242, log {tmp_path}/dockerd.log)")
    assert said[0] == "+ apt-get update -qq" and any("--bridge=none" in line for line in said)


def test_without_root_nothing_is_run_and_the_message_says_what_to_do(tmp_path: Path) -> None:
    fake = FakeMachine(root=False)
    result, _ = setup(fake, tmp_path)
    assert not result.ready and fake.commands == []
    assert "needs root" in result.detail and "sudo wheelfactory engine start" in result.detail


def test_no_install_only_starts(tmp_path: Path) -> None:
    fake = FakeMachine()
    result, _ = setup(fake, tmp_path, install=False)
    assert not result.ready and fake.commands == []
    assert "no dockerd on PATH" in result.detail and "apt-get install -y docker.io" in result.detail


def test_a_failed_install_is_reported(tmp_path: Path) -> None:
    fake = FakeMachine(apt_fails=True)
    result, _ = setup(fake, tmp_path)
    assert not result.ready and "exit code 100" in result.detail and "Unable to locate package" in result.detail


def test_a_dockerd_that_dies_is_reported_with_its_log(tmp_path: Path) -> None:
    fake = FakeMachine(programs=("dockerd", "debootstrap"), answers_after=None)
    (tmp_path / "dockerd.log").write_text("failed to start daemon: permission denied\n")
    result, said = setup(fake, tmp_path)
    assert not result.ready and "did not answer" in result.detail
    assert any("failed to start daemon" in line for line in said)
    assert [c[0] for c in fake.commands] == ["sh"]  # nothing to install


def test_an_engine_that_answers_still_gets_what_the_route_needs(tmp_path: Path) -> None:
    """Most machines already run Docker; few have debootstrap, which [build] debian_base needs."""
    fake = FakeMachine(programs=("apt-get", "dockerd"))
    fake.started, fake.answers_after = True, 1
    result, said = setup(fake, tmp_path)
    assert result.ready and result.warning == ""
    assert fake.commands == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "debootstrap"]]
    assert result.done == ("installed debootstrap",)
    assert said[0] == "engine: Docker 20.10.24 already answers; the build also needs debootstrap"


def test_a_route_part_that_cannot_be_installed_is_a_warning_naming_the_fix(tmp_path: Path) -> None:
    fake = FakeMachine(root=False, programs=("apt-get", "dockerd"))
    fake.started, fake.answers_after = True, 1
    result, _ = setup(fake, tmp_path)
    assert result.ready and fake.commands == []
    assert "debootstrap is missing" in result.warning and "apt-get install -y debootstrap" in result.warning


def test_a_route_without_debian_base_installs_nothing_beside_the_engine(tmp_path: Path) -> None:
    fake = FakeMachine(programs=("apt-get", "dockerd"))
    fake.started, fake.answers_after = True, 1
    result, _ = setup(fake, tmp_path, route={})
    assert result.ready and fake.commands == [] and result.done == ()


def test_build_setup_reports_through_the_progress_channel() -> None:
    """--setup runs in the session (the API's build(setup=True) as the CLI's): its lines are events."""
    from wheelfactory.runner.session import set_up_engine
    from wheelfactory.support.progress import Notice

    heard: list[object] = []
    set_up_engine("host", debian_base=True, progress=heard.append)
    assert heard == [Notice("setup: --engine host needs no Docker engine; nothing to set up")]
