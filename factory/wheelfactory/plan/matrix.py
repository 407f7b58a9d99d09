"""matrix.toml: parsed once, at the edge, into typed values; every mistake named with file, key, line.

Parsing checks names and types and resolves torch versions against the compatibility table;
it does no other I/O (the project path is checked by the commands that use it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from wheelfactory.plan.build_config import BuildConfig, parse_build
from wheelfactory.plan.compat import CompatTable, TorchRelease
from wheelfactory.plan.identity import ARCHES, Backend, BuildSettings, InvalidBackend, minor_of
from wheelfactory.plan.indexes import ALIAS, PYPI, is_url
from wheelfactory.plan.kind_names import AUTO, OLD_PROJECT_KINDS, PROJECT_KINDS
from wheelfactory.plan.matrix_schema import (
    CUDA_ARCH,
    GFX,
    INCLUDE_SETTING_KEYS,
    MATRIX_FILE,
    MATRIX_KEYS,
    SELECTOR_KEYS,
    STABLE_ABI_FIRST,
    TOP_LEVEL_KEYS,
)
from wheelfactory.plan.project_tests import ProjectTests, parse_test_table
from wheelfactory.plan.publish_config import PublishConfig, parse_publish_table
from wheelfactory.plan.tomlsource import Table, TomlDocument, describe, did_you_mean

_PYTHON = re.compile(r"^3\.\d{1,2}$", re.ASCII)
_CUDA_ARCH = re.compile(CUDA_ARCH)
_GFX = re.compile(GFX)
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class TorchSelector:
    """One entry of the torch axis: a release ("2.6"), an exact patch ("2.5.0"), a specifier."""

    text: str
    releases: tuple[str, ...]  # the table's releases it selects, oldest first
    pin: str | None = None  # exact patch version when the entry named one

    def build_version(self, release: TorchRelease) -> str:
        return self.pin or release.build_version


@dataclass(frozen=True)
class BackendSelector:
    text: str
    kind: str  # cpu | cuda | rocm
    pinned: Backend | None = None  # None: every build of that kind the release has

    def matches(self, backend: Backend) -> bool:
        if backend.kind != self.kind:
            return False
        if self.pinned is None or self.pinned.version is None:
            return True
        return _same_toolkit(self.pinned.version, backend.version or "")


def _same_toolkit(pinned: str, actual: str) -> bool:
    """``rocm6.2`` matches torch's 6.2.4 build; ``cu124`` matches 12.4."""
    pinned_release, actual_release = Version(pinned).release, Version(actual).release
    return actual_release[: len(pinned_release)] == pinned_release


@dataclass(frozen=True)
class ToolkitFilter:
    """[cuda].toolkits / [rocm].toolkits: "all", "default" (PyPI's), or versions/specifiers."""

    mode: Literal["all", "default", "listed"] = "all"
    specifiers: tuple[SpecifierSet, ...] = ()
    text: str = "all"

    def admits(self, version: str, is_pypi_default: bool) -> bool:
        if self.mode == "all":
            return True
        if self.mode == "default":
            return is_pypi_default
        return any(spec.contains(Version(version), prereleases=True) for spec in self.specifiers)


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
class Selector:
    """An [[exclude]] entry (or the match part of an [[include]]); None matches anything."""

    number: int  # 1-based position in the file, for messages
    line: int | None
    torch: TorchSelector | None = None
    backend: BackendSelector | None = None
    cxx11_abi: bool | None = None
    python: str | None = None
    arch: str | None = None

    def where(self, table: str, file: str) -> str:
        at = f"{file}:{self.line}" if self.line else file
        return f"[[{table}]] #{self.number} ({at})"


@dataclass(frozen=True)
class Include:
    match: Selector
    settings: BuildSettings = BuildSettings()
    arch_list: tuple[str, ...] | None = None


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
        torch=tuple(
            _torch(axes, "torch", text, table)
            for text in _nonempty(axes, "torch", (">=" + table.releases[0].minor,))
        ),
        backends=tuple(
            _backend(axes, "backends", text, table) for text in _unique(axes, "backends", ("cpu",))
        ),
        cxx11_abi=_abi(axes),
        python=tuple(_python(axes, "python", text) for text in _unique(axes, "python", ("abi3",))),
        arch=tuple(_arch(axes, "arch", text) for text in _unique(axes, "arch", ("x86_64",))),
        cuda=_cuda(root.table("cuda")),
        rocm=_rocm(root.table("rocm")),
        include=tuple(
            _include(entry, number, table)
            for number, entry in enumerate(root.tables("include"), start=1)
        ),
        exclude=tuple(
            _selector(entry, number, table, SELECTOR_KEYS, "exclude")
            for number, entry in enumerate(root.tables("exclude"), start=1)
        ),
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
        if release != "latest" and not re.fullmatch(r"[0-9]+\.[0-9]+", release):
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


