"""The keys of matrix.toml, declared once: plan/matrix.py's parser refuses every key not declared
here and takes its allowed values from here; project/schemas.py writes the file's JSON Schema and
the docs tests check the reference pages against the same declaration."""

from __future__ import annotations

import json

from wheelfactory.plan.build_config import (
    CPU_BASELINES,
    DEBIAN_MIRROR,
    DEBIAN_SUITES,
    DEFAULT_BASE_IMAGES,
    ENGINES,
    GLIBC_FLOOR,
    SIZE,
)
from wheelfactory.plan.compile_cache_settings import TOOLS
from wheelfactory.plan.identity import ARCHES
from wheelfactory.plan.indexes import ALIAS, PYPI, URL
from wheelfactory.plan.kind_names import AUTO, OLD_PROJECT_KINDS, PROJECT_KINDS
from wheelfactory.plan.project_tests import TEST_SECTION
from wheelfactory.plan.publish_config import PUBLISH_SECTION
from wheelfactory.plan.toml_model import (
    NONBLANK,
    AnyOf,
    Flag,
    Integer,
    Key,
    Section,
    Sections,
    Text,
    TextList,
    TextMap,
)
from wheelfactory.plan.torch_pin import TORCH_REQUIREMENTS

_CUDA_ARCH_PART = r"[0-9]{1,2}\.[0-9][af]?(\+PTX)?"
CUDA_ARCH = f"^{_CUDA_ARCH_PART}$"
# arch_list as one string: the archs separated by ";" or spaces (TORCH_CUDA_ARCH_LIST's form)
CUDA_ARCH_STRING = f"^[ ;]*{_CUDA_ARCH_PART}([ ;]+{_CUDA_ARCH_PART})*[ ;]*$"
GFX = r"^gfx[0-9a-f]{3,4}$"

STABLE_ABI_FIRST = "2.10"  # the first torch whose stable ABI can be targeted (TORCH_TARGET_VERSION)


_URL = f"^{URL.pattern}$"
_ALIAS = f"^{ALIAS.pattern}$"
_TORCH_ITEM = Text(examples=("2.6", "2.5.0", ">=2.6,<2.9", "latest"))


def _toolkits(versions: tuple[str, ...]) -> Key:
    return Key(
        "toolkits",
        TextList(
            item=Text(examples=versions),
            nonempty=True,
            lone_form=Text(examples=("all", "default", *versions)),
        ),
        f'"all", "default" (the build pip\'s index serves), or versions/specifiers {json.dumps(list(versions))}',
        default="all",
    )


_CUDA_ARCH_LIST = Key(
    "arch_list",
    TextList(
        item=Text(pattern=CUDA_ARCH, examples=("8.0", "9.0a", "12.0+PTX")),
        lone_form=Text(pattern=CUDA_ARCH_STRING, examples=("8.0;9.0a;12.0+PTX",)),
        nonempty=True,
    ),
    "CUDA archs in TORCH_CUDA_ARCH_LIST form, overriding the compatibility table's default",
)


def _selector_keys(torch: Key, backend: Key) -> tuple[Key, ...]:
    return (
        torch,
        backend,
        Key("cxx11_abi", Flag(), "the C++ ABI: true (cxx11) or false (cxx98); absent: any"),
        Key(
            "python",
            Text(examples=("abi3", "3.11")),
            '"abi3" or a CPython version like "3.11"; absent: any',
        ),
        Key("arch", Text(examples=ARCHES), f"{' or '.join(ARCHES)}; absent: any"),
    )


_EXCLUDE = Section(
    _selector_keys(
        Key("torch", _TORCH_ITEM, "torch releases it matches: a release, a patch, a specifier"),
        Key(
            "backend",
            Text(examples=("cpu", "cuda", "rocm", "cu126", "rocm6.3")),
            "cpu, cuda, rocm or a pinned build like cu126",
        ),
    ),
    description="matching variants are pruned",
    names_some_key=True,
)
_INCLUDE = Section(
    (
        *_selector_keys(
            Key(
                "torch",
                Text(examples=("2.6", "2.6.0", "latest")),
                "one torch version",
                required=True,
            ),
            Key(
                "backend",
                Text(examples=("cpu", "cu126", "rocm6.3")),
                'a pinned build: "cpu", "cu126", "rocm6.3"',
                required=True,
            ),
        ),
        Key(
            "extra_cflags", TextList(item=Text(examples=("-DMY_FLAG",))), "more C++ compiler flags"
        ),
        Key("extra_cuda_cflags", TextList(item=Text(examples=("-lineinfo",))), "more nvcc flags"),
        Key("env", TextMap(), "environment variables of the build"),
        _CUDA_ARCH_LIST,
    ),
    description="adds the combination, or attaches the settings to planned ones",
)

