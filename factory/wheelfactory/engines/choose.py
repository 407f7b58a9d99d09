"""Which engine builds, and which variants it builds: the decision `wheelfactory build` makes
before the matrix runs (``--engine auto`` tries Docker; with no engine answering, the host builds
what it can and the rest is reported as not built; a project that compiles nothing gets the engine
that only writes its wheels), plus the one-time preparation the Docker engine needs (the base
image, made here from Debian packages when the matrix says ``debian_base``). The engine is made
settled: its parallelism (engines/capacity.py) is decided here, from what it builds."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wheelfactory.engines import Engine
from wheelfactory.engines.capacity import Capacity, machine_capacity
from wheelfactory.engines.host import HostEngine
from wheelfactory.engines.host_probe import HostEnvironment, host_variant, probe
from wheelfactory.engines.pure_python import PurePythonEngine
from wheelfactory.errors import (
    ConfigError,
    DockerUnavailable,
    UsageError,
    WheelfactoryError,
)
from wheelfactory.images.containers import DockerClient
from wheelfactory.images.emulation import ArchSupport, arch_support
from wheelfactory.plan.build_config import Engine as EngineChoice
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.constraints import ProjectConstraints, project_expand, project_matrix
from wheelfactory.plan.expand import Plan, select
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.indexes import Indexes, IndexRef, debian_mirror, is_url
from wheelfactory.plan.matrix import Matrix
from wheelfactory.project.noarch import NoarchBuild
from wheelfactory.project.stage import Target
from wheelfactory.support.progress import Listener, ignore

DEFAULT_CACHE = Path.home() / ".cache" / "wheelfactory"
START_ENGINE = "wheelfactory engine start"  # installs (as root, on Debian/Ubuntu) and starts one


@dataclass(frozen=True, kw_only=True)
class EngineRequest:
    """What `wheelfactory build` asks of ``choose_engine``."""

    matrix: Matrix
    table: CompatTable
    out: Path  # the output directory (its digest labels the run's containers)
    python: str  # the interpreter whose torch the host engine builds for
    choice: EngineChoice = "auto"
    only: tuple[str, ...] = ()  # --only patterns
    shard: tuple[int, int] | None = None  # --shard I/N
    # The factory writes the project's packaging (project/kind_facts.py): its host build is abi3.
    generated_packaging: bool = True
    matrix_file: str = "matrix.toml"  # for messages
    constraints: ProjectConstraints | None = None  # what the project's build.toml rules out
    jobs: int | None = None  # -j, else [build] jobs (None: from the cores and the free memory)
    max_memory: int | None = None  # --max-memory, in bytes
    # What a project that compiles nothing builds (a noarch kernel: one wheel per backend); ():
    # the plan's variants, compiled
    pure_python: tuple[NoarchBuild, ...] = ()

    def plan(self) -> Plan:
        return project_expand(self.matrix, self.table, self.constraints)


@dataclass(frozen=True)
class NotBuilt:
    """A selected variant that no engine here can build: why, and what to do about it."""

    variant: Variant
    reason: str
    action: str


@dataclass(frozen=True)
class Chosen:
    engine: Engine[Any] | None  # None: nothing here can build any selected variant
    variants: tuple[Target, ...]  # what the engine builds
    summary: str  # one line for people: the engine and what it builds
    not_built: tuple[NotBuilt, ...] = ()  # selected, but not buildable here (`build` exits 5)
    capacity: Capacity | None = None  # how many at once, and with what (None: nothing compiles)
    # What the run holds open while it builds and closes when it ends (the Docker run's caches,
    # with its compile cache's relay to Redis)
    lifetime: AbstractContextManager[object] = field(default_factory=nullcontext)


def host_tools(matrix: Matrix) -> Path:
    """Where the host's tool environments live (support/host_env.py): beside the wheelhouse."""
    return (matrix.build.wheelhouse or DEFAULT_CACHE / "wheelhouse") / "host-tools"


def owner_of(out: Path) -> str:
    """The label value that marks a run's containers: the output directory, hashed."""
    return hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]


