"""The Docker engine: cibuildwheel builds each variant in its image, with --network none; torch
and the build tools come from prepared environments (engines/prepared_env.py: installed once
per image, interpreter and wheelhouse content, mounted read-only); auditwheel repairs inside the
container; then the wheel is audited (abi3audit, on the host) while it is smoke-tested in a fresh
container from the same image that mounts the same prepared torch.

The engine is the run (engines/docker_run.py: options, caches) and the order of the steps; the
steps are functions of the run: engines/docker_steps.py (wheel sets, environments, cibuildwheel),
engines/docker_verify.py (the checks' containers), engines/stable_abi_gate.py (other torches).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from wheelfactory.engines import BuildInputs, BuildResult, EngineIdentity
from wheelfactory.engines.docker_envs import Interpreter
from wheelfactory.engines.docker_run import OWNER_LABEL, DockerRun, image_facts, image_for
from wheelfactory.engines.docker_steps import (
    BuildPlace,
    environments,
    run_cibuildwheel,
    wheel_sets,
)
from wheelfactory.engines.docker_verify import Checked, verify_in_image
from wheelfactory.engines.image_facts import ImageFacts
from wheelfactory.engines.stable_abi_gate import stable_abi_gate
from wheelfactory.errors import DockerBuildError, VariantBuildError
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify.checks import Said
from wheelfactory.verify.fatbin import ship_gpu_part
from wheelfactory.verify.strip import ship_stripped


def _driver_versions() -> tuple[tuple[str, str], ...]:
    """The host-side tools that drive a build (what runs inside is in the wheel set)."""
    found = []
    for name in ("cibuildwheel", "docker"):
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(found)


def container_name(listed: dict[str, object]) -> str:
    """The name of a container as the engine's listing gives it ("/name" in a list of names)."""
    names = listed.get("Names")
    first = names[0] if isinstance(names, list) and names else listed.get("Id", "")
    return str(first).lstrip("/")


@dataclass(frozen=True)
class DockerEngine:
    run: DockerRun
    name: str = "docker"

    def identity(self, stage: Stage) -> EngineIdentity:
        """Part of the cache key: the image id pins the toolchain exactly."""
        variant = stage.variant
        image = image_for(self.run, variant)
        index = self.run.options.torch_indexes.get(variant.id) or "pip-config"
        return EngineIdentity(f"docker:{image.id}:index={index}", image.id)

    def reclaim(self) -> list[str]:
        """Remove the containers a killed run on the same output directory left behind (its
        cibuildwheel container may still be compiling). Called with the output lock held, so no
        live run owns them."""
        owner = self.run.options.owner
        if not owner:
            return []
        import docker.errors

        # The low-level listing: the high-level one inspects each container it lists, and a
        # container that goes away in between (one run with --rm ending) fails the whole listing.
        api = self.run.client.api
        stale = api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
        removed = []
        for container in stale:
            try:
                api.remove_container(container["Id"], force=True)
            except docker.errors.NotFound:
                continue  # it went on its own
            except docker.errors.APIError as exc:
                # "removal ... is already in progress": its --rm, or our other sweep
                if exc.status_code == 409:
                    continue
                raise
            removed.append(container_name(container))
        return sorted(removed)

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> BuildResult:
        """One variant, phase by phase: its image, its wheel sets, its prepared environments, the
        staged source, cibuildwheel's build and repair, then the checks."""
        docker, variant = self.run, stage.variant
        if variant.id in docker.options.refusals:
            raise DockerBuildError(docker.options.refusals[variant.id])
        with timeline.phase("image"):
            image = image_for(docker, variant)
            facts = image_facts(docker, image)
        version, python = _interpreter(stage, image, facts, docker)
        at = Interpreter(image, python, facts.container_python(version, variant.key.arch))
        with timeline.phase("wheelhouse"):
            sets = wheel_sets(docker, stage, at.target, log)
        inputs = BuildInputs(
            "docker",
            python,
            image.id,
            image.tag,
            (*sets.torch.wheels, *sets.build_system.wheels),
            _driver_versions(),
        )
        with timeline.phase("environment"):
            envs = environments(docker, stage, at, sets, log)
        place = BuildPlace(image, facts, python, workdir / "src", workdir / "out", workdir)
        with timeline.phase("stage"):
            shutil.rmtree(place.output, ignore_errors=True)
            stage.write(place.source)
        with timeline.span("cibuildwheel"):  # its compile and repair: timed from its markers
            repaired = run_cibuildwheel(docker, stage, place, sets, envs, log, timeline)
        said = Said(log)
        try:
            if repaired.rewritten is not None:
                said(repaired.rewritten)
            wheel = stage.finish(repaired.wheel, workdir / "final")
            with timeline.phase("split"):
                wheel = ship_gpu_part(variant, wheel, workdir / "part", log)
            with timeline.phase("strip"):
                wheel = ship_stripped(
                    variant.settings.strip, variant.key.arch, wheel, workdir, log, said
                )
            with timeline.phase("environment"):
                deps = docker.environments.for_dependencies(variant, at, wheel, envs.torch, log)
            checked = Checked(at, envs.torch, deps, envs.tests)
            found = verify_in_image(docker, stage, checked, wheel, log, timeline, workdir)
            if variant.gate:
                found = stable_abi_gate(
                    docker, stage, checked, wheel, log, timeline, workdir, found
                )
        except VariantBuildError as exc:
            exc.add_earlier(said.found)
            raise
        return BuildResult(wheel, inputs, said.found.then(found))


def _interpreter(
    stage: Stage, image: ImageRef, facts: ImageFacts, docker: DockerRun
) -> tuple[str, str]:
    """(version, /opt/python entry) the variant builds with in ``image``; DockerBuildError where
    the image cannot build it (another arch's code, no nvcc for a CUDA toolkit without wheels)."""
    variant = stage.variant
    if facts.machine != variant.key.arch:  # a wheel named for one arch holding another's code
        raise DockerBuildError(
            f"{variant.id}: the build image {image.tag} runs as {facts.machine or 'an unknown arch'}, "
            f"not {variant.key.arch}: name an {variant.key.arch} image for it in [build] base_image"
        )
    chosen = facts.python_for(variant, docker.options.python_support.get(variant.key.torch, ()))
    if variant.key.backend.kind == "cuda" and not variant.toolkit_wheels and not facts.nvcc:
        raise DockerBuildError(
            f"{variant.id}: CUDA {variant.toolkit} is not published as complete wheels (only CUDA 13 is) and "
            f"the build image {image.tag} has no nvcc: use a base image that carries the toolkit "
            f"(e.g. pytorch/manylinux2_28-builder:cuda{variant.toolkit}) in [build] base_image"
        )
    return chosen