def _nonempty(table: Table, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    values: tuple[str, ...] = table.string_list(key, default)
    if not values:
        table.error(
            key, "is empty", f"list at least one value or remove '{key}' to use the default"
        )
    return values


def _unique(table: Table, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    values = _nonempty(table, key, default)
    seen: list[str] = []
    for value in values:
        if value.strip().lower() in seen:
            table.error(key, f"{value!r} is listed twice")
        seen.append(value.strip().lower())
    return values


def _torch(table: Table, key: str, text: str, compat: CompatTable) -> TorchSelector:
    known = compat.known_versions()
    add_hint = (
        f"known releases: {known}; for a newer one, `wheelfactory compat refresh --write new-compat.toml` "
        "adds what the indexes publish, then build with `--compat new-compat.toml`"
    )
    value = text.strip()
    if not value:
        table.error(
            key, "empty torch version", "name a release like '2.6', a specifier or 'latest'"
        )
    if value == "latest":
        return TorchSelector(value, (compat.releases[-1].minor,))
    version: Version | None
    try:
        version = Version(value)
    except InvalidVersion:
        version = None
    if version is not None and value[0] not in "<>=!~":
        if version.is_prerelease or version.is_devrelease or version.local:
            table.error(
                key,
                f"torch {value!r}: pre-releases and local versions are not release targets",
                "name a release like '2.6' or '2.6.0'",
            )
        minor = minor_of(value)
        if compat.release(minor) is None:
            table.error(key, f"unknown torch version {value!r}", add_hint)
        pin = value if len(version.release) >= 3 else None
        return TorchSelector(value, (minor,), pin)
    try:
        spec = SpecifierSet(value)
    except InvalidSpecifier:
        table.error(
            key,
            f"{value!r} is neither a torch version nor a version specifier",
            "use e.g. '2.6', '2.6.0' or '>=2.6,<2.9'",
        )
    selected = tuple(
        r.minor
        for r in compat.releases
        if spec.contains(Version(r.build_version), prereleases=True)
    )
    if not selected:
        table.error(key, f"{value!r} selects no torch release", add_hint)
    return TorchSelector(value, selected)


def _backend(table: Table, key: str | int, text: str, compat: CompatTable) -> BackendSelector:
    value = text.strip().lower()
    if value in ("cpu", "cuda", "rocm"):
        return BackendSelector(value, value)
    try:
        pinned = Backend.parse(value)
    except InvalidBackend as exc:
        suggestion = did_you_mean(value, ["cpu", "cuda", "rocm"])
        table.error(key, str(exc), suggestion)
    assert pinned.version is not None
    known = (
        [c.version for c in compat.cuda]
        if pinned.kind == "cuda"
        else [r.version for r in compat.rocm]
    )
    if minor_of(pinned.version) not in known:
        name = "CUDA" if pinned.kind == "cuda" else "ROCm"
        table.error(
            key,
            f"{name} {pinned.version} ({value}) is not in the compatibility table",
            f"known {name} versions: {', '.join(known)}",
        )
    return BackendSelector(value, pinned.kind, pinned)


def _abi(table: Table) -> tuple[bool, ...]:
    value = table.data.get("cxx11_abi", "both")
    if isinstance(value, bool):
        return (value,)
    if value == "both":
        return (True, False)
    table.error("cxx11_abi", f'must be true, false or "both", got {describe(value)}')


def _python(table: Table, key: str | int, text: str) -> str:
    value = text.strip().lower()
    if value == "abi3" or _PYTHON.fullmatch(value):
        return value
    table.error(
        key,
        f"unknown Python {text!r}",
        "use 'abi3' (one wheel for every CPython >= 3.9) or a version like '3.11'",
    )


def _arch(table: Table, key: str | int, text: str) -> str:
    value = text.strip().lower()
    if value in ARCHES:
        return value
    hint = (
        f"did you mean '{_ARCH_ALIASES[value]}'?"
        if value in _ARCH_ALIASES
        else did_you_mean(value, ARCHES)
    )
    table.error(key, f"unknown arch {text!r}", hint or f"use one of {', '.join(ARCHES)}")


def _toolkit_filter(table: Table) -> ToolkitFilter:
    value = table.data.get("toolkits", "all")
    if value in ("all", "default"):
        return ToolkitFilter(value, (), value)
    texts: tuple[str, ...] = table.string_list("toolkits")
    specs = []
    for text in texts:
        try:
            try:
                version = Version(text)
            except InvalidVersion:
                specs.append(SpecifierSet(text))
            else:
                if version.pre or version.dev or version.post or version.local:
                    raise InvalidSpecifier(text)
                specs.append(SpecifierSet(f"=={text}.*" if text.count(".") == 1 else f"=={text}"))
        except InvalidSpecifier:
            table.error(
                "toolkits",
                f"{text!r} is neither a toolkit version nor a specifier",
                'use "all", "default" or e.g. ["12.4", ">=12.8"]',
            )
    if not specs:
        table.error("toolkits", "is empty", 'use "all", "default" or a list of versions')
    return ToolkitFilter("listed", tuple(specs), ", ".join(texts))


def _cuda_arch_list(table: Table, key: str) -> tuple[str, ...] | None:
    if not table.has(key):
        return None
    value = table.data[key]
    items: tuple[str, ...] = (
        tuple(a for a in value.replace(" ", ";").split(";") if a)
        if isinstance(value, str)
        else table.string_list(key)
    )
    if not items:
        table.error(key, "is empty", 'e.g. arch_list = "8.0;9.0;12.0+PTX"')
    for arch in items:
        if not _CUDA_ARCH.fullmatch(arch):
            table.error(
                key,
                f"{arch!r} is not a CUDA compute capability",
                'use the TORCH_CUDA_ARCH_LIST form, e.g. "8.0;9.0a;12.0+PTX"',
            )
    return items


def _cuda(table: Table) -> CudaSettings:
    table.reject_unknown(MATRIX_FILE.section("cuda").names())
    return CudaSettings(
        _toolkit_filter(table),
        _cuda_arch_list(table, "arch_list"),
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
    return RocmSettings(_toolkit_filter(table), _gfx_targets(table, "gfx_targets"))


def _selector(
    entry: Table, number: int, compat: CompatTable, allowed: set[str], name: str
) -> Selector:
    entry.reject_unknown(allowed)
    if not any(entry.has(k) for k in SELECTOR_KEYS):
        entry.error(
            None,
            f"[[{name}]] entry names no axis",
            f"give at least one of {', '.join(sorted(SELECTOR_KEYS))}",
        )
    abi = entry.data.get("cxx11_abi")
    if abi is not None and not isinstance(abi, bool):
        entry.error("cxx11_abi", f"must be true or false, got {describe(abi)}")
    torch = entry.string("torch")
    backend = entry.string("backend")
    python = entry.string("python")
    arch = entry.string("arch")
    return Selector(
        number=number,
        line=entry.line,
        torch=None if torch is None else _torch(entry, "torch", torch, compat),
        backend=None if backend is None else _backend(entry, "backend", backend, compat),
        cxx11_abi=abi,
        python=None if python is None else _python(entry, "python", python),
        arch=None if arch is None else _arch(entry, "arch", arch),
    )


def _include(entry: Table, number: int, compat: CompatTable) -> Include:
    match = _selector(entry, number, compat, SELECTOR_KEYS | INCLUDE_SETTING_KEYS, "include")
    if match.torch is None or len(match.torch.releases) != 1:
        entry.error("torch", "an [[include]] entry needs one torch version", 'e.g. torch = "2.6"')
    if match.backend is None or match.backend.pinned is None and match.backend.kind != "cpu":
        entry.error(
            "backend",
            "an [[include]] entry needs a pinned build",
            'e.g. backend = "cu124" or "cpu"',
        )
    env = entry.string_map("env")
    arch_list = _cuda_arch_list(entry, "arch_list")
    return Include(
        match=match,
        settings=BuildSettings(
            extra_cflags=entry.string_list("extra_cflags", ()),
            extra_cuda_cflags=entry.string_list("extra_cuda_cflags", ()),
            env=tuple(sorted(env.items())),
        ),
        arch_list=arch_list,
    )


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
