"""Noarch (pure-Python) kernel-builder projects: one ``py3-none-any`` wheel, and one Hugging Face
layout directory, per backend.

A kernel whose build.toml has no ``[kernel.*]`` table (``spec.noarch``) compiles nothing: its
``torch-ext/<python name>/`` package is shipped as it is, plus a generated ``_ops.py`` that names
the build's own torch op namespace. kernel-builder makes one such build per declared backend; the
``kernels`` loader picks it by directory name. What the names are, as read from the loader
(kernels 0.17, ``variants.py``: ``parse_variant``, ``_check_variants``; ``resolver.py``:
``resolve_local_kernel``; ``importer.py``: ``_import_from_path``; ``_rust.pyi``: ``Metadata``):

* ``build/torch-<backend>/``: a noarch variant, accepted when ``<backend>`` is the backend the
  running torch was built for (CANN is named ``npu`` there), or ``cpu``;
* ``build/torch-universal/``: editions 1-2's ``universal = true`` kernels, accepted everywhere
  and preferred after any backend-specific variant;
* ``<variant>/metadata.json``: ``id`` (the module name the package is imported as), ``name``
  (``^[a-z][-a-z0-9]*[a-z0-9]$``), ``version`` (a whole number), ``license``, ``python-depends``
  (kernel-builder's dependency names, which the loader checks are importable) and ``backend``
  ``{type, archs?}`` (``type`` is one of the backend names: there is no ``universal`` type, so a
  universal build says ``cpu``; nothing selects by it, only the CUDA/ROCm arch check reads it);
* ``<variant>/<python name>/__init__.py``: the package, imported under the metadata's ``id``.

Planning (:func:`plan_noarch`) only reads the project; :func:`write_noarch_wheel` and
:func:`export_noarch_layout` write, each output appearing whole (a temp name, then a rename).
A build goes through the runner like a compiled variant's (``NoarchStage``, whose engine only
writes its wheel: engines/pure_python.py); :func:`unpack_package` is export's way back.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.project.build_toml import DECLARATION, KernelBuilderSpec, kernel_depends_for
from wheelfactory.project.keys import DEFAULT_SOURCE_DATE_EPOCH
from wheelfactory.project.kind_facts import KERNEL_BUILDER_NOARCH, KindFacts
from wheelfactory.support import atomic, paths
from wheelfactory.support.paths import safe_member
from wheelfactory.support.project_copy import checked_file, project_files
from wheelfactory.support.wheel_rewrite import record_hash

UNIVERSAL = "universal"
BUILD_DIR = "build"
METADATA = "metadata.json"
OPS_MODULE = "_ops.py"
WHEEL_TAG = "py3-none-any"
REQUIRES_PYTHON = ">=3.9"
# Fixed zip timestamps: the same project gives the same wheel, byte for byte (1980: zip's epoch).
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_PYTHON_SOURCES = ("py", "pyi")
# The loader's noarch directory name for a build.toml backend, where the two differ
# (kernels variants.py: a CANN system looks for torch-npu).
_VARIANT_BACKEND = {"cann": "npu"}
# kernel-builder's python-depends are its own dependency names; these map to a PyPI distribution
# of another name (kernels python_depends.json). The others are their PyPI name.
DISTRIBUTION_NAMES = {"tvm-ffi": "apache-tvm-ffi", "onednn": "onednn-devel"}
# The other way: the name the kernels loader's python-depends knows a distribution by.
KERNEL_BUILDER_NAMES = {pypi: name for name, pypi in DISTRIBUTION_NAMES.items()}
_HASH_DIGITS = 8
_PYCACHE = shutil.ignore_patterns("__pycache__")

_OPS_TEMPLATE = '''import torch

ops = torch.ops.{ops_name}


def add_op_namespace_prefix(op_name: str):
    """Prefix op by namespace."""
    return f"{ops_name}::{{op_name}}"
'''


@dataclass(frozen=True)
class NoarchBuild:
    """One noarch build: what goes into its wheel and its layout directory."""

    backend: str  # a declared backend, or "universal" (editions 1-2 universal = true)
    variant_name: str  # torch-<backend> (torch-npu for cann), torch-universal
    distribution: str  # the project name as build.toml writes it
    version: str  # PEP 440, normalized: "<build.toml version, 0 when absent>+<backend>"
    ops_name: str  # _<python name>_<hash>: the torch op namespace, and the layout's module id
    requires: tuple[str, ...]  # PEP 508: torch, then the python-depends of this build
    python_depends: tuple[str, ...]  # the same as kernel-builder names them (metadata.json)
    files: tuple[PurePosixPath, ...]  # relative to the package directory, sorted; _ops.py included
    archs: tuple[str, ...] = ()  # [torch-noarch] cuda_capabilities / rocm_archs for this backend

    @property
    def id(self) -> str:
        """Its variant id in dist/manifest.json: the layout directory's name."""
        return self.variant_name

    @property
    def torch_version(self) -> None:
        return None  # any torch its requirement admits: nothing is compiled against one

    @property
    def toolkit(self) -> None:
        return None

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "backend": self.backend,
            "distribution": self.distribution,
            "version": self.version,
            "ops_name": self.ops_name,
            "requires": list(self.requires),
            "python_depends": list(self.python_depends),
            "files": [path.as_posix() for path in self.files],
            "archs": list(self.archs),
        }

    @property
    def wheel_name(self) -> str:
        name = canonicalize_name(self.distribution).replace("-", "_")
        return f"{name}-{self.version}-{WHEEL_TAG}.whl"

    @property
    def dist_info(self) -> str:
        return f"{canonicalize_name(self.distribution).replace('-', '_')}-{self.version}.dist-info"


