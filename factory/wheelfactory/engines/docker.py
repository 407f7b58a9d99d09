"""The Docker engine: cibuildwheel builds each variant in its image, with --network none; torch
and the build tools come from prepared environments (engines/prepared_env.py: installed once
per image, interpreter and wheelhouse content, mounted read-only); auditwheel repairs inside the
container; then the wheel is audited (abi3audit, on the host) while it is smoke-tested in a fresh
container from the same image that mounts the same prepared torch.

cibuildwheel drives the container build (its manylinux layout, before-build, frontend and repair
steps). Two parts it cannot serve here are done by us: its abi3 audit step installs abi3audit in
a virtualenv it downloads (no network in our containers), so we run abi3audit on the host; and
its test step would run inside the build container, where the build's own files are present, so
the smoke test runs in a fresh container that only has torch and the wheel.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from wheelfactory.engines import BuildInputs, cpu_baseline
from wheelfactory.engines.cache_relay import RedisRelay, RedisUnreachable, ping
from wheelfactory.engines.cibuildwheel_settings import CibuildwheelSettings, decide_project_table
from wheelfactory.engines.compile_cache import SETUP_SCRIPT, read_stats, stats_name, wiring
from wheelfactory.engines.docker_envs import ContainerEnvironments
from wheelfactory.engines.image_facts import (
    PROBE,
    ImageFacts,
    compile_note,
    cross_compilers,
    cuda_home,
)
from wheelfactory.engines.prepared_env import EnvRequest, PreparedEnv
from wheelfactory.engines.wheelhouse import (
    ContainerPython,
    Wheelhouse,
    WheelhouseRequest,
    WheelSet,
    local_wheels,
    request_for,
    torch_build_mismatch,
)
from wheelfactory.errors import DockerBuildError, WheelhouseError
from wheelfactory.images.containers import Container, DockerClient
from wheelfactory.images.dockerfiles import BASE_ID_LABEL, ImageRef, ensure_image, resolve_base
from wheelfactory.images.emulation import host_arch
from wheelfactory.images.spec import image_spec
from wheelfactory.plan.compile_cache_settings import SCCACHE_REQUIREMENT, CompileCache
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.timeline import Timeline, split_by_markers
from wheelfactory.verify.checks import (
    TEST_TERMINAL,
    project_test_shell,
    project_test_verdict,
    stage_test_sources,
    verify_wheel,
)
from wheelfactory.verify.diagnose import diagnosed
from wheelfactory.verify.fatbin import ship_gpu_part
from wheelfactory.verify.strip import ship_stripped

# Every container a run starts carries this label with the run's owner (its output directory):
# containers left by a killed run are found and removed by the next run on that directory.
OWNER_LABEL = "wheelfactory.owner"


def _driver_versions() -> tuple[tuple[str, str], ...]:
    """The host-side tools that drive a build (what runs inside is in the wheel set)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("cibuildwheel", "docker"):
        try:
            found.append((name, version(name)))
        except PackageNotFoundError:
            continue
    return tuple(found)


def container_name(listed: dict[str, object]) -> str:
    """The name of a container as the engine's listing gives it ("/name" in a list of names)."""
    names = listed.get("Names")
    first = names[0] if isinstance(names, list) and names else listed.get("Id", "")
    return str(first).lstrip("/")


