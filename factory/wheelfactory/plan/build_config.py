"""matrix.toml's [build] table: how and where the run builds (engine, base images, wheelhouse,
compile cache, glibc floor, the wheels' torch pin, debug info), read into a ``BuildConfig``. Its
keys are declared with the rest of the file in plan/matrix_schema.py, checked first; every
mistake is one line naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wheelfactory.plan.compile_cache_settings import (
    TOOLS,
    CompileCache,
    Tool,
    default_dir,
    mask_password,
    parse_redis,
)
from wheelfactory.plan.identity import ARCHES
from wheelfactory.plan.indexes import ALIAS, is_url
from wheelfactory.plan.project_tests import wheel_directories
from wheelfactory.plan.tomlsource import Table, did_you_mean
from wheelfactory.plan.torch_pin import TORCH_REQUIREMENTS, TorchRequirement

Engine = Literal["auto", "docker", "host"]
ENGINES: tuple[Engine, ...] = ("auto", "docker", "host")
DEFAULT_BASE_IMAGES = {
    "x86_64": "quay.io/pypa/manylinux_2_28_x86_64",
    "aarch64": "quay.io/pypa/manylinux_2_28_aarch64",
}

# factory/wheelfactory/images/base_image.py describes each
DEBIAN_SUITES = ("bullseye", "bookworm", "trixie")


DEBIAN_MIRROR = r"^https?://\S+$"
GLIBC_FLOOR = r"^2\.\d{1,2}$"


def default_compile_cache() -> CompileCache:
    return CompileCache("sccache", default_dir("sccache"))


# The CPU level each arch's wheels are compiled for where a build asks for -march=native
# (engines/cpu_baseline.py), unless [build] cpu_baseline says otherwise: what a wheel of the
# platform can count on (x86-64-v2: SSE4.2 and POPCNT, every x86-64 CPU since 2009; armv8-a:
# every 64-bit Arm), and the levels one may choose instead.
DEFAULT_CPU_BASELINES = {"x86_64": "x86-64-v2", "aarch64": "armv8-a"}
CPU_BASELINES = {
    "x86_64": ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"),
    "aarch64": ("armv8-a", "armv8.1-a", "armv8.2-a", "armv8.4-a", "armv9-a"),
}


# [build] wheel_size_limit (verify/wheel_size.py): PyPI's default file size limit, and the forms a
# size takes ("100 MB", "1.5 GiB")
DEFAULT_WHEEL_SIZE_LIMIT = "100 MB"
SIZE = r"^\s*[0-9]+(\.[0-9]+)?\s*(B|kB|KB|MB|GB|KiB|MiB|GiB)\s*$"
_UNITS = {
    "B": 1,
    "kB": 1000,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
}


def parse_size(text: str) -> int | None:
    """``"100 MB"`` -> 100000000; ``"1.5 GiB"``; None for anything else."""
    found = re.fullmatch(SIZE, text)
    if not found:
        return None
    number = text.strip()[: len(text.strip()) - len(found[2])].strip()
    return int(float(number) * _UNITS[found[2]])


@dataclass(frozen=True, kw_only=True)
class BuildConfig:
    """matrix.toml's [build] table: settings of the run, not of any one variant."""

    engine: Engine = "auto"
    jobs: int = 0  # 0: derive from cores and memory
    out: str = "dist"
    base_images: tuple[tuple[str, str], ...] = tuple(sorted(DEFAULT_BASE_IMAGES.items()))
    # overrides the table's torch index: an index alias ("pypi": the host's pip index; "pytorch";
    # any alias of [indexes]) or an index URL used as written. See factory/wheelfactory/plan/indexes.py.
    torch_index: str | None = None
    wheelhouse: Path | None = None  # absolute; default ~/.cache/wheelfactory/wheelhouse
    # Build the base image here from Debian packages (wheelfactory base-image) instead of
    # pulling base_image: for engines that reach no container registry.
    debian_base: str | None = None  # a suite: bullseye, bookworm, trixie
    # None: the mirror the host's apt sources use (plan/indexes.py)
    debian_mirror: str | None = None
    # The compile cache every variant's container shares (factory/wheelfactory/engines/compile_cache.py); None: none.
    compile_cache: CompileCache | None = field(default_factory=default_compile_cache)
    # "2.28": no wheel may need a newer glibc (verification fails it)
    glibc_floor: str | None = None
    # The wheels' Requires-Dist on torch: "pinned" to the release line built for (plan/torch_pin.py)
    # or "unpinned" (plain torch: the runtime's JIT or reference ops serve any other torch).
    torch_requirement: TorchRequirement = "pinned"
    # Keep the debug info (-g) Python's own compile flags ask for; false: -g0 (engines/compile_flags.py).
    debug_info: bool = False
    # Move the libraries' debug info out of the wheels into dist/<variant>/debug (verify/strip.py).
    strip: bool = True
    # Directories of wheels every wheel set may also take from (a package no index has), absolute.
    find_links: tuple[str, ...] = ()
    # arch -> the CPU level its wheels are built for
    cpu_baselines: tuple[tuple[str, str], ...] = ()
    # bytes; a bigger wheel fails its variant (verify/wheel_size.py)
    wheel_size_limit: int = 100 * 1000**2

    def base_image(self, arch: str) -> str:
        return dict(self.base_images)[arch]