@dataclass(frozen=True)
class NoarchStage:
    """One noarch build as the runner stages it (project/stage.py Staged): nothing to compile, its
    wheel written whole by its engine (engines/pure_python.py)."""

    build: NoarchBuild
    spec: KernelBuilderSpec

    @property
    def package(self) -> str:
        return self.spec.general.python_name

    @property
    def kind(self) -> KindFacts:
        return KERNEL_BUILDER_NOARCH

    @property
    def source_date_epoch(self) -> int:
        return DEFAULT_SOURCE_DATE_EPOCH  # ZIP_DATE_TIME: the wheel's files are dated 1980

    @property
    def source_root(self) -> Path:
        return self.spec.root

    @property
    def kernel_depends(self) -> tuple[dict[str, object], ...]:
        return ()  # its layout metadata lists them (hub_metadata)

    @property
    def hub_metadata(self) -> dict[str, object]:
        return layout_metadata(self.build, self.spec)

    def key_material(self) -> object:
        """What the wheel is made of: its files' contents and its metadata."""
        return [
            {
                str(path): hashlib.sha256(data).hexdigest()
                for path, data in _contents(self.build, self.spec)
            },
            wheel_metadata(self.build, self.spec),
            self.hub_metadata,
        ]


# --------------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------------


def variant_name_for(backend: str) -> str:
    """The layout directory the ``kernels`` loader looks for: ``torch-<backend>``."""
    return f"torch-{_VARIANT_BACKEND.get(backend, backend)}"


def ops_name_for(spec: KernelBuilderSpec, backend: str) -> str:
    """``_<python name>_<hash>``: a namespace of its own per name, version and backend, so two
    builds loaded in one process never register ops into the same namespace."""
    key = f"{spec.general.name}\0{spec.general.version}\0{backend}".encode()
    return f"_{spec.general.python_name}_{hashlib.sha256(key).hexdigest()[:_HASH_DIGITS]}"


def plan_noarch(spec: KernelBuilderSpec, backends: Sequence[str]) -> tuple[NoarchBuild, ...]:
    """One build per backend in ``backends`` that build.toml declares (in build.toml's sorted
    order); a universal kernel (editions 1-2) gets one ``torch-universal`` build when any is asked
    for. Backends build.toml does not declare are left out. Reads the package's file list."""
    build_toml = str(spec.root / DECLARATION)
    if not spec.noarch:
        units = ", ".join(f"[kernel.{unit.name}]" for unit in spec.kernels)
        raise ConfigError(
            f"not a noarch kernel: it compiles {units}",
            file=build_toml,
            hint="noarch builds are for kernels without [kernel.*] tables",
        )
    asked = set(backends)
    wanted = [backend for backend in spec.general.backends if backend in asked]
    if not wanted:
        return ()
    files = package_files(spec)
    version = spec.general.version if spec.general.version is not None else 0
    if spec.general.universal:
        wanted = [UNIVERSAL]
    builds = []
    for backend in wanted:
        builds.append(
            NoarchBuild(
                backend=backend,
                variant_name=variant_name_for(backend),
                distribution=spec.general.name,
                version=str(Version(f"{version}+{backend}")),
                ops_name=ops_name_for(spec, backend),
                requires=_requirements(spec, backend),
                python_depends=_python_depends(spec, backend),
                files=files,
                archs=_archs(spec, backend),
            )
        )
    return tuple(builds)


