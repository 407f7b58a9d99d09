"""matrix.toml: parsed once, at the edge, into typed values; every mistake named with file, key, line.

Parsing checks names and types and resolves torch versions against the compatibility table;
it does no other I/O (the project path is checked by the commands that use it). The axes and the
[[include]] / [[exclude]] entries are read by plan/axes.py; the other sections here, or by the
module each names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from wheelfactory.plan.axes import (
    BackendSelector,
    Include,
    Selector,
    ToolkitFilter,
    TorchSelector,
    abi_axis,
    arch_axis,
    backend_axis,
    cuda_arch_list,
    exclude_entries,
    include_entries,
    python_axis,
    toolkit_filter,
    torch_axis,
)
from wheelfactory.plan.build_config import BuildConfig, parse_build
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.indexes import ALIAS, PYPI, is_url
from wheelfactory.plan.kind_names import AUTO, OLD_PROJECT_KINDS, PROJECT_KINDS
from wheelfactory.plan.matrix_schema import (
    GFX,
    MATRIX_FILE,
    MATRIX_KEYS,
    STABLE_ABI_FIRST,
    TOP_LEVEL_KEYS,
)
from wheelfactory.plan.project_tests import ProjectTests, parse_test_table
from wheelfactory.plan.publish_config import PublishConfig, parse_publish_table
from wheelfactory.plan.tomlsource import Table, TomlDocument
from wheelfactory.plan.versions import RELEASE_LINE

_GFX = re.compile(GFX)


@dataclass(frozen=True)
class CudaSettings:
    toolkits: ToolkitFilter = ToolkitFilter()
    arch_list: tuple[str, ...] | None = None  # overrides the table's default
    split_archs: bool = False  # one variant per SASS arch, plus one for the PTX (plan/expand.py)


@dataclass(frozen=True)
class RocmSettings:
    toolkits: ToolkitFilter = ToolkitFilter()
    gfx_targets: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ProjectConfig:
    path: Path  # absolute
    kind: str = AUTO
    # Bring-your-own projects: the module the smoke test imports, and the variables their build
    # reads (for every variant, for CPU variants, for CUDA/ROCm variants).
    import_name: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    cpu_env: tuple[tuple[str, str], ...] = ()
    cuda_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Matrix:
    file: str
    project: ProjectConfig
    torch: tuple[TorchSelector, ...]
    backends: tuple[BackendSelector, ...]
    cxx11_abi: tuple[bool, ...]
    python: tuple[str, ...]
    arch: tuple[str, ...]
    cuda: CudaSettings = CudaSettings()
    rocm: RocmSettings = RocmSettings()
    include: tuple[Include, ...] = ()
    exclude: tuple[Selector, ...] = ()
    build: BuildConfig = field(default_factory=BuildConfig)
    # "2.10": torch releases from this one on are served by one stable-ABI variant per backend
    # build and arch (the kernel's [stable_abi] sources, built with TORCH_TARGET_VERSION).
    stable_abi: str | None = None
    # The backend kinds the stable-ABI target applies to; None: every backend. A project may declare
    # it for some only (build.toml [torch.stable-abi] cuda = "2.10"): the others build per release.
    stable_abi_backends: tuple[str, ...] | None = None
    # [stable_abi] verify_on: the torch releases ("2.12", "latest") a stable-ABI wheel is verified
    # on; None: the oldest, middle and newest of those it serves (plan/expand.py).
    stable_abi_verify_on: tuple[str, ...] | None = None
    # [indexes]: index alias -> URL (the user's; WHEELFACTORY_INDEX_<ALIAS> overrides, plan/indexes.py)
    indexes: tuple[tuple[str, str], ...] = ()
    # [test]: the project's own tests, run against every wheel (plan/project_tests.py); it
    # replaces a factory-native kernel's kernel.toml [test].
    test: ProjectTests | None = None
    # [publish]: where `wheelfactory publish` sends the release (plan/publish_config.py)
    publish: PublishConfig = PublishConfig()


def load_matrix(path: Path, table: CompatTable, *, display: str | None = None) -> Matrix:
    doc = TomlDocument.load(path, display=display)
    return parse_matrix(doc, table, base_dir=path.resolve().parent)


def parse_matrix(doc: TomlDocument, table: CompatTable, *, base_dir: Path) -> Matrix:
    root = doc.root()
    root.reject_unknown(TOP_LEVEL_KEYS)
    axes = root.table("matrix")
    axes.reject_unknown(MATRIX_KEYS)
    return Matrix(
        file=doc.file,
        project=_project(root.table("project"), base_dir),
        torch=torch_axis(axes, table),
        backends=backend_axis(axes, table),
        cxx11_abi=abi_axis(axes),
        python=python_axis(axes),
        arch=arch_axis(axes),
        cuda=_cuda(root.table("cuda")),
        rocm=_rocm(root.table("rocm")),
        include=include_entries(root, table),
        exclude=exclude_entries(root, table),
        build=_build(root.table("build"), base_dir),
        stable_abi=_stable_abi(axes, table),
        stable_abi_verify_on=_verify_on(root.table("stable_abi")),
        indexes=_indexes(root),
        test=parse_test_table(root.table("test"), declared_in=doc.file, base_dir=base_dir),
        publish=parse_publish_table(root.table("publish"), base_dir=base_dir),
    )


def _indexes(root: Table) -> tuple[tuple[str, str], ...]:
    urls, table = root.string_map("indexes"), root.table("indexes")
    for alias, url in urls.items():
        if alias == PYPI:
            table.error(
                alias,
                "is the index pip is configured with on the host",
                "configure it for pip (pip config set global.index-url URL, or PIP_INDEX_URL)",
            )
        if not ALIAS.fullmatch(alias):
            table.error(
                alias, f"{alias!r} is not an index alias", "use lowercase letters, digits, - and _"
            )
        if not is_url(url):
            table.error(
                alias,
                f"{url!r} is not an index URL",
                'e.g. "http://127.0.0.1:8080/whl" or "file:///srv/whl"',
            )
    return tuple(sorted(urls.items()))


def _verify_on(section: Table) -> tuple[str, ...] | None:
    section.reject_unknown(MATRIX_FILE.section("stable_abi").names())
    if not section.has("verify_on"):
        return None
    releases: tuple[str, ...] = section.string_list("verify_on")
    for release in releases:
        if release != "latest" and not RELEASE_LINE.fullmatch(release):
            section.error(
                "verify_on",
                f"{release!r} is not a torch release",
                'e.g. ["2.10", "2.12", "latest"]',
            )
    if not releases:
        section.error("verify_on", "is empty", 'e.g. ["2.10", "2.12", "latest"]')
    return releases


def _stable_abi(axes: Table, table: CompatTable) -> str | None:
    target = axes.string("stable_abi")
    if target is None:
        return None
    try:
        version = Version(target)
    except InvalidVersion:
        version = None
    if version is None or len(version.release) != 2 or version < Version(STABLE_ABI_FIRST):
        axes.error(
            "stable_abi",
            f"{target!r} is not a torch release the stable ABI can target",
            f'use a major.minor from {STABLE_ABI_FIRST} on, e.g. "{STABLE_ABI_FIRST}"',
        )
    if table.release(target) is None:
        axes.error(
            "stable_abi",
            f"torch {target} is not in the compatibility table",
            f"known: {table.known_versions()}",
        )
    return str(target)


def _cuda(table: Table) -> CudaSettings:
    table.reject_unknown(MATRIX_FILE.section("cuda").names())
    return CudaSettings(
        toolkit_filter(table),
        cuda_arch_list(table, "arch_list"),
        split_archs=table.boolean("split_archs", False),
    )


def _gfx_targets(table: Table, key: str) -> tuple[str, ...] | None:
    if not table.has(key):
        return None
    targets: tuple[str, ...] = table.string_list(key)
    if not targets:
        table.error(key, "is empty", 'e.g. gfx_targets = ["gfx90a", "gfx942"]')
    for target in targets:
        if not _GFX.fullmatch(target):
            table.error(key, f"{target!r} is not a gfx target", "use names like gfx90a or gfx942")
    return targets


def _rocm(table: Table) -> RocmSettings:
    table.reject_unknown(MATRIX_FILE.section("rocm").names())
    return RocmSettings(toolkit_filter(table), _gfx_targets(table, "gfx_targets"))


def _project(table: Table, base_dir: Path) -> ProjectConfig:
    table.reject_unknown(MATRIX_FILE.section("project").names())
    # the project beside its matrix.toml, as `wheelfactory new` lays it out
    path = table.string("path", ".")
    if not path.strip() or "\0" in path:
        table.error(
            "path",
            "is empty" if not path.strip() else "contains a NUL byte",
            "point it at a kernel project directory",
        )
    kind = table.string("kind", AUTO)
    if kind not in PROJECT_KINDS + OLD_PROJECT_KINDS:
        table.error(
            "kind", f"unknown project kind {kind!r}", f"use one of {', '.join(PROJECT_KINDS)}"
        )
    import_name = table.string("import_name")
    if import_name is not None and not all(part.isidentifier() for part in import_name.split(".")):
        table.error(
            "import_name", f"{import_name!r} is not a module name", 'e.g. import_name = "my_ext"'
        )
    return ProjectConfig(
        (base_dir / path).resolve(),
        kind,
        import_name,
        *(tuple(sorted(table.string_map(key).items())) for key in ("env", "cpu_env", "cuda_env")),
    )


def _build(table: Table, base_dir: Path) -> BuildConfig:
    table.reject_unknown(MATRIX_FILE.section("build").names())
    return parse_build(table, base_dir)