@dataclass(frozen=True, kw_only=True)
class DockerOptions:
    """Everything a Docker run is configured with, resolved once before its first variant (as
    cibuildwheel's BuildOptions): the engine only reads it."""

    base_images: Mapping[str, str]  # arch -> base image
    image_log: Path  # image builds are shared by variants: their log is the run's, not a variant's
    # variant id -> the URL of the index that serves its torch (plan/indexes.py Indexes.torch_url);
    # None or missing: the index pip is configured with on the host
    torch_indexes: Mapping[str, str | None] = field(default_factory=dict)
    # torch minor -> Pythons
    python_support: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    owner: str = ""  # OWNER_LABEL value: the output directory's digest (see reclaim)
    compile_cache: CompileCache | None = None  # shared by all variants (engines/compile_cache.py)
    glibc_floor: str | None = None  # [build] glibc_floor: verification fails newer requirements
    # [build] debian_base: makes (or reuses) the Debian base of a suite and arch, for toolkit layers from Debian
    debian_base: Callable[[str, str], str] | None = None
    # Debian toolkit layers: [build] debian_mirror, else the host's apt mirror
    debian_mirror: str | None = None
    # variant id -> why the torch index cannot serve it (wheelhouse.pypi_refusal): fails at once
    refusals: Mapping[str, str] = field(default_factory=dict)
    compile_jobs: int = field(default_factory=lambda: os.cpu_count() or 2)  # MAX_JOBS in each build
    container_memory: int | None = None  # docker --memory of each build container (--max-memory)
    # [build] find_links: directories of wheels every wheel set may take from
    find_links: tuple[str, ...] = ()
    cpu_baselines: Mapping[str, str] = field(default_factory=dict)  # arch -> [build] cpu_baseline

    @property
    def labels(self) -> dict[str, str]:
        return {OWNER_LABEL: self.owner} if self.owner else {}


@dataclass
class _RunCaches:
    """What a run learns once and every variant reuses: images, their facts, the compile cache's
    relay, each variant's build inputs. The one mutable part of the engine, behind its lock."""

    images: dict[str, ImageRef] = field(default_factory=dict)
    facts: dict[str, ImageFacts] = field(default_factory=dict)
    # base name -> image id, resolved once a run
    base_ids: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    relay: RedisRelay | None = None  # started on the first build that needs it
    relay_problem: str | None = None
    inputs: dict[str, BuildInputs] = field(default_factory=dict)  # variant id -> its build's inputs


@dataclass(frozen=True)
class _VariantSets:
    """The wheel sets one variant's build takes from the wheelhouse."""

    torch: WheelSet  # torch, the build tools (and CUDA 13's toolkit wheels)
    build_system: WheelSet  # the project's [build-system] requires
    tests: WheelSet | None  # the project tests' requirements; None: no tests or none needed
    test_requires: tuple[str, ...] = ()  # [test] requires


@dataclass(frozen=True)
class _VariantEnvs:
    """The prepared environments one variant's build mounts."""

    torch: PreparedEnv
    tools: PreparedEnv
    build_system: PreparedEnv
    tests: PreparedEnv | None