def _depends_by_key(spec: KernelBuilderSpec, backend: str) -> list[tuple[str, str]]:
    """(build.toml key, name) for every python-depends entry of a ``backend`` build, first seen first."""
    entries = [("general.python-depends", name) for name in spec.general.python_depends]
    entries += [
        (f"general.{backend}.python-depends", name)
        for name in dict(spec.general.backend_python_depends).get(backend, ())
    ]
    first: dict[str, tuple[str, str]] = {}
    for key, name in entries:
        first.setdefault(name, (key, name))
    return list(first.values())


def _python_depends(spec: KernelBuilderSpec, backend: str) -> tuple[str, ...]:
    return tuple(name for _, name in _depends_by_key(spec, backend))


def _requirements(spec: KernelBuilderSpec, backend: str) -> tuple[str, ...]:
    """PEP 508 requirements: torch (with [torch] minver/maxver), then the python-depends."""
    return tuple(
        dict.fromkeys([f"torch{spec.torch_specifier()}", *depends_requirements(spec, backend)])
    )


def depends_requirements(spec: KernelBuilderSpec, backend: str) -> tuple[str, ...]:
    """A ``backend`` build's python-depends as PEP 508 requirements under their PyPI names (compiled
    and noarch builds alike); an entry that is not a requirement is a ConfigError naming its key."""
    requires = []
    for key, name in _depends_by_key(spec, backend):
        try:
            requirement = Requirement(name)
        except InvalidRequirement:
            raise ConfigError(
                f"{name!r} is not a Python requirement (PEP 508)",
                file=str(spec.root / DECLARATION),
                key=key,
                hint='name a PyPI distribution, e.g. "einops"',
            ) from None
        requirement.name = DISTRIBUTION_NAMES.get(
            canonicalize_name(requirement.name), requirement.name
        )
        requires.append(str(requirement))
    return tuple(dict.fromkeys(requires))


def _archs(spec: KernelBuilderSpec, backend: str) -> tuple[str, ...]:
    return {"cuda": spec.general.cuda_capabilities, "rocm": spec.general.rocm_archs}.get(
        backend, ()
    )


def package_files(spec: KernelBuilderSpec) -> tuple[PurePosixPath, ...]:
    """The files the package ships, relative to ``torch-ext/<python name>``: every .py/.pyi and
    every file with a ``pyext`` extension, never ``__pycache__``, plus ``_ops.py`` (generated).
    A symlink is followed when it stays inside the project; what would take a file from outside
    the project is refused (support/project_copy.py)."""
    package = spec.root / spec.python_package
    if not (package / "__init__.py").is_file():
        raise ConfigError(
            f"{spec.python_package.as_posix()}/__init__.py does not exist",
            file=str(spec.root / DECLARATION),
            key="general.name",
            hint="a noarch kernel's Python package needs an __init__.py",
        )
    extensions = set(_PYTHON_SOURCES) | set(spec.torch.pyext)
    found = {PurePosixPath(OPS_MODULE)}
    declared_in = str(spec.root / DECLARATION)
    for path in project_files(
        spec.root, spec.python_package, ignore=_PYCACHE, declared_in=declared_in
    ):
        relative = PurePosixPath(path.relative_to(spec.python_package).as_posix())
        if relative.suffix[1:] in extensions:
            found.add(relative)
    return tuple(sorted(found))


# --------------------------------------------------------------------------------------------
# Contents
# --------------------------------------------------------------------------------------------


def ops_source(build: NoarchBuild) -> str:
    """The generated ``_ops.py``: the build's op namespace."""
    return _OPS_TEMPLATE.format(ops_name=build.ops_name)


def layout_metadata(build: NoarchBuild, spec: KernelBuilderSpec) -> dict[str, object]:
    """``metadata.json`` of the build's layout directory, as the ``kernels`` loader reads it."""
    backend: dict[str, object] = {"type": "cpu" if build.backend == UNIVERSAL else build.backend}
    if build.archs:
        backend["archs"] = list(build.archs)
    general = spec.general
    metadata: dict[str, object] = {
        "id": build.ops_name,
        "name": general.name.replace("_", "-"),
        "version": general.version if general.version is not None else 0,
        "license": general.license or "unknown",
        "python-depends": list(build.python_depends),
        "backend": backend,
    }
    depends = kernel_depends_for(
        general.kernel_depends, "cpu" if build.backend == UNIVERSAL else build.backend
    )
    if depends:
        metadata["kernel-depends"] = list(depends)
    for key, value in (
        ("upstream", general.upstream),
        ("source", general.source),
        ("kernels-minver", general.kernels_minver),
    ):
        if value is not None:
            metadata[key] = value
    return metadata


