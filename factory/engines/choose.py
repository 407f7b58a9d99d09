"""Which engine builds, and which variants it builds: the decision `wheelfactory build` makes
before the matrix runs (``--engine auto`` tries Docker, then falls back to the host), plus the
one-time preparation the Docker engine needs (the base image, made here from Debian packages
when the matrix says ``debian_base``)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from wheelfactory.engines import Engine
from wheelfactory.engines.host import host_variant
from wheelfactory.errors import ConfigError, DockerUnavailable, ImageBuildFailed
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand, select
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix

DEFAULT_CACHE = Path.home() / ".cache" / "wheelfactory"


@dataclass(frozen=True)
class Chosen:
    engine: Engine
    variants: tuple[Variant, ...]
    summary: str  # one line for people: the engine and what it builds


def owner_of(out: Path) -> str:
    """The label value that marks a run's containers: the output directory, hashed."""
    return hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]


def choose_engine(matrix: Matrix, table: CompatTable, *, choice: str, python: str, out: Path,
                  only: Sequence[str], native: bool, console: Console, matrix_file: str,
                  shard: tuple[int, int] | None = None) -> Chosen:
    client = None
    if choice in ("auto", "docker"):
        from wheelfactory.images.containers import docker_client

        try:
            client = docker_client()
        except DockerUnavailable as exc:
            if choice == "docker":
                raise
            console.print(f"{exc}; building with the host engine instead", markup=False)
    if client is not None:
        return _docker(client, matrix, table, out=out, only=only, shard=shard, native=native, console=console,
                       matrix_file=matrix_file)
    return _host(matrix, table, python=python, only=only, shard=shard, native=native)


def _docker(client: object, matrix: Matrix, table: CompatTable, *, out: Path, only: Sequence[str],
            shard: tuple[int, int] | None, native: bool, console: Console, matrix_file: str) -> Chosen:
    from wheelfactory.engines.docker import DockerEngine
    from wheelfactory.engines.wheelhouse import Wheelhouse

    if not native and "abi3" in matrix.python:
        raise ConfigError("a bring-your-own project is built per CPython version, not as abi3",
                          file=matrix_file, key="matrix.python", hint='list versions, e.g. python = ["3.11"]')
    variants = select(expand(matrix, table), only, shard)
    build = matrix.build
    base_images = dict(build.base_images)
    debian_base = None
    if build.debian_base:
        debian_base = _debian_bases(client, matrix, console)
        base_images = _debian_base(matrix, variants, debian_base, matrix_file=matrix_file)
    wheelhouse = build.wheelhouse or DEFAULT_CACHE / "wheelhouse"
    engine = DockerEngine(client, base_images, Wheelhouse(wheelhouse), out / "images.log",
                          torch_index=build.torch_index, python_support={r.minor: r.python for r in table.releases},
                          owner=owner_of(out), compile_cache=build.compile_cache, glibc_floor=build.glibc_floor,
                          debian_base=debian_base, debian_mirror=_mirror(matrix),
                          refusals=_refusals(variants, table, build.torch_index))
    cache = f", compile cache {build.compile_cache.describe()}" if build.compile_cache else ", no compile cache"
    refused = f"; {len(engine.refusals)} of them not on torch_index (they fail at once)" if engine.refusals else ""
    return Chosen(engine, variants,
                  f"engine docker: {len(variants)} variant(s), wheelhouse {wheelhouse}{cache}{refused}")


def _refusals(variants: Sequence[Variant], table: CompatTable, torch_index: str | None) -> dict[str, str]:
    from wheelfactory.engines.wheelhouse import pypi_refusal

    refusals: dict[str, str] = {}
    for variant in variants:
        release = table.release(variant.key.torch)
        reason = release and torch_index and pypi_refusal(variant, release, torch_index)
        if reason:
            refusals[variant.id] = reason
    return refusals


def _mirror(matrix: Matrix) -> str:
    from wheelfactory.images.base_image import DEFAULT_MIRROR

    return (matrix.build.debian_mirror or DEFAULT_MIRROR).rstrip("/")


def _debian_bases(client: object, matrix: Matrix, console: Console) -> Callable[[str], str]:
    """suite -> the tag of its offline Debian base, made on first use (reused: content-tagged)."""
    from wheelfactory.images.base_image import BaseImageSpec, ensure_base_image, parse_suite
    from wheelfactory.support.progress import ConsoleProgress

    def make(suite: str) -> str:
        try:
            image = ensure_base_image(client, BaseImageSpec(parse_suite(suite), _mirror(matrix)),  # type: ignore[arg-type]
                                      cache_dir=DEFAULT_CACHE, progress=ConsoleProgress(console))
        except ImageBuildFailed as exc:
            if exc.tail:
                console.print(exc.tail, markup=False, highlight=False)
            raise
        return image.tag

    return functools.cache(make)


def _debian_base(matrix: Matrix, variants: Sequence[Variant], make: Callable[[str], str], *,
                 matrix_file: str) -> dict[str, str]:
    """The offline Debian base for the host's arch (made now, before the matrix runs)."""
    import platform

    arch = platform.machine()
    foreign = sorted({v.key.arch for v in variants} - {arch})
    if foreign:
        raise ConfigError(f"debian_base builds a base image for this machine's arch ({arch}) only, and the plan "
                          f"has {', '.join(foreign)} variants", file=matrix_file, key="build.debian_base",
                          hint="drop those archs, or name per-arch images in base_image instead")
    return {arch: make(matrix.build.debian_base or "")}


def _host(matrix: Matrix, table: CompatTable, *, python: str, only: Sequence[str], shard: tuple[int, int] | None,
          native: bool) -> Chosen:
    from wheelfactory.engines.host import HostEngine, probe

    environment = probe(python)
    variant = host_variant(matrix, table, environment, abi3=native)
    chosen = select(expand(matrix, table), only, shard) if only or shard else (variant,)
    # Besides its own variant, the host can build a stable-ABI variant planned against its torch.
    buildable = [v for v in chosen if v == variant or (
        v.key.stable_abi and v.torch_version == environment.torch_release
        and v.key.backend.kind == variant.key.backend.kind and v.key.arch == variant.key.arch)]
    if len(buildable) != len(chosen):
        ids = ", ".join(v.id for v in chosen if v not in buildable)
        raise ConfigError(f"the host engine builds only {variant.id} (the torch of {python}) and stable-ABI "
                          f"variants planned against torch {environment.torch_release}; the selection has {ids}",
                          hint="build those with the docker engine, or pick the host's variant with --only")
    names = ", ".join(v.id for v in chosen)
    return Chosen(HostEngine(environment, glibc_floor=matrix.build.glibc_floor), tuple(chosen),
                  f"engine host: {environment.executable} with torch {environment.torch}; building {names}")
