"""A Hugging Face kernel-builder project's declaration (build.toml), parsed into a typed spec.

This module only reads: it turns build.toml and the tree around it into frozen values and one-line
``ConfigError``s (file, line, key, what to do). Nothing here builds, plans or touches Docker.

Sources read to learn the format (huggingface/kernels unless named otherwise); no code was copied:

* ``kernels-data/src/config/v1.rs``, ``v2.rs``, ``v3.rs``, ``v4.rs``, ``v5.rs`` - one serde schema
  per format, every table ``deny_unknown_fields``;
* ``kernels-data/src/config/compat.rs`` - unversioned documents are tried as v1, then v2, then v3
  (then v4): the first schema that accepts the document wins;
* ``kernels-data/src/config/parse.rs`` - only edition 5 carries a marker (``[general] edition = 5``);
  v4 is upgraded in memory, v1-v3 must be migrated with ``kernel-builder update-build``;
* ``kernels-data/src/config/mod.rs`` - the common model: ``Build.is_noarch()`` is "no
  ``[kernel.*]``", ``Backend`` (cann cpu cuda metal neuron rocm xpu, tpu from edition 5),
  ``TorchAbi`` (one stable-ABI version, or one per backend);
* ``kernels-data/src/config/name.rs`` (kernel names), ``deps.rs`` (``depends`` values),
  ``kernel_deps.rs`` (``kernel-depends`` entries);
* ``docs/source/builder/writing-kernels.md`` - the documented keys; huggingface/kernel-builder
  ``build2cmake/src/config/v1.rs``/``v2.rs`` and real files (kernels-community activation,
  template, rotary; kernels-test only-torch-2.4) for how documents look in the wild.

What each edition changes (the reader's ``edition`` is 1-5; only 5 is written in the file):

1. ``[general]`` holds only ``name``. ``[torch]`` holds ``src``, ``include``, ``pyext`` and
   ``universal = true`` (pure Python: every backend). ``[kernel.X]`` has no ``backend``: a
   ``language`` (``cuda`` default, ``cuda-hipify`` = the same sources also built for ROCm as unit
   ``X_rocm``, ``metal``), ``cuda-capabilities``, ``rocm-archs``, ``depends``, ``include``, ``src``.
   The backends are those of the units. (The upstream converter turns ``metal`` units into CUDA
   ones; here a ``metal`` unit is a Metal unit.)
2. ``[general]`` gains ``universal``, ``cuda-minver``, ``cuda-maxver``, ``hub`` and
   ``python-depends`` (``einops``, ``nvidia-cutlass-dsl``); ``[torch]`` gains ``minver``/``maxver``;
   ``[kernel.X]`` is tagged by ``backend`` (cpu cuda metal rocm xpu) with per-backend keys:
   cuda ``cuda-capabilities``/``cuda-flags``/``cuda-minver``, rocm ``rocm-archs``/``hip-flags``,
   xpu ``sycl-flags``, all ``cxx-flags``.
3. ``[general] backends`` (required) replaces ``universal``; ``version`` and ``license`` appear
   (optional), with ``upstream`` and ``[general.cuda]`` (``minver``/``maxver``/``python-depends``),
   ``[general.xpu]``/``[general.neuron]`` ``python-depends``. ``[torch]`` may be left out: a
   pure-Python (noarch) kernel. (``[tvm-ffi]`` frameworks appear here; they are not torch
   extensions and are refused.)
4. ``version`` and ``license`` are required and exactly one framework table is: ``[torch]`` or
   ``[torch-noarch]`` (empty). ``[general.cuda] capabilities``, ``[general.rocm] archs`` and
   ``[torch] stable-abi`` (a torch version) are new. It is told from 3 by those new keys.
5. ``[general] edition = 5``. ``[general]`` gains ``source``, ``minver`` (kernels release) and
   ``kernel-depends`` (``{repo-id, version|revision}``, also under ``[general.cuda|xpu|neuron]``),
   ``[general.tpu]``, backend ``tpu``; ``[general.rocm]`` and ``[general.cuda] capabilities`` are
   gone (``[torch-noarch]`` takes ``pyext``, ``cuda_capabilities``, ``rocm_archs``); ``[torch]``
   gains ``cxx-flags``, and ``stable-abi`` may be a per-backend table. Torch and CUDA bounds have
   at most two components.

Names: editions 4 and 5 follow ``name.rs`` (``^[a-z][-a-z0-9]*[a-z0-9]$``); the unversioned
formats predate it, and real kernels of that time use ``_`` too, so 1-3 also allow ``_``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.tomlsource import Table, TomlDocument, describe, did_you_mean

DECLARATION = "build.toml"
LATEST_EDITION = 5

# [general] backends, per edition (1 and 2 have none: universal means all of edition 3's).
_GENERAL_BACKENDS = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "xpu")
GENERAL_BACKENDS: dict[int, tuple[str, ...]] = {
    1: _GENERAL_BACKENDS,
    2: _GENERAL_BACKENDS,
    3: _GENERAL_BACKENDS,
    4: _GENERAL_BACKENDS,
    5: tuple(sorted((*_GENERAL_BACKENDS, "tpu"))),
}
# What a [kernel.X] unit may compile for (its ``backend`` tag): the same in every edition.
UNIT_BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu")
DEPENDENCIES = (
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "metal-cpp",
    "sycl_tla",
    "torch",
)
_V2_PYTHON_DEPENDS = ("einops", "nvidia-cutlass-dsl")
_V1_LANGUAGES = ("cuda", "cuda-hipify", "metal")
DEFAULT_PYEXT = ("py", "pyi")

_STRICT_NAME = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]", re.ASCII)
_LEGACY_NAME = re.compile(r"[a-z][-_a-z0-9]*[a-z0-9]", re.ASCII)
_UNIT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", re.ASCII)
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*", re.ASCII)
_CAPABILITY = re.compile(r"[0-9]{1,3}\.[0-9][af]?", re.ASCII)
_GFX = re.compile(r"gfx[0-9a-f]{2,5}(:[a-z]+[+-])*", re.ASCII)
_PYEXT = re.compile(r"[A-Za-z0-9_]+", re.ASCII)
_PY_DEPEND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*", re.ASCII)

_FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")


@dataclass(frozen=True)
class Hub:
    repo_id: str | None = None
    branch: str | None = None


@dataclass(frozen=True)
class KernelDependency:
    """A Hub kernel this one needs at run time (edition 5 ``kernel-depends``)."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    def as_metadata(self) -> dict[str, object]:
        """The entry of a variant's metadata.json ``kernel-depends``, as `kernels` reads it."""
        return {
            "repo-id": self.repo_id,
            **(
                {"version": self.version}
                if self.version is not None
                else {"revision": self.revision}
            ),
        }