def _compile_cache(table: Table, base_dir: Path) -> CompileCache | None:
    """``compile_cache = "sccache" | "ccache" | false``, ``compile_cache_dir``, ``compile_cache_redis``."""
    value = table.data.get("compile_cache", "sccache")
    if value is False:  # off for now: the other compile_cache_* keys are kept but not used
        return None
    if value not in TOOLS:
        hint = (
            'name the tool, and the directory in compile_cache_dir: compile_cache = "ccache"'
            if isinstance(value, str) and ("/" in value or value.startswith("~"))
            else 'use "sccache" (default; caches nvcc too), "ccache", or false'
        )
        table.error(
            "compile_cache", f"must be one of {', '.join(TOOLS)} or false, not {value!r}", hint
        )
    tool: Tool = "ccache" if value == "ccache" else "sccache"
    directory = default_dir(tool)
    raw_dir = table.string("compile_cache_dir")
    if raw_dir is not None:
        if not raw_dir.strip() or "\0" in raw_dir:
            table.error(
                "compile_cache_dir",
                "must be a directory path",
                'e.g. "~/.cache/wheelfactory/sccache"',
            )
        directory = (base_dir / Path(raw_dir).expanduser()).resolve()
    redis = None
    raw_redis = table.string("compile_cache_redis")
    if raw_redis is not None:
        if tool != "sccache":
            table.error(
                "compile_cache_redis",
                'needs compile_cache = "sccache" (ccache has no Redis store here)',
                'set compile_cache = "sccache"',
            )
        redis = parse_redis(raw_redis)
        if redis is None:
            table.error(
                "compile_cache_redis",
                f"{mask_password(raw_redis)!r} is not a Redis URL",
                'e.g. "redis://127.0.0.1:6379/0" or "unix:///run/redis/redis.sock" (no password: '
                "set SCCACHE_REDIS_PASSWORD in the environment)",
            )
    return CompileCache(tool, directory, redis)