def wheel_metadata(build: NoarchBuild, spec: KernelBuilderSpec) -> str:
    """``.dist-info/METADATA`` (core metadata 2.1)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {build.distribution}",
        f"Version: {build.version}",
        f"Summary: {build.distribution} kernel ({build.variant_name}), pure Python",
        f"Requires-Python: {REQUIRES_PYTHON}",
    ]
    if spec.general.license:
        lines.append(f"License: {spec.general.license}")
    lines += [f"Requires-Dist: {requirement}" for requirement in build.requires]
    return "\n".join(lines) + "\n\n"


def wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: wheelfactory\nRoot-Is-Purelib: true\nTag: {WHEEL_TAG}\n"


def _contents(build: NoarchBuild, spec: KernelBuilderSpec) -> Iterator[tuple[PurePosixPath, bytes]]:
    """(path in the package, bytes) for every file of the build, in the plan's order."""
    for relative in build.files:
        if relative == PurePosixPath(OPS_MODULE):
            yield relative, ops_source(build).encode()
            continue
        # Checked again: the tree may have changed since the plan.
        path = checked_file(
            spec.root, spec.python_package / relative, declared_in=str(spec.root / DECLARATION)
        )
        try:
            yield relative, path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{spec.python_package.as_posix()}/{relative} cannot be read "
                f"({exc.strerror or exc})",
                file=str(spec.root / DECLARATION),
            ) from None


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_noarch_wheel(build: NoarchBuild, spec: KernelBuilderSpec, dest_dir: Path) -> Path:
    """``dest_dir/<dist>-<version>-py3-none-any.whl``; returns its path. Entries are sorted (the
    package, then .dist-info with RECORD last) and dated 1980-01-01: reproducible."""
    python_name = spec.general.python_name
    entries = [(f"{python_name}/{relative}", data) for relative, data in _contents(build, spec)]
    entries.sort()
    entries.append((f"{build.dist_info}/METADATA", wheel_metadata(build, spec).encode()))
    entries.append((f"{build.dist_info}/WHEEL", wheel_file().encode()))
    records = [[name, record_hash(data), str(len(data))] for name, data in entries]
    records.append([f"{build.dist_info}/RECORD", "", ""])
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(records)
    entries.append((f"{build.dist_info}/RECORD", text.getvalue().encode()))

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / build.wheel_name
    with (
        atomic.replacing(target, what="the noarch wheel") as partial,
        zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for name, data in entries:
            info = zipfile.ZipInfo(name, ZIP_DATE_TIME)
            info.external_attr, info.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target


def export_noarch_layout(build: NoarchBuild, spec: KernelBuilderSpec, dest: Path) -> Path:
    """``dest/build/<variant>/<python name>/...`` and ``metadata.json``; returns the variant
    directory. It is written under a temp name and renamed into place: a loader finds the old
    directory or the new one (for an instant, none), never half of one."""
    build_dir = dest / BUILD_DIR
    build_dir.mkdir(parents=True, exist_ok=True)
    target = build_dir / build.variant_name
    temp = build_dir / f".{build.variant_name}.tmp-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    try:
        package = temp / spec.general.python_name
        for relative, data in _contents(build, spec):
            path = package / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (temp / METADATA).write_text(json.dumps(layout_metadata(build, spec), indent=2) + "\n")
        atomic.swap_directory(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def unpack_package(wheel: Path, package: str, dest: Path) -> None:
    """The wheel's ``package/`` files into ``dest/package/``; a wheel with a member name that would
    leave ``dest`` (support/paths.py) is refused whole, before anything is written."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        unsafe = [name for name in names if safe_member(name) is None]
        if unsafe:
            raise ConfigError(
                f"member {unsafe[0]!r} is not a path inside the wheel",
                file=str(wheel),
                hint="rebuild it with `wheelfactory build`",
            )
        for member in names:
            relative = safe_member(member)
            if (
                relative is None
                or relative.parts[0] != package
                or member.endswith("/")
                or len(relative.parts) < 2
            ):
                continue
            path = paths.inside(dest, str(relative), what="the member", file=str(wheel))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(member))
