"""Reading build.toml into the typed spec (project/build_toml.py) by the declarations of its edition
(project/build_toml_schema.py): every table is read through what its edition declares for it, so
a key it does not declare is refused (with the nearest declared one) and a value is checked by its
declared rule. What no declaration can say is checked here: paths that exist inside the project,
bounds in order, one framework table, edition 1's hipified units. Every refusal is one
``ConfigError`` line: file, line, key, what to do. Nothing here builds, plans or touches Docker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.toml_model import AnyOf, Section
from wheelfactory.plan.tomlsource import Table, TomlDocument, describe, did_you_mean
from wheelfactory.project.build_toml import (
    DECLARATION,
    DEFAULT_PYEXT,
    General,
    Hub,
    KernelBuilderSpec,
    KernelDependency,
    KernelUnit,
    StableAbi,
    TorchSection,
)
from wheelfactory.project.build_toml_schema import (
    BACKEND,
    EDITION,
    FRAMEWORKS,
    GENERAL_BACKENDS,
    LATEST_EDITION,
    STABLE_ABI_FIRST,
    UNIT_NAME,
    UNIT_TAG,
    UNITS,
    V2_PYTHON_DEPENDS,
    Edition,
    Field,
    detect_edition,
    rule_of,
)


def load_build_toml(root: Path) -> KernelBuilderSpec:
    if not (root / DECLARATION).is_file():
        raise ConfigError(
            "file not found",
            file=str(root / DECLARATION),
            hint="a kernel-builder project has build.toml at its root",
        )
    return parse_build_toml(TomlDocument.load(root / DECLARATION), root)


@dataclass(frozen=True)
class Declared:
    """A table of the document read by its declaration: a key the declaration does not name is
    refused when the table is opened, so one it does not name reads as missing; a required one
    that is missing is refused when read."""

    table: Table
    model: Section

    @classmethod
    def open(cls, table: Table, model: Section) -> Declared:
        table.reject_unknown(model.names())
        return cls(table, model)

    def sub(self, name: str) -> Declared:
        """The table under ``name``, by its declaration."""
        return Declared.open(self.table.table(name), self.model.section(name))

    def has(self, name: str) -> bool:
        return self.table.has(name)

    def error(self, key: str | None, message: str, hint: str | None = None) -> NoReturn:
        self.table.error(key, message, hint)

    def declares(self, name: str) -> bool:
        if name not in self.model.names():
            return False
        key = self.model.key(name)
        if key.required and not self.table.has(name):
            assert isinstance(key, Field), name  # a required key says what to write
            self.table.error(name, f"is required{key.required_in}", key.missing)
        return True

    def text(self, name: str) -> str | None:
        value: str | None = self.table.string(name) if self.declares(name) else None
        if value is not None:
            self._check(name, value)
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        if not self.declares(name):
            return ()
        values: tuple[str, ...] = self.table.string_list(name, (), allow_scalar=False)
        for value in values:
            self._check(name, value)
        return values

    def paths(self, name: str, root: Path, *, want_dir: bool = False) -> tuple[Path, ...]:
        return tuple(_inside(self.table, name, text, root, want_dir) for text in self.texts(name))

    def _check(self, name: str, value: str) -> None:
        rule = rule_of(self.model.key(name).value)
        if rule is None:
            return
        refusal = rule.refusal.format(value=value)
        if rule.choices and value not in rule.choices:
            known = did_you_mean(value, rule.choices) or f"known: {', '.join(rule.choices)}"
            self.table.error(name, refusal, rule.hint or known)
        if rule.pattern is not None and not re.fullmatch(rule.pattern, value):
            self.table.error(name, refusal, rule.hint)


def parse_build_toml(doc: TomlDocument, root: Path) -> KernelBuilderSpec:
    edition = EDITION[detect_edition(doc)]
    if doc.root().has("edition"):
        doc.root().error(
            "edition",
            "belongs in [general]",
            f"move it under [general] (edition = {LATEST_EDITION}), or drop it for editions 1-4",
        )
    top = Declared(doc.root(), edition.document)
    top.table.reject_unknown({*top.model.names(), UNITS})
    top.declares("general")
    if top.has("tvm-ffi"):
        top.error(
            "tvm-ffi",
            "tvm-ffi kernels are not torch extensions; this factory builds torch extensions only",
            "describe the kernel with a [torch] table",
        )
    frameworks = [name for name in FRAMEWORKS if top.has(name)]
    if len(frameworks) > 1:
        top.error(
            frameworks[1],
            f"[{frameworks[0]}] and [{frameworks[1]}] are both given",
            "keep one framework table",
        )
    units = _units(top.table.table(UNITS), edition, root)
    if edition.number <= 2 and not top.has("torch"):
        top.error(
            "torch",
            f"is required in this format (edition {edition.number})",
            "add [torch] with the binding sources",
        )
    if edition.number >= 4 and not frameworks:
        top.error(
            "torch",
            f"is required in edition {edition.number}: [torch] or [torch-noarch]",
            "add [torch] with the binding sources, or an empty [torch-noarch]",
        )
    if units and not top.has("torch"):
        top.table.table(UNITS).error(
            next(iter(top.table.data[UNITS])),
            "compiled units need a [torch] table",
            "add [torch] with the binding sources (src = [...])",
        )
    torch, universal = _torch(top, root)
    general = _general(top, edition.number, units, universal)
    _check_python_package(top.table.table("general"), root, general)
    return KernelBuilderSpec(
        root=root,
        edition=edition.number,
        general=general,
        torch=torch,
        kernels=tuple(sorted(units, key=lambda u: u.name)),
    )


# ---- [general] ------------------------------------------------------------------------------


def _general(top: Declared, edition: int, units: list[KernelUnit], universal: bool) -> General:
    general = top.sub("general")
    name = str(general.text("name"))
    version = _version_number(general)
    license_ = general.text("license")
    if license_ is not None and not license_.strip():
        general.error("license", "is empty", 'e.g. license = "apache-2.0"')
    universal = universal or bool(general.table.boolean("universal", False))
    cuda_minver, cuda_maxver = general.text("cuda-minver"), general.text("cuda-maxver")
    if edition <= 2:
        every = GENERAL_BACKENDS[edition]
        backends = every if universal else tuple(sorted({unit.backend for unit in units}))
    else:
        backends = _backends(general)
    backend_depends: list[tuple[str, tuple[str, ...]]] = []
    kernel_depends: list[tuple[str, tuple[KernelDependency, ...]]] = []
    capabilities: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    # [general.<backend>]: each declares some of these (cuda the bounds, rocm the archs)
    for backend in sorted(general.model.names() & set(GENERAL_BACKENDS[LATEST_EDITION])):
        if not general.has(backend):
            continue
        table = general.sub(backend)
        if depends := table.texts("python-depends"):
            backend_depends.append((backend, depends))
        if table.has("kernel-depends"):
            kernel_depends.append((backend, _kernel_depends(table)))
        cuda_minver = table.text("minver") or cuda_minver
        cuda_maxver = table.text("maxver") or cuda_maxver
        capabilities = table.texts("capabilities") or capabilities
        archs = table.texts("archs") or archs
    if top.has("torch-noarch"):  # edition 5 keeps the archs there
        noarch = Declared(top.table.table("torch-noarch"), top.model.section("torch-noarch"))
        capabilities = noarch.texts("cuda_capabilities") or capabilities
        archs = noarch.texts("rocm_archs") or archs
    if cuda_minver and cuda_maxver and Version(cuda_minver) > Version(cuda_maxver):
        key = "cuda-maxver" if edition == 2 else "cuda"
        general.error(key, f"the CUDA maximum {cuda_maxver} is below the minimum {cuda_minver}")
    hub = _hub(general)
    python_depends = general.texts("python-depends")
    unknown = [d for d in python_depends if d not in V2_PYTHON_DEPENDS] if edition == 2 else []
    if unknown:
        general.error(
            "python-depends",
            f"{unknown[0]!r} is not a dependency this format knows",
            did_you_mean(unknown[0], V2_PYTHON_DEPENDS) or f"known: {', '.join(V2_PYTHON_DEPENDS)}",
        )
    if general.has("kernel-depends"):
        kernel_depends.insert(0, ("", _kernel_depends(general)))
    return General(
        name=name,
        version=version,
        license=license_,
        backends=backends,
        python_depends=python_depends,
        backend_python_depends=tuple(backend_depends),
        cuda_minver=cuda_minver,
        cuda_maxver=cuda_maxver,
        cuda_capabilities=capabilities,
        rocm_archs=archs,
        hub=hub,
        upstream=general.text("upstream"),
        source=general.text("source"),
        kernels_minver=general.text("minver"),
        kernel_depends=tuple(kernel_depends),
        universal=universal,
    )


def _version_number(general: Declared) -> int | None:
    if not general.declares("version") or not general.has("version"):
        return None
    value = int(general.table.integer("version"))
    if not 0 <= value <= 2**32:
        general.error("version", f"must be a whole number from 0, got {value}", "e.g. version = 1")
    return value


def _backends(general: Declared) -> tuple[str, ...]:
    backends = general.texts("backends")
    rule = rule_of(general.model.key("backends").value)
    if not backends and rule is not None:
        known = ", ".join(rule.choices)
        general.error("backends", "names no backend", f"list one or more of: {known}")
    if len(set(backends)) != len(backends):
        general.error("backends", "names a backend twice")
    return tuple(sorted(backends))


def _hub(general: Declared) -> Hub:
    if not general.has("hub"):
        return Hub()
    hub = general.sub("hub")
    return Hub(repo_id=hub.text("repo-id"), branch=hub.text("branch"))


def _kernel_depends(table: Declared) -> tuple[KernelDependency, ...]:
    model = table.model.section("kernel-depends")
    out = []
    for entry in (Declared.open(t, model) for t in table.table.tables("kernel-depends")):
        repo_id = str(entry.text("repo-id"))
        if entry.has("version") == entry.has("revision"):
            entry.error(
                None,
                "needs exactly one of version and revision",
                'e.g. { repo-id = "org/kernel", version = 1 }',
            )
        version = entry.table.integer("version")
        if version is not None and version < 0:
            entry.error("version", f"must be a whole number from 0, got {version}")
        revision = entry.text("revision")
        out.append(KernelDependency(repo_id=repo_id, version=version, revision=revision))
    return tuple(out)


# ---- [torch] / [torch-noarch] ---------------------------------------------------------------


def _torch(top: Declared, root: Path) -> tuple[TorchSection, bool]:
    """The torch section, and edition 1's ``[torch] universal``."""
    if top.has("torch-noarch"):
        return TorchSection(pyext=_pyext(top.sub("torch-noarch")), present=False), False
    if not top.has("torch"):
        return TorchSection(present=False), False
    torch = top.sub("torch")
    minver, maxver = torch.text("minver"), torch.text("maxver")
    if minver and maxver and Version(minver) > Version(maxver):
        torch.error("maxver", f"the torch maximum {maxver} is below the minimum {minver}")
    section = TorchSection(
        src=torch.paths("src", root),
        include=torch.paths("include", root, want_dir=True),
        pyext=_pyext(torch),
        minver=minver,
        maxver=maxver,
        cxx_flags=torch.texts("cxx-flags"),
        stable_abi=_stable_abi(torch),
    )
    return section, bool(torch.table.boolean("universal", False))


