"""The steps of one Docker build up to its repaired wheel, each a function of the run
(engines/docker_run.py) that returns what it made: the wheel sets a variant takes from the
wheelhouse, the prepared environments it mounts, and cibuildwheel's build and repair of the
staged source in the image, with --network none.

cibuildwheel drives the container build (its manylinux layout, before-build, frontend and repair
steps). Two parts it cannot serve here are done by us: its abi3 audit step installs abi3audit in
a virtualenv it downloads (no network in our containers), so abi3audit runs on the host; and its
test step would run inside the build container, where the build's own files are present, so the
smoke test runs in a fresh container that only has torch and the wheel (engines/docker_verify.py).
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.engines import cpu_baseline
from wheelfactory.engines.cibuildwheel_settings import decide_project_table
from wheelfactory.engines.compile_cache import SETUP_SCRIPT, read_stats, stats_name, wiring
from wheelfactory.engines.docker_envs import Interpreter
from wheelfactory.engines.docker_run import DockerRun, compile_cache_for
from wheelfactory.engines.image_facts import ImageFacts, compile_note, cross_compilers, cuda_home
from wheelfactory.engines.prepared_env import EnvRequest, PreparedEnv
from wheelfactory.engines.torch_builds import torch_build_mismatch
from wheelfactory.engines.wheelhouse import (
    ContainerPython,
    WheelSet,
    beside_torch,
    request_for,
)
from wheelfactory.errors import DockerBuildError, WheelhouseError
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.images.emulation import host_arch
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.timeline import Timeline, note, split_by_markers
from wheelfactory.verify.diagnose import diagnosed


@dataclass(frozen=True)
class VariantSets:
    """The wheel sets one variant's build takes from the wheelhouse."""

    torch: WheelSet  # torch, the build tools (and CUDA 13's toolkit wheels)
    build_system: WheelSet  # the project's [build-system] requires
    tests: WheelSet | None  # the project tests' requirements; None: no tests or none needed


@dataclass(frozen=True)
class VariantEnvs:
    """The prepared environments one variant's build mounts."""

    torch: PreparedEnv
    tools: PreparedEnv
    build_system: PreparedEnv
    tests: PreparedEnv | None


@dataclass(frozen=True)
class Repaired:
    """cibuildwheel's repaired wheel, and what the -march=native shims rewrote (a warning)."""

    wheel: Path
    rewritten: str | None


def wheel_sets(docker: DockerRun, stage: Stage, python: ContainerPython, log: Path) -> VariantSets:
    """torch's set (shared by every project), the project's build system's, and the tests'."""
    variant = stage.variant
    torch = torch_set(docker, variant, python, log)
    # The project's build system is a set of its own too: one torch set serves every project.
    build_system = build_system_set(docker, stage, python, log)
    tests = stage.checks.tests_for(variant.id)
    return VariantSets(torch, build_system, tests_set(docker, tests, variant, python, log))


def torch_set(docker: DockerRun, variant: Variant, python: ContainerPython, log: Path) -> WheelSet:
    """The set of ``variant``'s torch and the build tools: one per torch build, whichever
    project or variant asks (the stable-ABI gate's other torches share them too)."""
    options = docker.options
    torch_index = options.torch_indexes.get(variant.id)
    torch = docker.wheelhouse.ensure(
        request_for(
            variant,
            python,
            torch_index=torch_index,
            extra=(*variant.toolkit_wheels, *options.cache_requirements),
            find_links=options.find_links,
        ),
        log=log,
    )
    mismatch = torch_build_mismatch(variant, torch.wheels, torch_index or "the host's pip index")
    if mismatch is not None:
        raise DockerBuildError(mismatch)
    return torch


def tests_set(
    docker: DockerRun,
    tests: ProjectTests | None,
    variant: Variant,
    python: ContainerPython,
    log: Path,
) -> WheelSet | None:
    """The tests' requirements, a set of their own: adding pytest to torch's set would make a
    new torch set, and download GBs of torch again. A requirement of the tests that depends on
    torch (a project's own helper wheel) takes ``variant``'s, never the newest."""
    if tests is None or not tests.requires:
        return None
    links = (*docker.options.find_links, *tests.find_links)
    return docker.wheelhouse.ensure(beside_torch(tests.requires, variant, python, links), log=log)


def build_system_set(
    docker: DockerRun, stage: Stage, python: ContainerPython, log: Path
) -> WheelSet:
    """The project's build system (its [build-system] requires, less torch, plus what its backend
    asks for at build time), downloaded with the variant's torch as a constraint."""
    system = stage.build_system
    try:
        requires = system.environment_requirements()
        request = beside_torch(requires, stage.variant, python, docker.options.find_links)
        return docker.wheelhouse.ensure(request, log=log)
    except WheelhouseError as exc:
        raise DockerBuildError(
            f"{stage.variant.id}: the project's build requirements ({system.declared_in}) "
            f"cannot be had as wheels for Python {python.version}: {exc}"
        ) from None