def parse_build(table: Table, base_dir: Path) -> BuildConfig:
    """The [build] table (its keys already checked against the declaration in plan/matrix_schema.py)."""
    engine = table.string("engine", "auto")
    if engine not in ENGINES:
        table.error(
            "engine",
            f"unknown engine {engine!r}",
            did_you_mean(engine, ENGINES) or f"use one of {', '.join(ENGINES)}",
        )
    jobs = table.integer("jobs", 0)
    if jobs < 0:
        table.error("jobs", "must be 0 (automatic) or more")
    images = dict(DEFAULT_BASE_IMAGES)
    if table.has("base_image"):
        value = table.data["base_image"]
        if isinstance(value, str):
            images = {arch: value for arch in images}
        else:
            per_arch = table.string_map("base_image")
            for arch in per_arch:
                if arch not in ARCHES:
                    table.table("base_image").error(
                        arch, "unknown arch", did_you_mean(arch, ARCHES)
                    )
            images.update(per_arch)
    for arch, image in images.items():
        if not image.strip():
            table.error("base_image", f"empty image name for {arch}")
    out = table.string("out", "dist")
    if not out.strip():
        table.error("out", "is empty", 'name the output directory, e.g. "dist"')
    torch_index = table.string("torch_index")
    if torch_index is not None and not is_url(torch_index) and not ALIAS.fullmatch(torch_index):
        table.error(
            "torch_index",
            f"{torch_index!r} is neither an index alias nor an index URL",
            'e.g. "pypi" (the host\'s pip index), "pytorch" (PyTorch\'s per-build indexes, '
            "configured in [indexes] or WHEELFACTORY_INDEX_PYTORCH) or a URL",
        )
    wheelhouse = table.string("wheelhouse")
    if wheelhouse is not None and (not wheelhouse.strip() or "\0" in wheelhouse):
        table.error("wheelhouse", "is not a directory path")
    debian_base = table.string("debian_base")
    if debian_base is not None:
        if debian_base not in DEBIAN_SUITES:
            table.error(
                "debian_base",
                f"unknown Debian suite {debian_base!r}",
                did_you_mean(debian_base, DEBIAN_SUITES)
                or f"use one of {', '.join(DEBIAN_SUITES)}",
            )
        if table.has("base_image"):
            table.error(
                "debian_base",
                "and base_image are both set",
                "keep one: debian_base builds the base here, base_image names one to pull",
            )
    debian_mirror = table.string("debian_mirror")
    if debian_mirror is not None and not re.match(DEBIAN_MIRROR, debian_mirror):
        table.error(
            "debian_mirror",
            f"{debian_mirror!r} is not a mirror URL",
            'e.g. "http://127.0.0.1:3142/debian"; leave it out to use the host\'s apt mirror',
        )
    compile_cache = _compile_cache(table, base_dir)
    glibc_floor = table.string("glibc_floor")
    if glibc_floor is not None and not re.fullmatch(GLIBC_FLOOR, glibc_floor):
        table.error(
            "glibc_floor",
            f"{glibc_floor!r} is not a glibc version",
            'e.g. "2.28" (what manylinux_2_28 promises)',
        )
    torch_requirement = table.string("torch_requirement", "pinned")
    if torch_requirement not in TORCH_REQUIREMENTS:
        table.error(
            "torch_requirement",
            f"must be {' or '.join(map(repr, TORCH_REQUIREMENTS))}, not {torch_requirement!r}",
            did_you_mean(torch_requirement, TORCH_REQUIREMENTS)
            or '"pinned": the torch line each wheel was built for; "unpinned": any torch',
        )
    debug_info = table.boolean("debug_info", False)
    strip = table.boolean("strip", True)
    find_links = wheel_directories(table, "find_links", base_dir)
    cpu_baselines = table.string_map("cpu_baseline") if table.has("cpu_baseline") else {}
    for arch, level in cpu_baselines.items():
        if arch not in CPU_BASELINES:
            table.table("cpu_baseline").error(arch, "unknown arch", did_you_mean(arch, ARCHES))
        if level not in CPU_BASELINES[arch]:
            table.table("cpu_baseline").error(
                arch,
                f"{level!r} is not a CPU level of {arch}",
                did_you_mean(level, CPU_BASELINES[arch])
                or f"use one of {', '.join(CPU_BASELINES[arch])}",
            )
    size_limit = table.string("wheel_size_limit", DEFAULT_WHEEL_SIZE_LIMIT)
    limit = parse_size(size_limit)
    if not limit:
        table.error(
            "wheel_size_limit",
            f"{size_limit!r} is not a size",
            'e.g. "100 MB" (PyPI\'s default) or "1 GiB"',
        )
    return BuildConfig(
        engine=engine,
        jobs=jobs,
        out=out,
        base_images=tuple(sorted(images.items())),
        torch_index=torch_index,
        wheelhouse=None if wheelhouse is None else (base_dir / wheelhouse).resolve(),
        debian_base=debian_base,
        debian_mirror=debian_mirror,
        compile_cache=compile_cache,
        glibc_floor=glibc_floor,
        torch_requirement=torch_requirement,
        debug_info=debug_info,
        find_links=find_links,
        cpu_baselines=tuple(sorted(cpu_baselines.items())),
        wheel_size_limit=limit,
        strip=strip,
    )