def kernel_depends_for(
    declared: tuple[tuple[str, tuple[KernelDependency, ...]], ...], backend: str
) -> tuple[dict[str, object], ...]:
    """The ``kernel-depends`` of one backend's build: those of [general], then the backend's own."""
    return tuple(
        dependency.as_metadata()
        for key, dependencies in declared
        if key in ("", backend)
        for dependency in dependencies
    )


@dataclass(frozen=True)
class General:
    name: str  # as written; python_name is the import name
    version: int | None
    license: str | None
    backends: tuple[str, ...]  # sorted, no duplicates
    python_depends: tuple[str, ...] = ()
    backend_python_depends: tuple[tuple[str, tuple[str, ...]], ...] = ()  # backend -> names
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    cuda_capabilities: tuple[str, ...] = ()  # edition 4 [general.cuda], 5 [torch-noarch]
    rocm_archs: tuple[str, ...] = ()  # edition 4 [general.rocm], 5 [torch-noarch]
    hub: Hub = Hub()
    upstream: str | None = None
    source: str | None = None
    kernels_minver: str | None = None  # edition 5 [general] minver: the oldest kernels release
    kernel_depends: tuple[tuple[str, tuple[KernelDependency, ...]], ...] = ()  # "" = all backends
    universal: bool = False  # editions 1 and 2: pure Python, loadable everywhere

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class StableAbi:
    """``[torch] stable-abi``: one torch version for every backend, or one per backend."""

    every_backend: str | None = None
    per_backend: tuple[tuple[str, str], ...] = ()

    def for_backend(self, backend: str) -> str | None:
        """The stable-ABI torch version a ``backend`` build targets; None: the regular ABI."""
        if self.every_backend is not None:
            return self.every_backend
        return dict(self.per_backend).get(backend)


@dataclass(frozen=True)
class TorchSection:
    src: tuple[Path, ...] = ()  # relative to the project root
    include: tuple[Path, ...] = ()
    pyext: tuple[str, ...] = DEFAULT_PYEXT
    minver: str | None = None
    maxver: str | None = None  # inclusive: "2.8" admits every 2.8.x
    cxx_flags: tuple[str, ...] = ()
    stable_abi: StableAbi | None = None
    present: bool = True  # False: no [torch] table (a noarch kernel, or [torch-noarch])

    @property
    def data_extensions(self) -> tuple[str, ...]:
        """Extensions of the non-Python files the package ships (``pyext`` less py/pyi)."""
        return tuple(ext for ext in self.pyext if ext not in ("py", "pyi"))