def _pyext(table: Declared) -> tuple[str, ...]:
    return table.texts("pyext") if table.has("pyext") else DEFAULT_PYEXT


def _stable_abi(torch: Declared) -> StableAbi | None:
    """One torch release for every backend, or (edition 5) a table of them per backend."""
    if not torch.has("stable-abi"):
        return None
    declared = torch.model.key("stable-abi").value
    options = declared.options if isinstance(declared, AnyOf) else ()
    per_backend = next((option for option in options if isinstance(option, Section)), None)
    if isinstance(torch.table.data["stable-abi"], dict) and per_backend is not None:
        table = Declared.open(torch.table.table("stable-abi"), per_backend)
        targets = tuple(
            (b, _stable_target(table, b, per_backend)) for b in sorted(table.table.data)
        )
        return StableAbi(per_backend=targets)
    return StableAbi(every_backend=_stable_target(torch, "stable-abi", per_backend))


def _stable_target(table: Declared, key: str, per_backend: Section | None) -> str:
    value = table.table.data[key]
    if not isinstance(value, str):
        per = " or a table of them per backend" if per_backend is not None else ""
        shape = f'a torch version ("2.10"){per}'
        table.error(key, f"must be {shape}, got {describe(value)}")
    version = str(table.text(key))
    if Version(version) < Version(STABLE_ABI_FIRST):
        table.error(
            key,
            f"torch {version} has no stable ABI",
            f"the stable ABI starts at torch {STABLE_ABI_FIRST}",
        )
    return version