def environments(
    docker: DockerRun, stage: Stage, at: Interpreter, sets: VariantSets, log: Path
) -> VariantEnvs:
    """The prepared environments of the variant's sets, made once per content, then reused."""
    made = docker.environments
    torch_env, tools_env = made.torch_and_tools(stage.variant, at, sets.torch, log)
    system = stage.build_system.environment_requirements()
    build = EnvRequest("build", at.image.id, at.python, system, sets.build_system.wheels)
    build_env = made.ensure(build, at, sets.build_system, log)
    test_env = (
        None if sets.tests is None else made.beside_torch("test", at, sets.tests, torch_env, log)
    )
    return VariantEnvs(torch_env, tools_env, build_env, test_env)


@dataclass(frozen=True)
class BuildPlace:
    """Where one build happens: the image (and what it offers), its interpreter entry, the
    staged source, cibuildwheel's output and the build's scratch directory."""

    image: ImageRef
    facts: ImageFacts
    python: str  # the /opt/python entry: cp311-cp311
    source: Path
    output: Path
    workdir: Path


def run_cibuildwheel(
    docker: DockerRun,
    stage: Stage,
    place: BuildPlace,
    sets: VariantSets,
    envs: VariantEnvs,
    log: Path,
    timeline: Timeline,
) -> Repaired:
    """cibuildwheel's build and repair of the staged source, with the compile cache wired in."""
    variant, workdir = stage.variant, place.workdir
    cache, relay_dir, cache_note = compile_cache_for(docker, place.facts)
    stats_dir = _fresh(workdir / "cache-stats")
    wired = None
    if cache is not None:
        wired = wiring(
            cache,
            variant.id,
            stats_dir=stats_dir,
            relay_dir=relay_dir,
            nvcc=variant.key.backend.kind == "cuda",
        )
        (stats_dir / SETUP_SCRIPT).write_text(wired.setup)
    baseline = cpu_baseline.baseline_for(variant.key.arch, docker.options.cpu_baselines)
    flags_dir = _fresh(workdir / "cpu-flags")  # the flag shims' setup, and what they rewrote
    (flags_dir / cpu_baseline.SETUP).write_text(cpu_baseline.shims_script(baseline))
    mounted = (envs.build_system, envs.tools, envs.torch)
    home = cuda_home(variant, place.facts, envs.torch)
    settings = docker.cibuildwheel
    environment = settings.environment(
        variant, stage.build_env(), wired, mounted, stage.source_date_epoch, home
    )
    table = decide_project_table(stage, place.source, place.python, mounted, set(environment), log)
    env = settings.settings(
        variant,
        place.image,
        place.python,
        sets.torch.path,
        stage.build_env(),
        wired,
        envs=mounted,
        epoch=stage.source_date_epoch,
        cuda_home=home,
        cross_bin=cross_compilers(variant, place.facts, host_arch()),
        table=table,
        flags_dir=flags_dir,
    )
    with log.open("a", encoding="utf-8") as sink:  # the settings a person needs to rerun it
        for said in (cache_note, compile_note(variant, place.facts, host_arch())):
            if said:
                sink.write(f"# {said}\n")
        sink.writelines(f"{name}={value}\n" for name, value in sorted(env.items()))
    # The project's own table was decided above, option by option: cibuildwheel reads none of it.
    no_table = workdir / "cibuildwheel-options.toml"
    no_table.write_text("# the factory passes every option as CIBW_* (see build.log)\n")
    # cibuildwheel copies its working directory into the container: run it in the staged
    # source so that only the package travels, not the output directory around it. Its
    # container's steps print phase markers (container start and copy, compile, repair).
    timeline.observe("compile")  # the live view: cibuildwheel's steps are timed from its markers
    started = time.time()
    try:
        with diagnosed(stage, log, DockerBuildError):
            printed = run(
                [sys.executable, "-m", "cibuildwheel", "--platform", "linux"]
                + ["--output-dir", str(place.output), "--config-file", str(no_table), "."],
                cwd=place.source,
                env={**env, "PYTHONUNBUFFERED": "1"},
                log=log,
            )
    except (DockerBuildError, CommandFailed) as exc:
        native = cpu_baseline.rewrite_note(_read(flags_dir / cpu_baseline.NOTES), baseline)
        if native is None:
            raise
        raise DockerBuildError(
            f"{variant.id}: {cpu_baseline.refusal(native, baseline, exc)}"
        ) from None
    for name, seconds in split_by_markers(started, time.time(), "container", printed):
        timeline.add(name, seconds)
    if cache is not None:
        found = read_stats(cache.tool, stats_dir / stats_name(cache, variant.id))
        stats = found.describe() if found else "no statistics (nothing was compiled)"
        note(log, f"compile cache ({cache.describe()}): {stats}")
    (repaired,) = place.output.glob("*.whl")  # cibuildwheel ran auditwheel (its repair) already
    rewritten = cpu_baseline.rewrite_note(_read(flags_dir / cpu_baseline.NOTES), baseline)
    return Repaired(repaired, rewritten)


def _fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