def choose_engine(
    request: EngineRequest,
    progress: Listener = ignore,
    *,
    connect: Callable[[], DockerClient] | None = None,
    probe_host: Callable[[str], HostEnvironment] = probe,
    runs_arch: Callable[[str], ArchSupport] | None = None,
) -> Chosen:
    """``connect`` returns a Docker client or raises DockerUnavailable (default: the engine named
    by DOCKER_HOST); ``probe_host`` describes an interpreter and its torch; ``runs_arch`` says
    whether this machine runs an arch's code (natively or emulated: images/emulation.py). They
    are parameters so the decision can be tested without Docker, torch or QEMU."""
    if request.pure_python:
        return _pure_python(request)
    if request.choice == "host":
        return _host(request, probe_host)
    try:
        client = (connect or _connect)()
    except DockerUnavailable as exc:
        if request.choice == "docker":
            raise
        return _host_fallback(request, str(exc), probe_host)
    return _docker(client, request, progress, runs_arch or arch_support)


def _connect() -> DockerClient:
    from wheelfactory.images.containers import docker_client

    return docker_client(hint="")


def _docker(
    client: DockerClient,
    request: EngineRequest,
    progress: Listener,
    runs_arch: Callable[[str], ArchSupport],
) -> Chosen:
    from wheelfactory.engines.docker import DockerEngine
    from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches
    from wheelfactory.engines.wheelhouse import Wheelhouse

    matrix, table, out = request.matrix, request.table, request.out
    variants, not_built = _runnable(select(request.plan(), request.only, request.shard), runs_arch)
    build = matrix.build
    base_images = dict(build.base_images)
    debian_base = None
    if build.debian_base:
        debian_base = debian_bases(client, matrix, progress)
        base_images = {
            arch: debian_base(build.debian_base, arch)
            for arch in sorted({v.key.arch for v in variants})
        }
    wheelhouse = build.wheelhouse or DEFAULT_CACHE / "wheelhouse"
    # a stable-ABI variant's gate verifies its wheel with other torch releases: their indexes too
    gated = [other for variant in variants for other in variant.gate]
    urls, refusals = torch_indexes(
        [*variants, *gated], matrix, table, os.environ, matrix_file=request.matrix_file
    )
    tables = table_refusals([v for v in variants if v.id not in refusals], matrix)
    capacity = _capacity("docker", variants, request)
    options = DockerOptions(
        base_images=base_images,
        image_log=out / "images.log",
        torch_indexes=urls,
        python_support={r.minor: r.python for r in table.releases},
        owner=owner_of(out),
        compile_cache=build.compile_cache,
        glibc_floor=build.glibc_floor,
        debian_base=debian_base,
        debian_mirror=debian_mirror(build.debian_mirror) if debian_base else None,
        refusals={**refusals, **tables},
        find_links=build.find_links,
        cpu_baselines=dict(build.cpu_baselines),
        compile_jobs=capacity.compile_jobs,
        container_memory=capacity.container_memory,
    )
    caches = RunCaches()
    engine = DockerEngine(DockerRun(client, Wheelhouse(wheelhouse), options, caches))
    cache = (
        f", compile cache {build.compile_cache.describe()}"
        if build.compile_cache
        else ", no compile cache"
    )
    refused = (
        f"; {len(refusals)} of them cannot get their torch (they fail at once)" if refusals else ""
    ) + (
        f"; {len(tables)} of them are refused by the project's own cibuildwheel table (they fail at once)"
        if tables
        else ""
    )
    unrun = (
        f"; {len(not_built)} selected variant(s) not built: their arch does not run here"
        if not_built
        else ""
    )
    return Chosen(
        engine,
        variants,
        f"engine docker: {len(variants)} variant(s), wheelhouse {wheelhouse}{cache}{refused}{unrun}",
        not_built,
        capacity,
        caches,
    )


def _capacity(engine: str, variants: Sequence[Variant], request: EngineRequest) -> Capacity:
    return machine_capacity(
        engine, variants, requested_jobs=request.jobs, max_memory=request.max_memory
    )


def _pure_python(request: EngineRequest) -> Chosen:
    """A project that compiles nothing: its engine writes each build's wheel (one per backend).
    --only and --shard select the plan's compiled variants, which it has none of: refused."""
    builds = request.pure_python
    for flag, given in (("--only", bool(request.only)), ("--shard", request.shard is not None)):
        if given:
            raise UsageError(
                f"{flag} selects compiled variants, and {builds[0].distribution} is a pure-Python "
                f"kernel: it builds its {len(builds)} wheel(s) ({', '.join(b.id for b in builds)}) "
                f"together, in seconds; build it without {flag}"
            )
    return Chosen(
        PurePythonEngine(),
        builds,
        f"noarch kernel {builds[0].distribution}: pure Python, one wheel per backend (no engine)",
    )


