"""The stable-ABI gate of a Docker build: the wheel, verified with the build's torch, verified again
(the smoke test, the project's tests) with each other torch release of ``variant.gate``, each in a
fresh container; their wheel sets and environments are the ones a build of that torch makes, so
a torch another variant uses is downloaded once. It fails naming the torch."""

from __future__ import annotations

from pathlib import Path

from wheelfactory.engines.docker_run import DockerRun
from wheelfactory.engines.docker_steps import tests_set, torch_set
from wheelfactory.engines.docker_verify import Checked, verify_in_image
from wheelfactory.errors import DockerBuildError, Findings
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import Timeline, note


def _verdict(found: Findings) -> dict[str, object]:
    return {"passed": True, **({"tests": found.tests} if found.tests is not None else {})}


def stable_abi_gate(
    docker: DockerRun,
    stage: Stage,
    built: Checked,
    wheel: Path,
    log: Path,
    timeline: Timeline,
    workdir: Path,
    found: Findings,
) -> Findings:
    """``found`` (what the build's own checks found) with the gate's verdict per torch version,
    the build's first; raises DockerBuildError at the first torch whose checks fail, carrying the
    verdicts so far (and that torch's tests, where they ran)."""
    variant = stage.variant
    results: dict[str, object] = {variant.torch_version: _verdict(found)}
    tests = stage.checks.tests_for(variant.id)
    made, at = docker.environments, built.at
    for other in variant.gate:
        note(log, f"stable-ABI gate: {variant.id} on torch {other.torch_version}")
        with timeline.phase("wheelhouse"):
            torch_wheels = torch_set(docker, other, at.target, log)
            test_wheels = tests_set(docker, tests, other, at.target, log)
        with timeline.phase("environment"):
            torch_request, _ = made.requests(other, at.image.id, at.python, torch_wheels.wheels)
            torch_env = made.ensure(torch_request, at, torch_wheels, log)
            test_env = (
                None
                if test_wheels is None
                else made.beside_torch("test", at, test_wheels, torch_env, log)
            )
            deps_env = made.for_dependencies(variant, at, wheel, torch_env, log)
            checked = Checked(at, torch_env, deps_env, test_env)
        try:
            verified = verify_in_image(docker, stage, checked, wheel, log, timeline, workdir)
        except DockerBuildError as exc:
            results[other.torch_version] = {"passed": False, "error": str(exc)}
            gate = Findings(tests=exc.found.tests, gate=results)
            raise DockerBuildError(
                f"{variant.id}: the stable-ABI gate failed on torch {other.torch_version}: {exc}",
                explained=exc.explained,
                found=Findings(warnings=found.warnings + exc.found.warnings).then(gate),
            ) from exc
        results[other.torch_version] = _verdict(verified)
        found = Findings(found.tests, None, found.warnings + verified.warnings)
    return Findings(found.tests, results, found.warnings)
