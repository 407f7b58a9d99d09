"""matrix.toml's axes: the [matrix] lists (torch, backends, cxx11_abi, python, arch) and the
[[include]] / [[exclude]] entries that name values of them, each read into a typed selector; the
[cuda] / [rocm] toolkit filters and CUDA arch lists that narrow them. Every mistake is named with
file, key and line (plan/tomlsource.py); torch versions and pinned builds are resolved against the
compatibility table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from wheelfactory._runtime._fit import normalize_machine
from wheelfactory.plan.compat import CompatTable, TorchRelease
from wheelfactory.plan.identity import ARCHES, Backend, BuildSettings, InvalidBackend
from wheelfactory.plan.matrix_schema import CUDA_ARCH, INCLUDE_SETTING_KEYS, SELECTOR_KEYS
from wheelfactory.plan.tomlsource import Table, describe, did_you_mean
from wheelfactory.plan.versions import minor_of

_PYTHON = re.compile(r"^3\.\d{1,2}$", re.ASCII)
_CUDA_ARCH = re.compile(CUDA_ARCH)


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


def torch_axis(axes: Table, compat: CompatTable) -> tuple[TorchSelector, ...]:
    """[matrix] torch; default: every release of the table."""
    default = (">=" + compat.releases[0].minor,)
    return tuple(_torch(axes, "torch", text, compat) for text in _nonempty(axes, "torch", default))


def backend_axis(axes: Table, compat: CompatTable) -> tuple[BackendSelector, ...]:
    return tuple(
        _backend(axes, "backends", text, compat) for text in _unique(axes, "backends", ("cpu",))
    )


def python_axis(axes: Table) -> tuple[str, ...]:
    return tuple(_python(axes, "python", text) for text in _unique(axes, "python", ("abi3",)))


def arch_axis(axes: Table) -> tuple[str, ...]:
    return tuple(_arch(axes, "arch", text) for text in _unique(axes, "arch", ("x86_64",)))


def include_entries(root: Table, compat: CompatTable) -> tuple[Include, ...]:
    entries = enumerate(root.tables("include"), start=1)
    return tuple(_include(entry, number, compat) for number, entry in entries)


def exclude_entries(root: Table, compat: CompatTable) -> tuple[Selector, ...]:
    entries = enumerate(root.tables("exclude"), start=1)
    return tuple(
        _selector(entry, number, compat, SELECTOR_KEYS, "exclude") for number, entry in entries
    )


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


def abi_axis(table: Table) -> tuple[bool, ...]:
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
    spelled = normalize_machine(value)  # amd64, arm64: what platform.machine() may say
    hint = f"did you mean '{spelled}'?" if spelled in ARCHES else did_you_mean(value, ARCHES)
    table.error(key, f"unknown arch {text!r}", hint or f"use one of {', '.join(ARCHES)}")


def toolkit_filter(table: Table) -> ToolkitFilter:
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
                line = len(version.release) == 2  # "12.4": every 12.4.x
                specs.append(SpecifierSet(f"=={text}.*" if line else f"=={text}"))
        except InvalidSpecifier:
            table.error(
                "toolkits",
                f"{text!r} is neither a toolkit version nor a specifier",
                'use "all", "default" or e.g. ["12.4", ">=12.8"]',
            )
    if not specs:
        table.error("toolkits", "is empty", 'use "all", "default" or a list of versions')
    return ToolkitFilter("listed", tuple(specs), ", ".join(texts))


def cuda_arch_list(table: Table, key: str) -> tuple[str, ...] | None:
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
    arch_list = cuda_arch_list(entry, "arch_list")
    return Include(
        match=match,
        settings=BuildSettings(
            extra_cflags=entry.string_list("extra_cflags", ()),
            extra_cuda_cflags=entry.string_list("extra_cuda_cflags", ()),
            env=tuple(sorted(env.items())),
        ),
        arch_list=arch_list,
    )