def _runnable(
    variants: Sequence[Variant], runs_arch: Callable[[str], ArchSupport]
) -> tuple[tuple[Variant, ...], tuple[NotBuilt, ...]]:
    """The variants whose arch runs here (the build, repair, smoke test and tests all run as that
    arch), and the others as not built, with why and the command that makes the arch run. Never
    built with the host's arch instead: a wheel named aarch64 holding x86-64 code is worse than none."""
    support = {arch: runs_arch(arch) for arch in sorted({v.key.arch for v in variants})}

    def refusal(variant: Variant, why: ArchSupport) -> NotBuilt:
        action = (
            f"as root, run `{why.fix}` (or `{START_ENGINE} --emulate {why.arch}`), then rerun this command"
            if why.fix
            else "build it on a machine of that arch"
        )
        return NotBuilt(variant, f"{variant.id}: {why.how}", action)

    refused = tuple(
        refusal(v, support[v.key.arch]) for v in variants if not support[v.key.arch].runs
    )
    return tuple(v for v in variants if support[v.key.arch].runs), refused


def host_engine(environment: HostEnvironment, matrix: Matrix, capacity: Capacity) -> HostEngine:
    """The host engine for ``environment``, with matrix.toml's [build] settings it reads and the
    run's parallel compiles (no container: a memory cap only lowers parallelism)."""
    return HostEngine(
        environment,
        glibc_floor=matrix.build.glibc_floor,
        tools=host_tools(matrix),
        jobs_per_build=capacity.compile_jobs,
        find_links=matrix.build.find_links,
        cpu_baselines=dict(matrix.build.cpu_baselines),
    )


def table_refusals(variants: Sequence[Variant], matrix: Matrix) -> dict[str, str]:
    """variant id -> why the project's own cibuildwheel table refuses its offline build whatever the
    build holds (a step installing system packages or downloading), known before any image,
    download or compile: the variant fails at once with the option and the fix."""
    from wheelfactory.project.cibw_table import identifier_for, refusal_before_build

    found: dict[str, str] = {}
    for variant in variants:
        reason = refusal_before_build(
            matrix.project.path,
            identifier_for(variant.key.python, variant.key.arch),
            has_tests=matrix.test is not None,
        )
        if reason:
            found[variant.id] = f"{variant.id}: {reason}"
    return found


def torch_indexes(
    variants: Sequence[Variant],
    matrix: Matrix,
    table: CompatTable,
    env: Mapping[str, str],
    *,
    matrix_file: str,
) -> tuple[dict[str, str | None], dict[str, str]]:
    """variant id -> the URL its torch comes from (None: the host's pip index), and variant id -> why
    it cannot get its torch: [build] torch_index is "pypi" and PyPI lacks its build, or its index's
    alias is not configured. ``[build] torch_index`` naming an alias nobody configured is an error."""
    from wheelfactory.engines.torch_builds import pypi_refusal

    indexes = Indexes.configure(matrix.indexes, env, file=matrix_file)
    override = matrix.build.torch_index
    if override is not None and not is_url(override):
        indexes.url(IndexRef(override))  # raises the one-line error naming the alias
    urls: dict[str, str | None] = {}
    refusals: dict[str, str] = {}
    for variant in variants:
        release = table.release(variant.key.torch)
        reason = release and override and pypi_refusal(variant, release, override)
        if reason:
            refusals[variant.id] = reason
            continue
        path = (
            table.torch_index_path(release, variant.backend, variant.key.cxx11_abi)
            if release
            else ""
        )
        try:
            urls[variant.id] = indexes.torch_url(variant.torch_index, path, override)
        except ConfigError as exc:
            refusals[variant.id] = f"{variant.id}: {exc}"
    return urls, refusals