# ---- [kernel.*] -----------------------------------------------------------------------------


def _units(units: Table, edition: Edition, root: Path) -> list[KernelUnit]:
    out: list[KernelUnit] = []
    for name in units.data:
        if not re.fullmatch(UNIT_NAME, name):
            units.error(
                name,
                "is not a unit name: letters, digits, '_', '-' or '.'",
                "e.g. [kernel.activation]",
            )
        table = units.table(name)
        if edition.number == 1:
            out.extend(_v1_unit(name, Declared.open(table, edition.unit("")), root))
        else:
            backend = str(Declared(table, UNIT_TAG).text(BACKEND.name))
            out.append(_unit(name, backend, Declared.open(table, edition.unit(backend)), root))
    names = [unit.name for unit in out]
    for name in names:
        if names.count(name) > 1:  # only v1's generated "<name>_rocm" can collide
            units.error(
                name,
                f"unit {name!r} is given twice (a cuda-hipify unit adds <name>_rocm)",
                "rename one of them",
            )
    return out


def _v1_unit(name: str, unit: Declared, root: Path) -> list[KernelUnit]:
    """Edition 1: a unit by its language; cuda-hipify is the CUDA unit and its ROCm twin."""
    language = unit.text("language") or "cuda"
    src, depends, include = _unit_files(unit, root)
    capabilities, archs = unit.texts("cuda-capabilities"), unit.texts("rocm-archs")
    if language == "metal":
        return [KernelUnit(name, "metal", src, depends, include)]
    cuda = KernelUnit(name, "cuda", src, depends, include, cuda_capabilities=capabilities)
    if language != "cuda-hipify":
        return [cuda]
    return [cuda, KernelUnit(f"{name}_rocm", "rocm", src, depends, include, rocm_archs=archs)]


