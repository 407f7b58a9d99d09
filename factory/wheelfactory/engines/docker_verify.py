"""The checks of a Docker build's wheel (verify/checks.py, as every engine runs them), with its
smoke test and the project's tests each in a fresh container from the build's image, offline:
only the prepared torch, the wheel's dependencies (and the tests' requirements) mounted
read-only, the wheel installed into a directory of its own (--no-deps), run from a directory
where nothing of the build is importable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelfactory.engines.docker_envs import Interpreter
from wheelfactory.engines.docker_run import DockerRun
from wheelfactory.engines.prepared_env import PreparedEnv
from wheelfactory.errors import DockerBuildError, Findings
from wheelfactory.images.containers import Container
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify.checks import verify_wheel
from wheelfactory.verify.project_suite import (
    TEST_TERMINAL,
    project_test_shell,
    project_test_verdict,
    stage_test_sources,
)

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Checked:
    """What a wheel is checked with in its image: the interpreter entry (cp311-cp311), the
    prepared torch, and beside it the wheel's dependencies and the tests' requirements."""

    at: Interpreter
    torch: PreparedEnv
    deps: PreparedEnv | None = None
    tests: PreparedEnv | None = None


def verify_in_image(
    docker: DockerRun,
    stage: Stage,
    checked: Checked,
    wheel: Path,
    log: Path,
    timeline: Timeline,
    workdir: Path,
) -> Findings:
    """Every check of ``wheel`` (verify/checks.py), the smoke test and the project's tests in
    fresh containers of ``checked``'s image; what they found."""
    interpreter = f"/opt/python/{checked.at.python}/bin/python"

    def install(box: Container, target: str) -> None:
        box.run(
            [interpreter, "-m", "pip", "install", "--no-index", "--no-deps"]
            + ["--disable-pip-version-check", "-q", "--target", target, f"/dist/{wheel.name}"],
            log=log,
        )

    def container(envs: list[PreparedEnv], more: dict[Path, str] | None = None) -> Container:
        volumes = {
            **{env.path: f"{env.mount}:ro" for env in envs},
            wheel.parent: "/dist:ro",
            **(more or {}),
        }
        return Container(
            docker.client,
            checked.at.image.id,
            network="none",
            labels=docker.options.labels,
            volumes=volumes,
        )

    def smoke(code: str, log: Path) -> str:
        envs = [env for env in (checked.deps, checked.torch) if env is not None]
        with container(envs) as box:
            install(box, "/tmp/smoke")
            return box.run(
                [interpreter, "-s", "-c", code],
                log=log,
                workdir="/tmp",
                environment={"PYTHONPATH": ":".join(["/tmp/smoke", *(e.mount for e in envs)])},
            )

    def run_tests(tests: ProjectTests, wheel: Path) -> tuple[bool, str]:
        """[test] in a copy of the test sources, where the project's own package is hidden."""
        project = workdir / "tests-project"
        stage_test_sources(stage, tests, project, log)
        envs = [e for e in (checked.deps, checked.tests, checked.torch) if e is not None]
        paths = ["/tmp/wheel", *(e.mount for e in envs)]
        with container(envs, {project: "/project"}) as box:
            install(box, "/tmp/wheel")
            bins = ":".join(f"{p}/bin" for p in paths[1:])
            output = box.run(
                ["sh", "-c", project_test_shell(tests, "/project")],
                log=log,
                workdir="/project",
                check=False,
                environment={
                    "PYTHONPATH": ":".join(paths),
                    "HOME": "/tmp",
                    **TEST_TERMINAL,
                    "PATH": f"{bins}:/opt/python/{checked.at.python}/bin:{SYSTEM_PATH}",
                },
            )
        return project_test_verdict(output)

    return verify_wheel(
        stage,
        wheel,
        log,
        smoke=smoke,
        glibc_floor=docker.options.glibc_floor,
        error=DockerBuildError,
        torch_include=checked.torch.path / "torch" / "include",
        timeline=timeline,
        run_tests=run_tests,
    )