@dataclass(frozen=True)
class DockerEngine:
    client: DockerClient
    wheelhouse: Wheelhouse
    options: DockerOptions
    name: str = "docker"
    _caches: _RunCaches = field(default_factory=_RunCaches, compare=False, repr=False)

    def with_capacity(self, compile_jobs: int, container_memory: int | None) -> DockerEngine:
        return replace(
            self,
            options=replace(
                self.options, compile_jobs=compile_jobs, container_memory=container_memory
            ),
        )

    def identity(self, variant: Variant) -> str:
        """Part of the cache key: the image id pins the toolchain exactly."""
        image = self.image_for(variant)
        return (
            f"docker:{image.id}:index={self.options.torch_indexes.get(variant.id) or 'pip-config'}"
        )

    def image_id(self, variant: Variant) -> str | None:
        return self.image_for(variant).id

    def build_inputs(self, variant: Variant) -> BuildInputs | None:
        return self._caches.inputs.get(variant.id)

    def image_for(self, variant: Variant) -> ImageRef:
        """The variant's build image, built once per content tag: the base as it is, or for a
        CUDA variant whose toolkit has no wheels, on a Debian base, the suite that packages it
        plus Debian's toolkit (docker/build-cuda.Dockerfile). One at a time: parallel variants
        wait for an image another one is making instead of making it twice."""
        with self._caches.lock:
            spec = image_spec(
                variant,
                self.options.base_images,
                debian_base=self.options.debian_base,
                debian_mirror=self.options.debian_mirror,
            )
            if spec.base not in self._caches.base_ids:
                self._caches.base_ids[spec.base] = resolve_base(
                    self.client, spec.base, log=self.options.image_log
                )
            # The base's image id is a label, so a re-pulled base gives a new tag. `wheelfactory
            # bake` renders the same spec without it (it knows no engine): its tags differ.
            rendered = spec.render(labels={BASE_ID_LABEL: self._caches.base_ids[spec.base]})
            if rendered.tag not in self._caches.images:
                self._caches.images[rendered.tag] = ensure_image(
                    self.client, rendered, log=self.options.image_log, arch=variant.key.arch
                )
            return self._caches.images[rendered.tag]

    def facts(self, image: ImageRef) -> ImageFacts:
        if image.id not in self._caches.facts:
            with Container(self.client, image.id, labels=self.options.labels) as box:
                data = json.loads(
                    box.run(["/opt/python/cp39-cp39/bin/python", "-c", PROBE]).strip()
                )
            self._caches.facts[image.id] = ImageFacts(
                data["glibc"],
                tuple(data["pythons"]),
                data.get("ccache"),
                data.get("nvcc"),
                host_arch(data.get("machine", "")),
                data.get("cross", ""),
            )
        return self._caches.facts[image.id]

    def reclaim(self) -> list[str]:
        """Remove the containers a killed run on the same output directory left behind (its
        cibuildwheel container may still be compiling). Called with the output lock held, so no
        live run owns them."""
        if not self.options.owner:
            return []
        import docker.errors

        # The low-level listing: the high-level one inspects each container it lists, and a
        # container that goes away in between (one run with --rm ending) fails the whole listing.
        api = self.client.api
        stale = api.containers(all=True, filters={"label": f"{OWNER_LABEL}={self.options.owner}"})
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

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> Path:
        """One variant, phase by phase: its image, its wheel sets, its prepared environments, the
        staged source, cibuildwheel's build and repair, then the checks."""
        variant = stage.variant
        if variant.id in self.options.refusals:
            raise DockerBuildError(self.options.refusals[variant.id])
        with timeline.phase("image"):
            image = self.image_for(variant)
            facts = self.facts(image)
        if facts.machine != variant.key.arch:  # a wheel named for one arch holding another's code
            raise DockerBuildError(
                f"{variant.id}: the build image {image.tag} runs as {facts.machine or 'an unknown arch'}, "
                f"not {variant.key.arch}: name an {variant.key.arch} image for it in [build] base_image"
            )
        version, python = facts.python_for(
            variant, self.options.python_support.get(variant.key.torch, ())
        )
        if variant.key.backend.kind == "cuda" and not variant.toolkit_wheels and not facts.nvcc:
            raise DockerBuildError(
                f"{variant.id}: CUDA {variant.toolkit} is not published as complete wheels (only CUDA 13 is) and "
                f"the build image {image.tag} has no nvcc: use a base image that carries the toolkit "
                f"(e.g. pytorch/manylinux2_28-builder:cuda{variant.toolkit}) in [build] base_image"
            )
        container_python = facts.container_python(version, variant.key.arch)
        with timeline.phase("wheelhouse"):
            sets = self._wheel_sets(stage, container_python, log)
        self._caches.inputs[variant.id] = BuildInputs(
            "docker",
            python,
            image.id,
            image.tag,
            (*sets.torch.wheels, *sets.build_system.wheels),
            _driver_versions(),
        )
        with timeline.phase("environment"):
            envs = self._environments(stage, image, python, container_python, sets, log)
        source, output = workdir / "src", workdir / "out"
        with timeline.phase("stage"):
            shutil.rmtree(output, ignore_errors=True)
            stage.write(source)
        # its compile and repair are timed from its container's markers
        with timeline.span("cibuildwheel"):
            repaired = self._cibuildwheel(
                stage, image, facts, python, sets, envs, source, output, workdir, log, timeline
            )
        wheel = stage.finish(repaired, workdir / "final")
        with timeline.phase("split"):
            wheel = ship_gpu_part(variant, wheel, workdir / "part", log)
        with timeline.phase("strip"):
            wheel = ship_stripped(
                variant.settings.strip, variant.key.arch, wheel, workdir, log, timeline.warn
            )
        with timeline.phase("environment"):
            deps_env = self.environments.for_dependencies(
                variant, image, python, container_python, wheel, envs.torch, log
            )
        self.verify(
            stage,
            image,
            envs.torch,
            wheel,
            log,
            timeline,
            test_env=envs.tests,
            workdir=workdir,
            deps_env=deps_env,
        )
        if variant.gate:
            self._gate(stage, image, python, container_python, wheel, log, timeline, workdir)
        return wheel

    def _gate(
        self,
        stage: Stage,
        image: ImageRef,
        python: str,
        target: ContainerPython,
        wheel: Path,
        log: Path,
        timeline: Timeline,
        workdir: Path,
    ) -> None:
        """The stable-ABI gate: the wheel, verified with the build's torch, verified again (the
        smoke test, the project's tests) with each other torch release of ``variant.gate``, each
        in a fresh container; its wheel set and environments are the ones a build of that torch
        makes, so a torch another variant uses is downloaded once. Fails naming the torch."""
        variant = stage.variant
        built_with = {
            "passed": True,
            **({"tests": timeline.results["tests"]} if "tests" in timeline.results else {}),
        }
        results: dict[str, object] = {variant.torch_version: built_with}
        tests = stage.checks.tests_for(variant.id)
        for other in variant.gate:
            with log.open("a", encoding="utf-8") as sink:
                sink.write(f"# stable-ABI gate: {variant.id} on torch {other.torch_version}\n")
            with timeline.phase("wheelhouse"):
                torch_set = self._torch_set(other, target, log)
                test_set = self._test_set(tests, other, target, log)
            with timeline.phase("environment"):
                torch_request, _ = self.environments.requests(
                    other, image.id, python, torch_set.wheels
                )
                torch_env = self.environments.ensure(
                    torch_request, image, python, target, torch_set, log
                )
                test_env = (
                    None
                    if test_set is None
                    else self.environments.for_tests(
                        image, python, target, test_set, torch_env, log
                    )
                )
                deps_env = self.environments.for_dependencies(
                    variant, image, python, target, wheel, torch_env, log
                )
            timeline.results.pop("tests", None)
            try:
                self.verify(
                    stage,
                    image,
                    torch_env,
                    wheel,
                    log,
                    timeline,
                    test_env=test_env,
                    workdir=workdir,
                    deps_env=deps_env,
                )
            except DockerBuildError as exc:
                results[other.torch_version] = {"passed": False, "error": str(exc)}
                timeline.results["gate"] = results
                raise DockerBuildError(
                    f"{variant.id}: the stable-ABI gate failed on torch {other.torch_version}: "
                    f"{exc}",
                    explained=exc.explained,
                ) from exc
            results[other.torch_version] = {
                "passed": True,
                **({"tests": timeline.results["tests"]} if "tests" in timeline.results else {}),
            }
        built_tests = built_with.get("tests")
        if isinstance(built_tests, dict):
            # the manifest's tests: those with the build's torch
            timeline.results["tests"] = built_tests
        timeline.results["gate"] = results

    def _wheel_sets(self, stage: Stage, python: ContainerPython, log: Path) -> _VariantSets:
        """torch's set (shared by every project), the project's build system's, and the tests'."""
        variant = stage.variant
        torch = self._torch_set(variant, python, log)
        # The project's build system is a set of its own too: one torch set serves every project.
        build_system = self._build_system_set(stage, python, log)
        tests = stage.checks.tests_for(variant.id)
        return _VariantSets(
            torch,
            build_system,
            self._test_set(tests, variant, python, log),
            tests.requires if tests is not None else (),
        )

    def _torch_set(self, variant: Variant, python: ContainerPython, log: Path) -> WheelSet:
        """The set of ``variant``'s torch and the build tools: one per torch build, whichever
        project or variant asks (the stable-ABI gate's other torches share them too)."""
        torch_index = self.options.torch_indexes.get(variant.id)
        torch = self.wheelhouse.ensure(
            request_for(
                variant,
                python,
                torch_index=torch_index,
                extra=(*variant.toolkit_wheels, *self._cache_requirements()),
                find_links=self.options.find_links,
            ),
            log=log,
        )
        mismatch = torch_build_mismatch(
            variant, torch.wheels, torch_index or "the host's pip index"
        )
        if mismatch is not None:
            raise DockerBuildError(mismatch)
        return torch

    def _test_set(
        self, tests: ProjectTests | None, variant: Variant, python: ContainerPython, log: Path
    ) -> WheelSet | None:
        """The tests' requirements, a set of their own: adding pytest to torch's set would make a
        new torch set, and download GBs of torch again. A requirement of the tests that depends on
        torch (a project's own helper wheel) takes ``variant``'s, never the newest."""
        if tests is None or not tests.requires:
            return None
        local = local_wheels((*self.options.find_links, *tests.find_links))
        return self.wheelhouse.ensure(
            WheelhouseRequest(
                tests.requires,
                (),
                python,
                find_links=local,
                constraints=(variant.torch_requirement,),
            ),
            log=log,
        )

    def _environments(
        self,
        stage: Stage,
        image: ImageRef,
        python: str,
        target: ContainerPython,
        sets: _VariantSets,
        log: Path,
    ) -> _VariantEnvs:
        environments = self.environments
        torch_env, tools_env = environments.torch_and_tools(
            stage.variant, image, python, target, sets.torch, log
        )
        build_env = environments.ensure(
            EnvRequest(
                "build",
                image.id,
                python,
                stage.build_system.environment_requirements(),
                sets.build_system.wheels,
            ),
            image,
            python,
            target,
            sets.build_system,
            log,
        )
        test_env = (
            None
            if sets.tests is None
            else environments.for_tests(image, python, target, sets.tests, torch_env, log)
        )
        return _VariantEnvs(torch_env, tools_env, build_env, test_env)

    def _cibuildwheel(
        self,
        stage: Stage,
        image: ImageRef,
        facts: ImageFacts,
        python: str,
        sets: _VariantSets,
        envs: _VariantEnvs,
        source: Path,
        output: Path,
        workdir: Path,
        log: Path,
        timeline: Timeline,
    ) -> Path:
        """cibuildwheel's build and repair of the staged source, with the compile cache wired in;
        the repaired wheel."""
        variant = stage.variant
        cache, cache_note = self._cache_for(facts)
        stats_dir = workdir / "cache-stats"
        shutil.rmtree(stats_dir, ignore_errors=True)
        stats_dir.mkdir(parents=True)
        wired = None
        if cache is not None:
            wired = wiring(
                cache,
                variant.id,
                stats_dir=stats_dir,
                relay_dir=self._caches.relay.directory if self._caches.relay else None,
                nvcc=variant.key.backend.kind == "cuda",
            )
            (stats_dir / SETUP_SCRIPT).write_text(wired.setup)
        baseline = cpu_baseline.baseline_for(variant.key.arch, self.options.cpu_baselines)
        flags_dir = workdir / "cpu-flags"  # the flag shims' setup, and what they rewrote
        shutil.rmtree(flags_dir, ignore_errors=True)
        flags_dir.mkdir(parents=True)
        (flags_dir / cpu_baseline.SETUP).write_text(cpu_baseline.shims_script(baseline))
        mounted = (envs.build_system, envs.tools, envs.torch)
        home = cuda_home(variant, facts, envs.torch)
        settings = self.cibuildwheel
        table = decide_project_table(
            stage,
            source,
            python,
            mounted,
            set(
                settings.environment(
                    variant, stage.build_env(), wired, mounted, stage.source_date_epoch, home
                )
            ),
            log,
        )
        env = settings.settings(
            variant,
            image,
            python,
            sets.torch.path,
            stage.build_env(),
            wired,
            envs=mounted,
            epoch=stage.source_date_epoch,
            cuda_home=home,
            cross_bin=cross_compilers(variant, facts, host_arch()),
            table=table,
            flags_dir=flags_dir,
        )
        with log.open("a", encoding="utf-8") as sink:  # the settings a person needs to rerun it
            for note in (cache_note, compile_note(variant, facts, host_arch())):
                if note:
                    sink.write(f"# {note}\n")
            sink.writelines(f"{name}={value}\n" for name, value in sorted(env.items()))
        # The project's own table was decided above, option by option: cibuildwheel reads none of it.
        no_table = workdir / "cibuildwheel-options.toml"
        no_table.write_text("# the factory passes every option as CIBW_* (see build.log)\n")
        # cibuildwheel copies its working directory into the container: run it in the staged
        # source so that only the package travels, not the output directory around it. Its
        # container's steps print phase markers (container start and copy, compile, repair).
        # the live view: cibuildwheel's steps are timed from its markers
        timeline.observe("compile")
        started = time.time()
        try:
            with diagnosed(stage, log, DockerBuildError):
                printed = run(
                    [
                        sys.executable,
                        "-m",
                        "cibuildwheel",
                        "--platform",
                        "linux",
                        "--output-dir",
                        str(output),
                        "--config-file",
                        str(no_table),
                        ".",
                    ],
                    cwd=source,
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
        native = cpu_baseline.rewrite_note(_read(flags_dir / cpu_baseline.NOTES), baseline)
        if native is not None:
            timeline.warn(native)
        for name, seconds in split_by_markers(started, time.time(), "container", printed):
            timeline.add(name, seconds)
        if cache is not None:
            found = read_stats(cache.tool, stats_dir / stats_name(cache, variant.id))
            with log.open("a", encoding="utf-8") as sink:
                sink.write(
                    f"# compile cache ({cache.describe()}): "
                    f"{found.describe() if found else 'no statistics (nothing was compiled)'}\n"
                )
        (repaired,) = output.glob("*.whl")  # cibuildwheel ran auditwheel (its repair step) already
        return repaired

    def _build_system_set(self, stage: Stage, python: ContainerPython, log: Path) -> WheelSet:
        """The project's build system (its [build-system] requires, less torch, plus what its backend
        asks for at build time), downloaded with the variant's torch as a constraint."""
        system = stage.build_system
        try:
            return self.wheelhouse.ensure(
                WheelhouseRequest(
                    system.environment_requirements(),
                    (),
                    python,
                    constraints=(stage.variant.torch_requirement,),
                    find_links=local_wheels(self.options.find_links),
                ),
                log=log,
            )
        except WheelhouseError as exc:
            raise DockerBuildError(
                f"{stage.variant.id}: the project's build requirements ({system.declared_in}) "
                f"cannot be had as wheels for Python {python.version}: {exc}"
            ) from None

    @property
    def environments(self) -> ContainerEnvironments:
        """How this engine's prepared environments are made (engines/docker_envs.py)."""
        return ContainerEnvironments(
            self.client,
            self.wheelhouse,
            self.options.labels,
            self._cache_requirements(),
            self.options.find_links,
        )

    def _cache_requirements(self) -> tuple[str, ...]:
        cache = self.options.compile_cache
        return (SCCACHE_REQUIREMENT,) if cache is not None and cache.tool == "sccache" else ()

    def _cache_for(self, facts: ImageFacts) -> tuple[CompileCache | None, str]:
        """The cache this build uses, and a note for its log when it is not the configured one."""
        cache = self.options.compile_cache
        if cache is None:
            return None, ""
        if cache.tool == "ccache" and not facts.ccache:
            return None, "no ccache in the build image: building without the compile cache"
        if cache.redis is not None:
            with self._caches.lock:
                if self._caches.relay is None and self._caches.relay_problem is None:
                    try:
                        ping(cache.redis)
                        self._caches.relay = RedisRelay(cache.redis)
                        atexit.register(self._caches.relay.close)
                    except RedisUnreachable as exc:
                        self._caches.relay_problem = str(exc)
            if self._caches.relay is None:  # a cache outage must not fail the build
                return None, f"{self._caches.relay_problem}: building without the compile cache"
        return cache, ""

    @property
    def cibuildwheel(self) -> CibuildwheelSettings:
        """What every variant's cibuildwheel call is told of this run (engines/cibuildwheel_settings.py)."""
        return CibuildwheelSettings(
            self.options.compile_jobs, self.options.labels, self.options.container_memory
        )

    def verify(
        self,
        stage: Stage,
        image: ImageRef,
        torch_env: PreparedEnv,
        wheel: Path,
        log: Path,
        timeline: Timeline,
        *,
        test_env: PreparedEnv | None = None,
        workdir: Path | None = None,
        deps_env: PreparedEnv | None = None,
    ) -> None:
        """The checks every engine runs (verify/checks.py); the smoke test in a fresh container from
        the same image, with only the prepared torch and the wheel's dependencies (mounted
        read-only) and the wheel (installed into its own directory, --no-deps), run from an empty
        directory."""
        variant = stage.variant
        _, python = self.facts(image).python_for(
            variant, self.options.python_support.get(variant.key.torch, ())
        )
        interpreter = f"/opt/python/{python}/bin/python"
        envs = [env for env in (deps_env, torch_env) if env is not None]
        mounts = {env.path: f"{env.mount}:ro" for env in envs}

        def smoke(code: str, log: Path) -> str:
            with Container(
                self.client,
                image.id,
                network="none",
                labels=self.options.labels,
                volumes={**mounts, wheel.parent: "/dist:ro"},
            ) as box:
                box.run(
                    [
                        interpreter,
                        "-m",
                        "pip",
                        "install",
                        "--no-index",
                        "--no-deps",
                        "--disable-pip-version-check",
                        "-q",
                        "--target",
                        "/tmp/smoke",
                        f"/dist/{wheel.name}",
                    ],
                    log=log,
                )
                return box.run(
                    [interpreter, "-s", "-c", code],
                    log=log,
                    workdir="/tmp",
                    environment={"PYTHONPATH": ":".join(["/tmp/smoke", *(e.mount for e in envs)])},
                )

        def run_tests(tests: ProjectTests, wheel: Path) -> tuple[bool, str]:
            """[test]: a fresh container, offline, with torch, the wheel's dependencies, the tests'
            requirements (mounted read-only) and the wheel installed into its own directory; the
            command runs in a copy of the test sources, where the project's own package is hidden."""
            project = (workdir or wheel.parent) / "tests-project"
            stage_test_sources(stage, tests, project, log)
            tested = [e for e in (deps_env, test_env, torch_env) if e is not None]
            paths = ["/tmp/wheel", *(e.mount for e in tested)]
            volumes = {
                **{e.path: f"{e.mount}:ro" for e in tested},
                wheel.parent: "/dist:ro",
                project: "/project",
            }
            with Container(
                self.client, image.id, network="none", labels=self.options.labels, volumes=volumes
            ) as box:
                box.run(
                    [
                        interpreter,
                        "-m",
                        "pip",
                        "install",
                        "--no-index",
                        "--no-deps",
                        "--disable-pip-version-check",
                        "-q",
                        "--target",
                        "/tmp/wheel",
                        f"/dist/{wheel.name}",
                    ],
                    log=log,
                )
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
                        "PATH": f"{bins}:/opt/python/{python}/bin:/usr/local/sbin:"
                        "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    },
                )
            return project_test_verdict(output)

        verify_wheel(
            stage,
            wheel,
            log,
            smoke=smoke,
            glibc_floor=self.options.glibc_floor,
            error=DockerBuildError,
            torch_include=torch_env.path / "torch" / "include",
            timeline=timeline,
            run_tests=run_tests,
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