MATRIX_FILE = Section(
    description="wheelfactory's matrix.toml: what to build. Every key is optional.",
    keys=(
        Key(
            "project",
            Section(
                (
                    Key(
                        "path",
                        Text(pattern=NONBLANK, examples=(".", "kernels/mykernels")),
                        "the kernel project directory, relative to matrix.toml",
                        default=".",
                    ),
                    Key(
                        "kind",
                        Text(choices=PROJECT_KINDS + OLD_PROJECT_KINDS),
                        "native has kernel.toml, kernel-builder a "
                        "build.toml, bring-your-own its own setup.py/pyproject.toml (setuptools: its old spelling); auto "
                        "looks for them in that order",
                        default=AUTO,
                    ),
                    Key(
                        "import_name",
                        Text(examples=("my_ext",)),
                        "bring-your-own: the module the smoke test imports",
                    ),
                    Key(
                        "env",
                        TextMap(),
                        "bring-your-own: variables its build reads, for every variant",
                    ),
                    Key(
                        "cpu_env",
                        TextMap(),
                        "bring-your-own: variables its build reads, for CPU variants",
                    ),
                    Key(
                        "cuda_env",
                        TextMap(),
                        "bring-your-own: variables its build reads, for CUDA and ROCm variants",
                    ),
                )
            ),
            "the kernel project the matrix builds",
        ),
        Key(
            "matrix",
            Section(
                (
                    Key(
                        "torch",
                        TextList(item=_TORCH_ITEM, nonempty=True),
                        'releases ("2.6"), exact patches ("2.5.0"), specifiers (">=2.6,<2.9") or "latest"; '
                        "default: every release in the compatibility table",
                    ),
                    Key(
                        "backends",
                        TextList(
                            item=Text(examples=("cpu", "cuda", "rocm", "cu126", "rocm6.3")),
                            nonempty=True,
                            unique=True,
                        ),
                        'cpu, cuda (every CUDA build of each torch), rocm, or pinned builds like cu126; default ["cpu"]',
                    ),
                    Key(
                        "cxx11_abi",
                        AnyOf((Flag(), Text(choices=("both",)))),
                        'true, false or "both" (each ABI the torch build exists with)',
                        default="both",
                    ),
                    Key(
                        "python",
                        TextList(
                            item=Text(examples=("abi3", "3.11", "3.12")), nonempty=True, unique=True
                        ),
                        '"abi3" (one cp39-abi3 wheel per variant) or CPython versions like "3.11"; default ["abi3"]',
                    ),
                    Key(
                        "arch",
                        TextList(item=Text(examples=ARCHES), nonempty=True, unique=True),
                        f'{", ".join(ARCHES)}; default ["x86_64"]',
                    ),
                    Key(
                        "stable_abi",
                        Text(pattern=r"^[0-9]+\.[0-9]+$", examples=(STABLE_ABI_FIRST,)),
                        f"a torch release from {STABLE_ABI_FIRST} on: one stable-ABI variant per backend build and arch "
                        "serves every torch from it on",
                    ),
                )
            ),
            "the axes the variants are the product of",
        ),
        Key(
            "cuda",
            Section(
                (
                    _toolkits(("12.4", ">=12.8")),
                    _CUDA_ARCH_LIST,
                    Key(
                        "split_archs",
                        Flag(),
                        "one variant per SASS arch of the arch list, and one for the highest "
                        "+PTX arch's PTX: wheels of one GPU architecture each (-sm90, -ptx120 in the id)",
                        default=False,
                    ),
                )
            ),
            "which CUDA builds, for which GPUs",
        ),
        Key(
            "rocm",
            Section(
                (
                    _toolkits(("6.3", ">=7.0")),
                    Key(
                        "gfx_targets",
                        TextList(
                            item=Text(pattern=GFX, examples=("gfx90a", "gfx942")), nonempty=True
                        ),
                        "gfx targets, overriding the compatibility table's",
                    ),
                )
            ),
            "which ROCm builds, for which GPUs",
        ),
        Key(
            "stable_abi",
            Section(
                (
                    Key(
                        "verify_on",
                        TextList(
                            item=Text(
                                pattern=r"^([0-9]+\.[0-9]+|latest)$", examples=("2.10", "latest")
                            ),
                            nonempty=True,
                        ),
                        "the torch releases a stable-ABI wheel is verified on (smoke test and the project's tests), among "
                        "those it serves; default: the oldest, middle and newest",
                    ),
                )
            ),
            "the stable-ABI gate: a wheel built once, verified on the torch releases it claims",
        ),
        Key(
            "include",
            Sections(_INCLUDE),
            "[[include]]: a combination to add, or settings for planned ones",
        ),
        Key("exclude", Sections(_EXCLUDE), "[[exclude]]: variants to prune"),
        Key(
            "build",
            Section(
                (
                    Key(
                        "engine",
                        Text(choices=ENGINES),
                        "docker, host, or auto (docker when an engine answers)",
                        default="auto",
                    ),
                    Key(
                        "jobs",
                        Integer(minimum=0),
                        "parallel builds; 0 derives them from cores and memory",
                        default=0,
                    ),
                    Key(
                        "out",
                        Text(pattern=NONBLANK, examples=("dist",)),
                        "the output directory",
                        default="dist",
                    ),
                    Key(
                        "base_image",
                        AnyOf(
                            (
                                Text(pattern=NONBLANK, examples=(DEFAULT_BASE_IMAGES["x86_64"],)),
                                TextMap(
                                    names=Text(choices=ARCHES),
                                    value=Text(
                                        pattern=NONBLANK,
                                        examples=tuple(DEFAULT_BASE_IMAGES.values()),
                                    ),
                                ),
                            )
                        ),
                        "the image every build runs in, or one per arch {x86_64 = ..., aarch64 = ...}",
                    ),
                    Key(
                        "torch_index",
                        Text(
                            pattern=f"^({ALIAS.pattern}|{URL.pattern})$",
                            examples=(PYPI, "pytorch", "http://127.0.0.1:8080/whl"),
                        ),
                        "where torch comes from instead of the table's: an index alias (\"pypi\": the host's pip "
                        'index, "pytorch", any alias of [indexes]) or an index URL',
                    ),
                    Key(
                        "wheelhouse",
                        Text(pattern=NONBLANK, examples=("~/.cache/wheelfactory/wheelhouse",)),
                        "the wheelhouse directory, relative to matrix.toml",
                    ),
                    Key(
                        "debian_base",
                        Text(choices=DEBIAN_SUITES),
                        "make the base image here from this Debian suite instead of pulling base_image",
                    ),
                    Key(
                        "debian_mirror",
                        Text(pattern=DEBIAN_MIRROR, examples=("http://127.0.0.1:3142/debian",)),
                        "the Debian mirror for debian_base; default: the host's apt mirror",
                    ),
                    Key(
                        "compile_cache",
                        AnyOf((Text(choices=TOOLS), Flag(only=False))),
                        'the compile cache the builds share: "sccache", "ccache" or false',
                        default="sccache",
                    ),
                    Key(
                        "compile_cache_dir",
                        Text(examples=("~/.cache/wheelfactory/sccache",)),
                        "the compile cache's local store",
                    ),
                    Key(
                        "compile_cache_redis",
                        Text(examples=("redis://127.0.0.1:6379/0", "unix:///run/redis/redis.sock")),
                        "sccache only: a shared Redis store (no password here: SCCACHE_REDIS_PASSWORD)",
                    ),
                    Key(
                        "glibc_floor",
                        Text(pattern=GLIBC_FLOOR, examples=("2.28",)),
                        "the oldest glibc the wheels may need",
                    ),
                    Key(
                        "torch_requirement",
                        Text(choices=TORCH_REQUIREMENTS),
                        "pinned: each wheel requires the torch line it was built for; unpinned: plain torch",
                        default="pinned",
                    ),
                    Key(
                        "wheel_size_limit",
                        Text(pattern=SIZE, examples=("100 MB", "1 GiB")),
                        "a wheel over this size fails its variant, with what would fit (PyPI's default limit: 100 MB)",
                        default="100 MB",
                    ),
                    Key(
                        "strip",
                        Flag(),
                        "move the libraries' debug info out of the wheels, into dist/<variant>/debug "
                        "by GNU build id; false: ship it in the wheels",
                        default=True,
                    ),
                    Key(
                        "debug_info",
                        Flag(),
                        "keep the debug info (-g) Python's compile flags add; false: compile with -g0",
                        default=False,
                    ),
                    Key(
                        "find_links",
                        TextList(item=Text(examples=(".",))),
                        "directories of wheels every wheel set may also take from (a package no index has), relative "
                        "to matrix.toml",
                    ),
                    Key(
                        "cpu_baseline",
                        Section(
                            keys=tuple(
                                Key(arch, Text(choices=levels), f"the CPU level of {arch} wheels")
                                for arch, levels in CPU_BASELINES.items()
                            ),
                            description="per arch",
                        ),
                        "the CPU level an arch's wheels are compiled for where a build asks for -march=native, "
                        '{x86_64 = "x86-64-v3"}; default x86-64-v2 and armv8-a',
                    ),
                ),
                conflicts=(("debian_base", "base_image"),),
            ),
            "settings of the run, not of any one variant",
        ),
        Key(
            "indexes",
            TextMap(
                names=Text(pattern=_ALIAS, excluded=(PYPI,), examples=("pytorch",)),
                value=Text(pattern=_URL, examples=("http://127.0.0.1:8080/whl",)),
            ),
            "index alias -> URL; WHEELFACTORY_INDEX_<ALIAS> in the environment wins",
        ),
        Key("test", TEST_SECTION, "the project's own tests, run against every built wheel"),
        Key("publish", PUBLISH_SECTION, "where `wheelfactory publish` sends the release"),
    ),
)

TOP_LEVEL_KEYS = MATRIX_FILE.names()
MATRIX_KEYS = MATRIX_FILE.section("matrix").names()
SELECTOR_KEYS = _EXCLUDE.names()
INCLUDE_SETTING_KEYS = _INCLUDE.names() - SELECTOR_KEYS