@dataclass(frozen=True)
class KernelUnit:
    """One ``[kernel.NAME]`` table: sources compiled for one backend."""

    name: str
    backend: str
    src: tuple[Path, ...]
    depends: tuple[str, ...]
    include: tuple[Path, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelBuilderSpec:
    root: Path  # the directory holding build.toml
    edition: int  # 1-5, see the module docstring
    general: General
    torch: TorchSection
    kernels: tuple[KernelUnit, ...]  # sorted by name

    @property
    def noarch(self) -> bool:
        """No compiled unit: one pure-Python package serves every variant."""
        return not self.kernels

    @property
    def python_package(self) -> Path:
        """The kernel's Python package, relative to root: ``torch-ext/<python name>``."""
        return Path("torch-ext") / self.general.python_name

    def declared_backends(self) -> tuple[str, ...]:
        return self.general.backends

    def compiled_backends(self) -> tuple[str, ...]:
        """Backends at least one unit compiles for, among the declared ones."""
        return tuple(b for b in self.general.backends if self.units_for(b))

    def units_for(self, backend: str, cuda: str | Version | None = None) -> tuple[KernelUnit, ...]:
        """The units a ``backend`` build compiles; with ``cuda`` (the toolkit version), CUDA units
        whose ``cuda-minver`` is newer are left out, as kernel-builder does."""
        if backend not in self.general.backends:
            return ()
        toolkit = Version(str(cuda)) if cuda is not None else None
        return tuple(
            unit
            for unit in self.kernels
            if unit.backend == backend
            and (
                toolkit is None or unit.cuda_minver is None or Version(unit.cuda_minver) <= toolkit
            )
        )

    def torch_specifier(self) -> SpecifierSet:
        """``[torch] minver``/``maxver`` as a specifier (maxver inclusive of its patch releases)."""
        return bounds_specifier(self.torch.minver, self.torch.maxver)

    def cuda_specifier(self) -> SpecifierSet:
        """The CUDA toolkit bounds (``[general.cuda]``; edition 2 ``cuda-minver``/``cuda-maxver``)."""
        return bounds_specifier(self.general.cuda_minver, self.general.cuda_maxver)

    def stable_abi_for(self, backend: str) -> str | None:
        return None if self.torch.stable_abi is None else self.torch.stable_abi.for_backend(backend)

    def files_for(self, backend: str) -> tuple[Path, ...]:
        """Every file a ``backend`` build reads, relative to root: the Python package, the torch
        binding sources and the sources of the units for that backend. Headers reached only through
        include directories are left to the caller (they may be the whole root, ``include = ["."]``)."""
        files: set[Path] = set(self.torch.src)
        package = self.root / self.python_package
        files.update(
            p.relative_to(self.root)
            for p in package.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
        for unit in self.units_for(backend):
            files.update(unit.src)
        return tuple(sorted(files))


def bounds_specifier(minver: str | None, maxver: str | None) -> SpecifierSet:
    """``("2.5", "2.8")`` -> ``>=2.5,<2.9``: an inclusive maximum admits its later components."""
    parts = []
    if minver is not None:
        parts.append(f">={minver}")
    if maxver is not None:
        numbers = [int(n) for n in maxver.split(".")]
        numbers[-1] += 1
        parts.append("<" + ".".join(str(n) for n in numbers))
    return SpecifierSet(",".join(parts))


def is_kernel_builder_project(path: Path) -> bool:
    return (path / DECLARATION).is_file()


def load_build_toml(root: Path) -> KernelBuilderSpec:
    if not (root / DECLARATION).is_file():
        raise ConfigError(
            "file not found",
            file=str(root / DECLARATION),
            hint="a kernel-builder project has build.toml at its root",
        )
    doc = TomlDocument.load(root / DECLARATION)
    return parse_build_toml(doc, root)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def detect_edition(doc: TomlDocument) -> int:
    """Which format a document is written in, decided from its keys the way kernel-builder's
    try-v1-then-v2-then-v3-then-v4 order decides it; errors in the values come later, from the
    parser of that edition, so that they name the key."""
    top = doc.root()
    general = top.table("general")
    if general.has("edition"):
        edition = general.data["edition"]
        if isinstance(edition, bool) or not isinstance(edition, int):
            general.error(
                "edition",
                f"must be an integer, got {describe(edition)}",
                f"write edition = {LATEST_EDITION}",
            )
        if edition != LATEST_EDITION:
            general.error(
                "edition",
                f"edition {edition} is not one this reader knows",
                f"editions 1-4 are unmarked; the only marked edition is {LATEST_EDITION}",
            )
        return LATEST_EDITION
    if not general.has("backends"):
        if {"version", "license", "upstream", "cuda", "neuron", "xpu"} & set(general.data):
            return 3  # a later format missing its required backends: say that, not "unknown key"
        legacy_v2 = {"universal", "cuda-minver", "cuda-maxver", "hub", "python-depends"}
        units = top.data.get("kernel")
        tagged = isinstance(units, dict) and any(
            isinstance(u, dict) and "backend" in u for u in units.values()
        )
        return 2 if tagged or legacy_v2 & set(general.data) else 1
    cuda = general.data.get("cuda")
    torch = top.data.get("torch")
    if (
        "torch-noarch" in top.data
        or "rocm" in general.data
        or (isinstance(cuda, dict) and "capabilities" in cuda)
        or (isinstance(torch, dict) and "stable-abi" in torch)
    ):
        return 4
    return 3


def parse_build_toml(doc: TomlDocument, root: Path) -> KernelBuilderSpec:
    edition = detect_edition(doc)
    reader = _Reader(doc, root, edition)
    return reader.spec()


class _Reader:
    def __init__(self, doc: TomlDocument, root: Path, edition: int) -> None:
        self.doc = doc
        self.root = root
        self.edition = edition
        self.top = doc.root()

    def spec(self) -> KernelBuilderSpec:
        top, edition = self.top, self.edition
        allowed_top = (
            {"general", "kernel", "torch"}
            | ({"tvm-ffi"} if edition >= 3 else set())
            | ({"torch-noarch"} if edition >= 4 else set())
        )
        if top.has("edition"):
            top.error(
                "edition",
                "belongs in [general]",
                f"move it under [general] (edition = {LATEST_EDITION}), or drop it for editions 1-4",
            )
        top.reject_unknown(allowed_top)
        if not top.has("general"):
            top.error("general", "is required", 'start the file with [general] and name = "..."')
        if top.has("tvm-ffi"):
            top.error(
                "tvm-ffi",
                "tvm-ffi kernels are not torch extensions; this factory builds "
                "torch extensions only",
                "describe the kernel with a [torch] table",
            )
        frameworks = [name for name in _FRAMEWORKS if top.has(name)]
        if len(frameworks) > 1:
            top.error(
                frameworks[1],
                f"[{frameworks[0]}] and [{frameworks[1]}] are both given",
                "keep one framework table",
            )
        kernels = self._kernels()
        if edition <= 2 and not top.has("torch"):
            top.error(
                "torch",
                f"is required in this format (edition {edition})",
                "add [torch] with the binding sources",
            )
        if edition >= 4 and not frameworks:
            top.error(
                "torch",
                f"is required in edition {edition}: [torch] or [torch-noarch]",
                "add [torch] with the binding sources, or an empty [torch-noarch]",
            )
        if kernels and not top.has("torch"):
            top.table("kernel").error(
                next(iter(top.table("kernel").data)),
                "compiled units need a [torch] table",
                "add [torch] with the binding sources (src = [...])",
            )
        torch, universal = self._torch()
        general = self._general(kernels, universal)
        self._python_package(general)
        return KernelBuilderSpec(
            root=self.root,
            edition=edition,
            general=general,
            torch=torch,
            kernels=tuple(sorted(kernels, key=lambda u: u.name)),
        )

    # ---- [general] ------------------------------------------------------------------------

    def _general(self, kernels: list[KernelUnit], universal_v1: bool) -> General:
        edition = self.edition
        general = self.top.table("general")
        allowed = {
            1: {"name"},
            2: {"name", "universal", "cuda-minver", "cuda-maxver", "hub", "python-depends"},
            3: {
                "name",
                "version",
                "license",
                "upstream",
                "backends",
                "cuda",
                "hub",
                "neuron",
                "python-depends",
                "xpu",
            },
            4: {
                "name",
                "version",
                "license",
                "upstream",
                "backends",
                "cuda",
                "hub",
                "neuron",
                "python-depends",
                "rocm",
                "xpu",
            },
            5: {
                "name",
                "version",
                "edition",
                "license",
                "upstream",
                "source",
                "minver",
                "backends",
                "cuda",
                "hub",
                "kernel-depends",
                "neuron",
                "python-depends",
                "tpu",
                "xpu",
            },
        }[edition]
        general.reject_unknown(allowed)
        name = self._required_string(general, "name", 'e.g. name = "activation"')
        pattern = _STRICT_NAME if edition >= 4 else _LEGACY_NAME
        if not pattern.fullmatch(name):
            allowed_chars = "lower-case letters, digits and '-'" + (
                " or '_'" if edition < 4 else ""
            )
            general.error(
                "name",
                f"{name!r} is not a kernel name: {allowed_chars}, starting with a "
                "letter, ending with a letter or digit",
                'e.g. name = "flash-attention"',
            )

        version = license_ = None
        if edition >= 3:
            version = self._version_number(general, required=edition >= 4)
            license_ = general.string("license")
            if license_ is None and edition >= 4:
                general.error(
                    "license",
                    f"is required in edition {edition}",
                    'e.g. license = "apache-2.0" (a Hub license identifier)',
                )
            if license_ is not None and not license_.strip():
                general.error("license", "is empty", 'e.g. license = "apache-2.0"')

        universal = universal_v1
        cuda_minver = cuda_maxver = None
        backend_depends: list[tuple[str, tuple[str, ...]]] = []
        kernel_depends: list[tuple[str, tuple[KernelDependency, ...]]] = []
        cuda_capabilities: tuple[str, ...] = ()
        rocm_archs: tuple[str, ...] = ()
        if edition == 2:
            universal = general.boolean("universal", False)
            cuda_minver = self._version(general, "cuda-minver")
            cuda_maxver = self._version(general, "cuda-maxver")
        if edition <= 2:
            backends = (
                tuple(GENERAL_BACKENDS[edition])
                if universal
                else tuple(sorted({unit.backend for unit in kernels}))
            )
        else:
            backends = self._backends(general)
            sub_keys = {
                "cuda": {"minver", "maxver", "python-depends"},
                "xpu": {"python-depends"},
                "neuron": {"python-depends"},
                "rocm": {"archs"},
                "tpu": {"python-depends"},
            }
            if edition == 4:
                sub_keys["cuda"].add("capabilities")
            if edition == 5:
                for key in ("cuda", "xpu", "neuron"):
                    sub_keys[key].add("kernel-depends")
            for backend in sorted(sub_keys):
                if backend not in allowed or not general.has(backend):
                    continue
                sub = general.table(backend)
                sub.reject_unknown(sub_keys[backend])
                depends = self._python_depends(sub)
                if depends:
                    backend_depends.append((backend, depends))
                if sub.has("kernel-depends"):
                    kernel_depends.append((backend, self._kernel_depends(sub)))
                if backend == "cuda":
                    digits = 2 if edition == 5 else None
                    cuda_minver = self._version(sub, "minver", digits)
                    cuda_maxver = self._version(sub, "maxver", digits)
                    cuda_capabilities = self._capabilities(sub, "capabilities")
                if backend == "rocm":
                    rocm_archs = self._archs(sub, "archs")
        if edition == 5 and self.top.has("torch-noarch"):
            noarch = self.top.table("torch-noarch")
            cuda_capabilities = self._capabilities(noarch, "cuda_capabilities")
            rocm_archs = self._archs(noarch, "rocm_archs")
        if cuda_minver and cuda_maxver and Version(cuda_minver) > Version(cuda_maxver):
            key = "cuda-maxver" if edition == 2 else "cuda"
            general.error(key, f"the CUDA maximum {cuda_maxver} is below the minimum {cuda_minver}")

        hub = Hub()
        if general.has("hub"):
            table = general.table("hub")
            table.reject_unknown({"repo-id", "branch"})
            repo_id = table.string("repo-id")
            if repo_id is not None and not _REPO_ID.fullmatch(repo_id):
                table.error(
                    "repo-id",
                    f"{repo_id!r} is not a Hub repository id",
                    'e.g. repo-id = "my-org/activation"',
                )
            branch = table.string("branch")
            if branch is not None and not _REVISION.fullmatch(branch):
                table.error("branch", f"{branch!r} is not a branch name", 'e.g. branch = "v1"')
            hub = Hub(repo_id=repo_id, branch=branch)

        python_depends = self._python_depends(general)
        if edition == 2:
            for depend in python_depends:
                if depend not in _V2_PYTHON_DEPENDS:
                    general.error(
                        "python-depends",
                        f"{depend!r} is not a dependency this format knows",
                        did_you_mean(depend, _V2_PYTHON_DEPENDS)
                        or f"known: {', '.join(_V2_PYTHON_DEPENDS)}",
                    )
        if general.has("kernel-depends"):
            kernel_depends.insert(0, ("", self._kernel_depends(general)))

        return General(
            name=name,
            version=version,
            license=license_,
            backends=backends,
            python_depends=python_depends,
            backend_python_depends=tuple(backend_depends),
            cuda_minver=cuda_minver,
            cuda_maxver=cuda_maxver,
            cuda_capabilities=cuda_capabilities,
            rocm_archs=rocm_archs,
            hub=hub,
            upstream=self._url(general, "upstream"),
            source=self._url(general, "source"),
            kernels_minver=self._version(general, "minver", 3) if edition == 5 else None,
            kernel_depends=tuple(kernel_depends),
            universal=universal,
        )

    def _backends(self, general: Table) -> tuple[str, ...]:
        known = GENERAL_BACKENDS[self.edition]
        if not general.has("backends"):
            general.error(
                "backends", "is required", f'e.g. backends = ["cuda"]; known: {", ".join(known)}'
            )
        backends = general.string_list("backends", allow_scalar=False)
        if not backends:
            general.error(
                "backends", "names no backend", f"list one or more of: {', '.join(known)}"
            )
        for backend in backends:
            if backend not in known:
                general.error(
                    "backends",
                    f"unknown backend {backend!r}",
                    did_you_mean(backend, known) or f"known: {', '.join(known)}",
                )
        if len(set(backends)) != len(backends):
            general.error("backends", "names a backend twice")
        return tuple(sorted(backends))

    def _version_number(self, general: Table, *, required: bool) -> int | None:
        if not general.has("version"):
            if required:
                general.error(
                    "version",
                    f"is required in edition {self.edition}",
                    "e.g. version = 1 (the kernel's major version)",
                )
            return None
        value = general.integer("version")
        if value < 0 or value > 2**32:
            general.error(
                "version", f"must be a whole number from 0, got {value}", "e.g. version = 1"
            )
        return int(value)

    def _python_depends(self, table: Table) -> tuple[str, ...]:
        depends: tuple[str, ...] = table.string_list("python-depends", (), allow_scalar=False)
        for depend in depends:
            if not _PY_DEPEND.fullmatch(depend):
                table.error(
                    "python-depends", f"{depend!r} is not a dependency name", 'e.g. "einops"'
                )
        return depends

    def _kernel_depends(self, table: Table) -> tuple[KernelDependency, ...]:
        out = []
        for entry in table.tables("kernel-depends"):
            entry.reject_unknown({"repo-id", "version", "revision"})
            repo_id = self._required_string(
                entry, "repo-id", 'e.g. repo-id = "kernels-community/activation"'
            )
            if not _REPO_ID.fullmatch(repo_id):
                entry.error("repo-id", f"{repo_id!r} is not a Hub repository id")
            has_version, has_revision = entry.has("version"), entry.has("revision")
            if has_version == has_revision:
                entry.error(
                    None,
                    "needs exactly one of version and revision",
                    'e.g. { repo-id = "org/kernel", version = 1 }',
                )
            version = entry.integer("version")
            if version is not None and version < 0:
                entry.error("version", f"must be a whole number from 0, got {version}")
            revision = entry.string("revision")
            if revision is not None and not _REVISION.fullmatch(revision):
                entry.error("revision", f"{revision!r} is not a revision")
            out.append(KernelDependency(repo_id=repo_id, version=version, revision=revision))
        return tuple(out)

    def _url(self, table: Table, key: str) -> str | None:
        value = table.string(key)
        if value is not None and (not re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+", value, re.ASCII)):
            table.error(
                key, f"{value!r} is not a URL", f'e.g. {key} = "https://example.org/org/repo"'
            )
        return None if value is None else str(value)

    # ---- [torch] / [torch-noarch] ----------------------------------------------------------

    def _torch(self) -> tuple[TorchSection, bool]:
        """The torch section, and edition 1's ``[torch] universal``."""
        edition, top = self.edition, self.top
        if top.has("torch-noarch"):
            noarch = top.table("torch-noarch")
            noarch.reject_unknown(
                {"pyext", "cuda_capabilities", "rocm_archs"} if edition == 5 else set()
            )
            return TorchSection(pyext=self._pyext(noarch), present=False), False
        if not top.has("torch"):
            return TorchSection(present=False), False
        torch = top.table("torch")
        allowed = {
            1: {"include", "pyext", "src", "universal"},
            2: {"include", "minver", "maxver", "pyext", "src"},
            3: {"include", "minver", "maxver", "pyext", "src"},
            4: {"include", "minver", "maxver", "pyext", "src", "stable-abi"},
            5: {"include", "minver", "maxver", "pyext", "src", "stable-abi", "cxx-flags"},
        }[edition]
        torch.reject_unknown(allowed)
        digits = 2 if edition == 5 else None
        minver = self._version(torch, "minver", digits)
        maxver = self._version(torch, "maxver", digits)
        if minver and maxver and Version(minver) > Version(maxver):
            torch.error("maxver", f"the torch maximum {maxver} is below the minimum {minver}")
        section = TorchSection(
            src=self._files(torch, "src"),
            include=self._dirs(torch, "include"),
            pyext=self._pyext(torch),
            minver=minver,
            maxver=maxver,
            cxx_flags=self._flags(torch, "cxx-flags"),
            stable_abi=self._stable_abi(torch),
        )
        return section, bool(torch.boolean("universal", False)) if edition == 1 else False

    def _pyext(self, table: Table) -> tuple[str, ...]:
        if not table.has("pyext"):
            return DEFAULT_PYEXT
        exts: tuple[str, ...] = table.string_list("pyext", allow_scalar=False)
        for ext in exts:
            if not _PYEXT.fullmatch(ext):
                table.error(
                    "pyext", f"{ext!r} is not a file extension", 'write it without the dot: "json"'
                )
        return exts

    def _stable_abi(self, torch: Table) -> StableAbi | None:
        if not torch.has("stable-abi"):
            return None
        value = torch.data["stable-abi"]
        if isinstance(value, dict) and self.edition == 5:
            table = torch.table("stable-abi")
            table.reject_unknown(GENERAL_BACKENDS[5])
            return StableAbi(
                per_backend=tuple(
                    (backend, self._stable_version(table, backend))
                    for backend in sorted(table.data)
                )
            )
        return StableAbi(every_backend=self._stable_version(torch, "stable-abi"))

    def _stable_version(self, table: Table, key: str) -> str:
        value = table.data[key]
        if not isinstance(value, str):
            shape = (
                'a torch version ("2.10") or a table of them per backend'
                if self.edition == 5
                else 'a torch version ("2.10")'
            )
            table.error(key, f"must be {shape}, got {describe(value)}")
        version = self._version(table, key, 2)
        assert version is not None
        if Version(version) < Version("2.10"):
            table.error(
                key, f"torch {version} has no stable ABI", "the stable ABI starts at torch 2.10"
            )
        return version

    # ---- [kernel.*] -----------------------------------------------------------------------

    def _kernels(self) -> list[KernelUnit]:
        units = self.top.table("kernel")
        out: list[KernelUnit] = []
        for name in units.data:
            if not _UNIT_NAME.fullmatch(name):
                units.error(
                    name,
                    "is not a unit name: letters, digits, '_', '-' or '.'",
                    "e.g. [kernel.activation]",
                )
            unit = units.table(name)
            if self.edition == 1:
                out.extend(self._v1_unit(name, unit))
            else:
                out.append(self._unit(name, unit))
        names = [unit.name for unit in out]
        for name in names:
            if names.count(name) > 1:  # only v1's generated "<name>_rocm" can collide
                units.error(
                    name,
                    f"unit {name!r} is given twice (a cuda-hipify unit adds <name>_rocm)",
                    "rename one of them",
                )
        return out

    def _v1_unit(self, name: str, unit: Table) -> list[KernelUnit]:
        unit.reject_unknown(
            {"cuda-capabilities", "rocm-archs", "language", "depends", "include", "src"}
        )
        language = unit.string("language", "cuda")
        if language not in _V1_LANGUAGES:
            unit.error(
                "language",
                f"unknown language {language!r}",
                did_you_mean(language, _V1_LANGUAGES) or f"known: {', '.join(_V1_LANGUAGES)}",
            )
        common: dict[str, Any] = {
            "src": self._unit_sources(unit),
            "depends": self._depends(unit),
            "include": self._dirs(unit, "include"),
        }
        capabilities = self._capabilities(unit, "cuda-capabilities")
        archs = self._archs(unit, "rocm-archs")
        if language == "metal":
            return [KernelUnit(name=name, backend="metal", **common)]
        units = [KernelUnit(name=name, backend="cuda", cuda_capabilities=capabilities, **common)]
        if language == "cuda-hipify":
            units.append(
                KernelUnit(name=f"{name}_rocm", backend="rocm", rocm_archs=archs, **common)
            )
        return units

    def _unit(self, name: str, unit: Table) -> KernelUnit:
        if not unit.has("backend"):
            unit.error("backend", "is required", f"one of: {', '.join(UNIT_BACKENDS)}")
        backend = unit.string("backend")
        if backend not in UNIT_BACKENDS:
            unit.error(
                "backend",
                f"unknown backend {backend!r}",
                did_you_mean(backend, UNIT_BACKENDS) or f"known: {', '.join(UNIT_BACKENDS)}",
            )
        extra = {
            "cuda": {"cuda-capabilities", "cuda-flags", "cuda-minver"},
            "rocm": {"rocm-archs", "hip-flags"},
            "xpu": {"sycl-flags"},
        }.get(backend, set())
        unit.reject_unknown({"backend", "depends", "include", "src", "cxx-flags", *extra})
        cuda_minver = self._version(unit, "cuda-minver", 2 if self.edition == 5 else None)
        return KernelUnit(
            name=name,
            backend=backend,
            src=self._unit_sources(unit),
            depends=self._depends(unit),
            include=self._dirs(unit, "include"),
            cxx_flags=self._flags(unit, "cxx-flags"),
            cuda_capabilities=self._capabilities(unit, "cuda-capabilities"),
            cuda_flags=self._flags(unit, "cuda-flags"),
            cuda_minver=cuda_minver,
            rocm_archs=self._archs(unit, "rocm-archs"),
            hip_flags=self._flags(unit, "hip-flags"),
            sycl_flags=self._flags(unit, "sycl-flags"),
        )

    def _unit_sources(self, unit: Table) -> tuple[Path, ...]:
        if not unit.has("src"):
            unit.error(
                "src", "is required", 'list the unit\'s sources and headers: src = ["x/x.cu"]'
            )
        sources = self._files(unit, "src")
        if not sources:
            unit.error("src", "names no source", "list the unit's sources and headers")
        return sources

    def _depends(self, unit: Table) -> tuple[str, ...]:
        if not unit.has("depends"):
            unit.error("depends", "is required", 'e.g. depends = ["torch"] (or [] for none)')
        depends: tuple[str, ...] = unit.string_list("depends", allow_scalar=False)
        for depend in depends:
            if depend not in DEPENDENCIES:
                unit.error(
                    "depends",
                    f"unknown dependency {depend!r}",
                    did_you_mean(depend, DEPENDENCIES) or f"known: {', '.join(DEPENDENCIES)}",
                )
        return depends

    # ---- values ---------------------------------------------------------------------------

    def _required_string(self, table: Table, key: str, hint: str) -> str:
        value = table.string(key)
        if value is None:
            table.error(key, "is required", hint)
        return str(value)

    def _version(self, table: Table, key: str, digits: int | None = None) -> str | None:
        value = table.string(key)
        if value is None:
            return None
        if not _VERSION.fullmatch(value) or (digits is not None and value.count(".") >= digits):
            shapes = {
                2: '"major.minor", e.g. "2.8"',
                3: '"major.minor.patch" at most, e.g. "0.11.0"',
            }
            shape = shapes.get(digits or 0, 'numbers and dots, e.g. "12.4"')
            table.error(key, f"{value!r} is not a version", f"write {shape}")
        return str(value)

    def _flags(self, table: Table, key: str) -> tuple[str, ...]:
        flags: tuple[str, ...] = table.string_list(key, (), allow_scalar=False)
        for flag in flags:
            if not flag.strip() or "\x00" in flag or "\n" in flag:
                table.error(key, f"{flag!r} is not a compiler flag", "one flag per string")
        return flags

    def _capabilities(self, table: Table, key: str) -> tuple[str, ...]:
        values: tuple[str, ...] = table.string_list(key, (), allow_scalar=False)
        for value in values:
            if not _CAPABILITY.fullmatch(value):
                table.error(
                    key, f"{value!r} is not a CUDA capability", 'e.g. "8.0", "9.0a", "10.0"'
                )
        return values

    def _archs(self, table: Table, key: str) -> tuple[str, ...]:
        values: tuple[str, ...] = table.string_list(key, (), allow_scalar=False)
        for value in values:
            if not _GFX.fullmatch(value):
                table.error(key, f"{value!r} is not a ROCm architecture", 'e.g. "gfx90a", "gfx942"')
        return values

    def _files(self, table: Table, key: str) -> tuple[Path, ...]:
        texts: tuple[str, ...] = table.string_list(key, (), allow_scalar=False)
        return tuple(self._inside(table, key, text, want_dir=False) for text in texts)

    def _dirs(self, table: Table, key: str) -> tuple[Path, ...]:
        texts: tuple[str, ...] = table.string_list(key, (), allow_scalar=False)
        return tuple(self._inside(table, key, text, want_dir=True) for text in texts)

    def _inside(self, table: Table, key: str, text: str, *, want_dir: bool) -> Path:
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
            root = self.root.resolve()
            target = (self.root / path).resolve()
            inside = target == root or root in target.parents
            exists = target.is_dir() if want_dir else target.is_file()
        except (OSError, RuntimeError, ValueError) as exc:  # too long, a symlink loop, ...
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            table.error(
                key, f"{shown} cannot be read ({reason})", f"name a {what} inside the project"
            )
        if not inside:
            table.error(
                key,
                f"{shown} leads outside the project (a symlink to {target})",
                "copy the file into the project instead of linking to it",
            )
        if not exists:
            table.error(
                key,
                f"{what} {shown} does not exist in {self.root}",
                f"create it, or fix the path (relative to {DECLARATION})",
            )
        return path

    def _python_package(self, general: General) -> None:
        package = Path("torch-ext") / general.python_name
        try:
            found = (self.root / package).is_dir()
        except OSError:
            found = False
        if not found:
            self.top.table("general").error(
                "name",
                f"the Python package {package.as_posix()}/ does not exist in {self.root}",
                f"kernel-builder reads the kernel's Python code from torch-ext/{general.python_name}/",
            )


def units_by_backend(spec: KernelBuilderSpec) -> dict[str, tuple[KernelUnit, ...]]:
    """Every declared backend and the units it compiles (empty for a noarch kernel)."""
    return {backend: spec.units_for(backend) for backend in spec.general.backends}


def unit_names(units: Iterable[KernelUnit]) -> tuple[str, ...]:
    return tuple(unit.name for unit in units)