def _unit(name: str, backend: str, unit: Declared, root: Path) -> KernelUnit:
    cuda_minver = unit.text("cuda-minver")
    src, depends, include = _unit_files(unit, root)
    return KernelUnit(
        name=name,
        backend=backend,
        src=src,
        depends=depends,
        include=include,
        cxx_flags=unit.texts("cxx-flags"),
        cuda_capabilities=unit.texts("cuda-capabilities"),
        cuda_flags=unit.texts("cuda-flags"),
        cuda_minver=cuda_minver,
        rocm_archs=unit.texts("rocm-archs"),
        hip_flags=unit.texts("hip-flags"),
        sycl_flags=unit.texts("sycl-flags"),
    )


def _unit_files(
    unit: Declared, root: Path
) -> tuple[tuple[Path, ...], tuple[str, ...], tuple[Path, ...]]:
    """A unit's sources (one at least), its dependencies and its include directories."""
    src = unit.paths("src", root)
    if not src:
        unit.error("src", "names no source", "list the unit's sources and headers")
    return src, unit.texts("depends"), unit.paths("include", root, want_dir=True)


# ---- what the project holds -----------------------------------------------------------------


def _inside(table: Table, key: str, text: str, root: Path, want_dir: bool) -> Path:
    """A project path: relative, no '..', resolving (symlinks too) inside root, existing."""
    what = "directory" if want_dir else "file"
    shown = ascii(text) if not text.isprintable() else repr(text)
    if "\x00" in text or not text.strip():
        table.error(key, f"{shown} is not a path", f"name a {what} relative to {DECLARATION}")
    path = Path(text)
    if path.is_absolute() or ".." in path.parts or text.startswith("~"):
        table.error(
            key,
            f"{shown} must be a path inside the project",
            f"name a {what} relative to the directory of {DECLARATION}, without '..'",
        )
    try:
        resolved = root.resolve()
        target = (root / path).resolve()
        inside = target == resolved or resolved in target.parents
        exists = target.is_dir() if want_dir else target.is_file()
    except (OSError, RuntimeError, ValueError) as exc:  # too long, a symlink loop, ...
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        table.error(key, f"{shown} cannot be read ({reason})", f"name a {what} inside the project")
    if not inside:
        table.error(
            key,
            f"{shown} leads outside the project (a symlink to {target})",
            "copy the file into the project instead of linking to it",
        )
    if not exists:
        table.error(
            key,
            f"{what} {shown} does not exist in {root}",
            f"create it, or fix the path (relative to {DECLARATION})",
        )
    return path


def _check_python_package(general: Table, root: Path, spec: General) -> None:
    package = Path("torch-ext") / spec.python_name
    try:
        found = (root / package).is_dir()
    except OSError:
        found = False
    if not found:
        general.error(
            "name",
            f"the Python package {package.as_posix()}/ does not exist in {root}",
            f"kernel-builder reads the kernel's Python code from torch-ext/{spec.python_name}/",
        )