def debian_bases(
    client: DockerClient, matrix: Matrix, progress: Listener
) -> Callable[[str, str], str]:
    """(suite, arch) -> the tag of its offline Debian base, made on first use (reused: content-tagged);
    a foreign arch's through QEMU user emulation, with cross compilers for this machine
    (images/base_image.py)."""
    from wheelfactory.images.base_image import base_spec, ensure_base_image, parse_suite

    def make(suite: str, arch: str) -> str:
        spec = base_spec(parse_suite(suite), debian_mirror(matrix.build.debian_mirror), arch)
        return ensure_base_image(client, spec, cache_dir=DEFAULT_CACHE, progress=progress).tag

    return functools.cache(make)


def _host(request: EngineRequest, probe_host: Callable[[str], HostEnvironment]) -> Chosen:
    """--engine host: its own variant (or, with --only/--shard, a selection it can build entirely)."""
    matrix, python = project_matrix(request.matrix, request.constraints), request.python
    environment = probe_host(python)
    abi3 = host_abi3(request, environment)
    variant = host_variant(matrix, request.table, environment, abi3=abi3)
    chosen = (
        select(request.plan(), request.only, request.shard)
        if request.only or request.shard
        else (variant,)
    )
    buildable = [v for v in chosen if _host_can_build(v, variant, environment)]
    if len(buildable) != len(chosen):
        ids = ", ".join(v.id for v in chosen if v not in buildable)
        raise ConfigError(
            f"the host engine builds only {variant.id} (the torch of {python}) and stable-ABI "
            f"variants planned against torch {environment.torch_release}; the selection has {ids}",
            hint="build those with the docker engine, or pick the host's variant with --only",
        )
    names = ", ".join(v.id for v in chosen)
    capacity = _capacity("host", chosen, request)
    return Chosen(
        host_engine(environment, matrix, capacity),
        tuple(chosen),
        f"engine host: {environment.executable} with torch {environment.torch}; building {names}",
        capacity=capacity,
    )


def _host_fallback(
    request: EngineRequest, no_docker: str, probe_host: Callable[[str], HostEnvironment]
) -> Chosen:
    """--engine auto with no Docker engine: the host builds the selected variants it can (its own,
    stable-ABI ones planned against its torch); every other selected variant is not built."""
    matrix, table = project_matrix(request.matrix, request.constraints), request.table
    selection = select(request.plan(), request.only, request.shard)
    action = (
        f"start a Docker engine (`{START_ENGINE}`: as root on Debian/Ubuntu it installs docker.io first), "
        "then rerun this command"
    )
    reason = no_docker
    try:
        environment = probe_host(request.python)
        variant = host_variant(matrix, table, environment, abi3=host_abi3(request, environment))
    except WheelfactoryError as exc:  # no torch there, a torch the table does not know...
        reason += f"; the host engine cannot build it either: {exc}"
        return Chosen(
            None,
            (),
            f"engine: none ({no_docker}; the host engine: {exc})",
            tuple(NotBuilt(v, reason, action) for v in selection),
        )
    buildable = tuple(v for v in selection if _host_can_build(v, variant, environment))
    reason += f"; the host engine builds only {variant.id} (the torch of {environment.executable})"
    not_built = tuple(NotBuilt(v, reason, action) for v in selection if v not in buildable)
    capacity = _capacity("host", buildable, request)
    building = ", ".join(v.id for v in buildable) or "none of the selected variants"
    return Chosen(
        host_engine(environment, matrix, capacity),
        buildable,
        f"engine host ({no_docker}): {environment.executable} with torch {environment.torch}; "
        f"building {building}; {len(not_built)} selected variant(s) not built here",
        not_built,
        capacity,
    )


def host_abi3(request: EngineRequest, environment: HostEnvironment) -> bool:
    """Whether the host builds its variant as abi3: a project whose packaging the factory writes
    always; a bring-your-own one (which must build abi3 itself) when the matrix asks for abi3 and
    does not list the host's Python."""
    python = request.matrix.python
    return request.generated_packaging or ("abi3" in python and environment.python not in python)


def _host_can_build(candidate: Variant, own: Variant, environment: HostEnvironment) -> bool:
    """The host's own variant, or a stable-ABI variant planned against its torch."""
    return candidate == own or bool(
        candidate.key.stable_abi
        and candidate.torch_version == environment.torch_release
        and candidate.key.backend.kind == own.key.backend.kind
        and candidate.key.arch == own.key.arch
    )
