"""Hugging Face kernel-builder projects (build.toml): built per variant from the unedited tree.

What kernel-builder does with Nix and CMake, done here with torch's own extension builder:

* the extension is ``<package>._<name>_<8 hex>`` (TORCH_EXTENSION_NAME), unique per variant and
  release, so two builds load side by side in one process and the Hub loader can tell them apart;
* ``_ops.py`` is generated into the package (``ops``, ``add_op_namespace_prefix``), as the
  templates write it, and so is ``registration.h`` (the macros the bindings include);
* every compile of a build gets the backend's define (``CPU_KERNEL``, ``CUDA_KERNEL``,
  ``ROCM_KERNEL``), as the templates set it on the extension target;
* each ``[kernel.X]`` unit is compiled with its own flags, includes and archs (its
  ``cuda-capabilities``, else the project's, else the matrix's), then linked with the
  ``[torch] src`` bindings into one library;
* ``python-depends`` become Requires-Dist.

``plan_kernel_builder_stage`` is pure given the project's files; ``KernelBuilderStage.write`` only
copies and writes the staging directory. Planning limits (backends, torch and CUDA bounds) are
``project_constraints`` and prune the plan in plan/constraints.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from wheelfactory._runtime._record import BUILD_RECORD_FILE, BuildRecord
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.constraints import BUILDABLE_BACKENDS, ProjectConstraints
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.torch_pin import TorchRequirement, torch_requires_dist
from wheelfactory.project.bring_your_own import IGNORED
from wheelfactory.project.build_system import GENERATED, GENERATED_PYPROJECT, BuildSystem
from wheelfactory.project.build_toml import (
    DECLARATION,
    KernelBuilderSpec,
    KernelUnit,
    kernel_depends_for,
    load_build_toml,
)
from wheelfactory.project.keys import source_date_epoch, tree_digest
from wheelfactory.project.kind_facts import KERNEL_BUILDER, KindFacts
from wheelfactory.project.noarch import depends_requirements
from wheelfactory.project.stage import cuda_wheels_block
from wheelfactory.project.wheel_checks import WheelChecks
from wheelfactory.support.project_copy import copy_project_file
from wheelfactory.support.project_copy import project_files as copy_rule_files

GENERATED_DIR = "_wheelfactory"  # in the staging copy: registration.h
OPS_MODULE = "_ops.py"
BACKEND_DEFINES = {"cpu": "CPU_KERNEL", "cuda": "CUDA_KERNEL", "rocm": "ROCM_KERNEL"}
COMPILED = {
    "cpu": (".c", ".cc", ".cpp", ".cxx"),
    "cuda": (".c", ".cc", ".cpp", ".cxx", ".cu"),
    "rocm": (".c", ".cc", ".cpp", ".cxx", ".cu", ".hip"),
}
# A kernel-builder dependency the factory can satisfy: torch is in every build environment. The
# CUTLASS and metal-cpp ones come from Nix in kernel-builder; here they are refused, said so.
PROVIDED_DEPENDS = ("torch",)
TORCH_DEFINES_LIMITED_API = Version("2.7")
LIMITED_API = "0x03090000"

# The macros kernel-builder bindings include as "registration.h": the op library named by a
# macro (TORCH_EXTENSION_NAME), and a module init so `import` loads the library.
REGISTRATION_H = """\
// Written by wheelfactory for kernel-builder projects: the macros their bindings include.
#pragma once
#include <Python.h>

#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)

// TORCH_LIBRARY and TORCH_LIBRARY_IMPL paste their first argument: these expand it first, so it
// may be the TORCH_EXTENSION_NAME macro.
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// A module with no methods: importing it runs the library's static op registrations.
#define REGISTER_EXTENSION(NAME)                                                         \\
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)(void) {                                           \\
    static struct PyModuleDef wheelfactory_module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME), \\
                                                     NULL, 0, NULL};                      \\
    return PyModule_Create(&wheelfactory_module);                                        \\
  }
"""


def load_kernel_builder(root: Path) -> KernelBuilderSpec:
    """build.toml, with what this factory cannot build refused now (one line, before any build)."""
    spec = load_build_toml(root)
    stable_target(spec)  # one target, or a one-line error now
    for unit in spec.kernels:
        missing = [d for d in unit.depends if d not in PROVIDED_DEPENDS]
        if missing and unit.backend in BUILDABLE_BACKENDS:
            raise ConfigError(
                f"[kernel.{unit.name}] depends on {', '.join(missing)}, which kernel-builder takes "
                "from Nix and wheelfactory does not provide",
                file=str(root / DECLARATION),
                key=f"kernel.{unit.name}.depends",
                hint="vendor the headers in the project and list them under include",
            )
    return spec


def stable_target(spec: KernelBuilderSpec) -> str | None:
    """``[torch] stable-abi``: the torch release every stable-ABI build targets. A per-backend
    table must name one release for the backends built here: the plan has one target."""
    targets = {
        t
        for b in spec.compiled_backends()
        if b in BUILDABLE_BACKENDS and (t := spec.stable_abi_for(b)) is not None
    }
    if len(targets) > 1:
        raise ConfigError(
            f"stable-abi targets {', '.join(sorted(targets))} for different backends; wheelfactory "
            "plans one stable-ABI target",
            file=str(spec.root / DECLARATION),
            key="torch.stable-abi",
            hint="use one torch release for every backend",
        )
    return targets.pop() if targets else None


def project_constraints(spec: KernelBuilderSpec) -> ProjectConstraints:
    """What build.toml allows a compiled kernel: the backends with compiled units, its torch and
    CUDA bounds, its stable-ABI target. Pure."""
    return _constraints(spec, spec.compiled_backends(), stable_target(spec))


def noarch_constraints(spec: KernelBuilderSpec) -> ProjectConstraints:
    """What build.toml allows a noarch kernel (project/kinds.py): every backend it declares, its
    torch and CUDA bounds; nothing compiled, so no stable-ABI target. Pure."""
    return _constraints(spec, spec.declared_backends(), None)


def _constraints(
    spec: KernelBuilderSpec, backends: Sequence[str], target: str | None
) -> ProjectConstraints:
    stable = spec.torch.stable_abi
    # A per-backend table: the backends it does not name build for each torch release.
    per_backend = (
        None
        if stable is None or stable.every_backend is not None
        else tuple(b for b in backends if spec.stable_abi_for(b) is not None)
    )
    return ProjectConstraints(
        declared_in=str(spec.root / DECLARATION),
        backends=tuple(backends),
        torch=spec.torch_specifier(),
        cuda=spec.cuda_specifier(),
        stable_abi=target,
        stable_abi_backends=per_backend if target else None,
    )


def namespace_for(spec: KernelBuilderSpec, variant: Variant, version: str) -> str:
    """``_<name>_<8 hex>``: per variant and release, not per source (an edit would recompile all)."""
    token = hashlib.sha256(
        f"{spec.general.python_name}\0{variant.id}\0{version}".encode()
    ).hexdigest()[:8]
    return f"_{spec.general.python_name}_{token}"


def ops_module(namespace: str) -> str:
    return (
        f"# Generated by wheelfactory, as kernel-builder generates it: the op namespace of this build.\n"
        f"import torch\n\nfrom . import {namespace}\n\nops = torch.ops.{namespace}\n\n\n"
        f"def add_op_namespace_prefix(op_name: str) -> str:\n"
        f'    """Prefix op by namespace."""\n'
        f'    return f"{namespace}::{{op_name}}"\n'
    )


@dataclass(frozen=True)
class UnitBuild:
    """One ``[kernel.X]`` unit as this variant compiles it."""

    name: str
    sources: tuple[str, ...]  # relative to the staging root
    include_dirs: tuple[str, ...]  # relative to the staging root
    cxx_flags: tuple[str, ...]
    device_flags: tuple[str, ...]  # nvcc (CUDA) or hipcc (ROCm) flags, archs included
    archs: tuple[str, ...]  # what the unit's device code is compiled for ("8.0", "gfx942")


@dataclass(frozen=True)
class KernelBuilderStage:
    spec: KernelBuilderSpec
    # with arch_list = every arch some unit compiles for (what cuobjdump must list)
    variant: Variant
    files: tuple[Path, ...]  # the project's files, relative to its root (staged and hashed)
    namespace: str
    version: str
    requires: tuple[str, ...]  # Requires-Dist: torch and python-depends
    units: tuple[UnitBuild, ...]
    setup_py: str
    record: BuildRecord
    tests: ProjectTests | None = None  # matrix.toml [test]

    @property
    def package(self) -> str:
        return self.spec.general.python_name

    @property
    def kind(self) -> KindFacts:
        return KERNEL_BUILDER

    @property
    def source_date_epoch(self) -> int:
        return source_date_epoch(self.spec.root)

    @property
    def source_root(self) -> Path:
        return self.spec.root

    @property
    def kernel_depends(self) -> tuple[dict[str, object], ...]:
        return kernel_depends_for(self.spec.general.kernel_depends, self.variant.key.backend.kind)

    @property
    def hub_metadata(self) -> None:
        return None  # a compiled wheel

    @property
    def build_system(self) -> BuildSystem:
        return GENERATED

    @property
    def checks(self) -> WheelChecks:
        if self.tests is not None:
            return WheelChecks(
                self.spec.root, self.package, tests=self.tests, op_namespace=self.namespace
            )
        tests = default_tests(self.spec.root)
        return WheelChecks(
            self.spec.root,
            self.package,
            tests=tests,
            op_namespace=self.namespace,
            support_files=hub_test_files(self) if tests and HUB_PLUGIN in tests.command else (),
        )

    def build_env(self) -> dict[str, str]:
        return {}

    def key_material(self) -> object:
        return [
            tree_digest(self.spec.root, self.files),
            self.setup_py,
            self.record.to_json(),
            self.checks.key_material(),
        ]

    def write(self, dest: Path) -> None:
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        declared_in = str(self.spec.root / DECLARATION)
        for rel in self.files:  # inside symlinks as what they point to: the stage is self-contained
            copy_project_file(self.spec.root, rel, dest / rel, declared_in=declared_in)
        (dest / GENERATED_DIR).mkdir(exist_ok=True)
        (dest / GENERATED_DIR / "registration.h").write_text(REGISTRATION_H)
        package = dest / self.spec.python_package
        package.mkdir(parents=True, exist_ok=True)
        (package / OPS_MODULE).write_text(ops_module(self.namespace))
        (package / BUILD_RECORD_FILE).write_text(json.dumps(self.record.to_json(), indent=2) + "\n")
        (dest / "setup.py").write_text(self.setup_py)
        (dest / "pyproject.toml").write_text(GENERATED_PYPROJECT)

    def finish(self, wheel: Path, dest_dir: Path) -> Path:
        return wheel  # the generated setup.py set the version with its local label


# The tests' loader: the Hub tests' kernels.get_kernel(<repo id>) gets this build (project/hub_offline_plugin.py).
HUB_PLUGIN = "wheelfactory_hub_offline"
_USES_KERNELS = re.compile(r"^\s*(?:from\s+kernels\b|import\s+kernels\b)", re.MULTILINE)
_GET_KERNEL = re.compile(
    r"""(?:get_kernel|has_kernel|load_kernel)\(\s*["']([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)["']"""
)


def default_tests(root: Path) -> ProjectTests | None:
    """kernel-builder projects keep pytest tests in ``tests/``: with no [test] table in matrix.toml,
    those run against each wheel (as kernel-builder's own test step runs them). Tests that load the
    kernel through the ``kernels`` package get it, and the offline loader plugin."""
    if not (root / "tests").is_dir():
        return None
    hub = any(_USES_KERNELS.search(text) for text in _test_texts(root))
    plugin = f" -p {HUB_PLUGIN}" if hub else ""
    return ProjectTests(
        command=f"python -m pytest -q -rs -p no:cacheprovider{plugin} {{project}}/tests",
        requires=("pytest", *(("kernels",) if hub else ())),
        sources=("tests",),
        declared_in=f"{DECLARATION} (its tests/ directory)",
    )


def hub_repo_ids(spec: KernelBuilderSpec) -> tuple[str, ...]:
    """The Hub repository ids that are this kernel: build.toml's [general.hub] repo-id, and any
    ``<org>/<name>`` its tests load whose name is the kernel's."""
    found = {spec.general.hub.repo_id} if spec.general.hub.repo_id else set()
    for text in _test_texts(spec.root):
        found.update(
            r for r in _GET_KERNEL.findall(text) if r.split("/", 1)[1] == spec.general.name
        )
    return tuple(sorted(found))


def hub_test_files(stage: KernelBuilderStage) -> tuple[tuple[str, str], ...]:
    """The plugin and its settings: which repository ids are this build, and the metadata.json the
    ``kernels`` loader validates for its variant."""
    from importlib.resources import files

    spec = stage.spec
    settings = {
        "repos": list(hub_repo_ids(spec)),
        "package": stage.package,
        "variant": stage.variant.id,
        "metadata": {
            "id": stage.namespace,
            "name": spec.general.name,
            "version": int(spec.general.version or 0),
            "license": spec.general.license or "unknown",
            "python-depends": [],
            "backend": {"type": stage.variant.key.backend.kind},
        },
    }
    plugin = (
        files("wheelfactory.project").joinpath("hub_offline_plugin.py").read_text(encoding="utf-8")
    )
    return (
        (f"{HUB_PLUGIN}.py", plugin),
        (f"{HUB_PLUGIN}.json", json.dumps(settings, indent=2) + "\n"),
    )


def _test_texts(root: Path) -> list[str]:
    return [
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted((root / "tests").rglob("*.py"))
        if "__pycache__" not in p.parts
    ]


def project_files(root: Path) -> tuple[Path, ...]:
    """The project's files as a build sees them (build outputs, VCS and caches left out), inside
    symlinks followed; what would take a file from outside the project is refused
    (support/project_copy.py): nothing outside the root is read."""
    return tuple(
        copy_rule_files(
            root, ignore=shutil.ignore_patterns(*IGNORED), declared_in=str(root / DECLARATION)
        )
    )


def plan_kernel_builder_stage(
    spec: KernelBuilderSpec,
    variant: Variant,
    *,
    table: CompatTable,
    tests: ProjectTests | None = None,
    torch_requirement: TorchRequirement = "pinned",
) -> KernelBuilderStage:
    backend = variant.key.backend.kind
    declaration = str(spec.root / DECLARATION)
    toolkit = variant.toolkit if backend == "cuda" else None
    units = spec.units_for(backend, toolkit)
    version = str(spec.general.version if spec.general.version is not None else 0)
    full_version = f"{version}+{variant.local_version}"
    namespace = namespace_for(spec, variant, version)
    compiled = COMPILED.get(backend, COMPILED["cpu"])
    unit_builds = tuple(_unit_build(spec, unit, variant, table, compiled) for unit in units)
    # What the library's device code must hold: each unit's archs, and the matrix's where the
    # [torch] bindings have device sources of their own (TORCH_CUDA_ARCH_LIST compiles those).
    binding_device = any(p.suffix in (".cu", ".hip") for p in spec.torch.src)
    archs = (
        ()
        if backend == "cpu"
        else _union(
            variant.arch_list if binding_device else (), [a for u in unit_builds for a in u.archs]
        )
    )
    staged_variant = replace(variant, arch_list=archs)
    requires = (
        torch_requires_dist(variant, torch_requirement),
        *depends_requirements(spec, backend),
    )
    sources = tuple(str(p) for p in spec.torch.src if p.suffix in compiled)
    if not sources:
        raise ConfigError(
            "[torch] src lists no source file to compile (the op registrations)",
            file=declaration,
            key="torch.src",
            hint="list the binding source, e.g. torch-ext/torch_binding.cpp",
        )
    python = variant.key.python
    library = (
        f"{namespace}.abi3.so"
        if python == "abi3"
        else f"{namespace}.cpython-{python.replace('.', '')}-{variant.key.arch}-linux-gnu.so"
    )
    files = project_files(spec.root)
    record = BuildRecord(
        name=spec.general.python_name,
        version=full_version,
        variant=variant.id,
        # A stable-ABI build serves every torch from its target on: the record names the target.
        torch=MajorMinor.parse(
            variant.key.torch if variant.key.stable_abi else variant.torch_version
        ),
        built_with_torch=variant.torch_version,
        backend=backend,
        toolkit=MajorMinor.parse(variant.toolkit) if variant.toolkit else None,
        cxx11_abi=variant.key.cxx11_abi,
        python=python,
        arch=variant.key.arch,
        arch_list=staged_variant.shipped_arch_list,
        namespace=namespace,
        ops=(),
        library=library,
        stable_abi=variant.key.stable_abi,
        source_digest=tree_digest(spec.root, files),
        parts=staged_variant.split_parts,
    )
    setup_py = _setup_py(
        spec,
        staged_variant,
        namespace,
        full_version,
        requires,
        sources,
        unit_builds,
        subpackages(spec, files),
    )
    return KernelBuilderStage(
        spec,
        staged_variant,
        files,
        namespace,
        full_version,
        requires,
        unit_builds,
        setup_py,
        record,
        tests,
    )


def _unit_build(
    spec: KernelBuilderSpec,
    unit: KernelUnit,
    variant: Variant,
    table: CompatTable,
    compiled: tuple[str, ...],
) -> UnitBuild:
    backend = variant.key.backend.kind
    sources = tuple(str(p) for p in unit.src if p.suffix in compiled)
    includes = tuple(str(p) for p in unit.include)
    archs: tuple[str, ...] = ()
    device: list[str] = []
    if backend == "cuda":
        assert variant.toolkit is not None
        toolkit = table.cuda_toolkit(variant.toolkit)
        wanted = unit.cuda_capabilities or spec.general.cuda_capabilities or variant.arch_list
        archs = tuple(a for a in wanted if toolkit.can_compile(a))
        if not archs:
            raise ConfigError(
                f"{variant.id}: CUDA {variant.toolkit} compiles none of [kernel.{unit.name}]'s "
                f"capabilities ({', '.join(wanted)})",
                file=str(spec.root / DECLARATION),
                key=f"kernel.{unit.name}.cuda-capabilities",
                hint=f"CUDA {variant.toolkit} compiles {toolkit.min_arch} to {toolkit.max_arch}",
            )
        device = [*variant.nvcc_defaults(unit.cuda_flags), *unit.cuda_flags, *gencode_flags(archs)]
    elif backend == "rocm":
        archs = unit.rocm_archs or spec.general.rocm_archs or variant.arch_list
        device = [*unit.hip_flags, *(f"--offload-arch={a}" for a in archs)]
    return UnitBuild(unit.name, sources, includes, unit.cxx_flags, tuple(device), archs)


def target_version_macro(torch: str) -> str:
    """``"2.10"`` -> ``0x020a000000000000``: torch's encoding of TORCH_TARGET_VERSION."""
    major, minor = (int(x) for x in torch.split("."))
    return f"0x{major:02x}{minor:02x}000000000000"


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """``("8.0", "9.0a", "12.0+PTX")`` -> nvcc -gencode flags: SASS for each, PTX for ``+PTX``."""
    flags = []
    for arch in archs:
        number = arch.split("+")[0].replace(".", "")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def _union(base: tuple[str, ...], more: list[str]) -> tuple[str, ...]:
    """Every arch once, CUDA ones in compute-capability order (``9.0+PTX`` subsumes ``9.0``), ROCm
    gfx targets by name."""
    chosen: dict[str, str] = {}
    for arch in [*more, *base]:
        number = arch.split("+")[0]
        if number not in chosen or arch.endswith("+PTX"):
            chosen[number] = arch

    def order(arch: str) -> tuple[Version, str]:
        number = arch.split("+")[0].rstrip("af")
        return (Version(number) if number[:1].isdigit() else Version("0"), arch)

    return tuple(sorted(chosen.values(), key=order))


def subpackages(spec: KernelBuilderSpec, files: tuple[Path, ...]) -> tuple[str, ...]:
    """The packages under the Python package that hold Python files (kernels-community relu's
    ``layers/``), dotted: ``relu.layers``; they ship in the wheel too."""
    root = spec.python_package
    found = {
        p.parent.relative_to(root) for p in files if p.suffix == ".py" and p.is_relative_to(root)
    }
    return tuple(sorted(".".join((spec.general.python_name, *d.parts)) for d in found if d.parts))


def _setup_py(
    spec: KernelBuilderSpec,
    variant: Variant,
    namespace: str,
    version: str,
    requires: tuple[str, ...],
    sources: tuple[str, ...],
    units: tuple[UnitBuild, ...],
    subpackages: tuple[str, ...] = (),
) -> str:
    backend = variant.key.backend.kind
    device = backend in ("cuda", "rocm")
    package = spec.general.python_name
    package_dir = str(spec.python_package)
    defines: list[tuple[str, str | None]] = [
        (BACKEND_DEFINES.get(backend, backend.upper() + "_KERNEL"), None)
    ]
    abi3 = variant.key.python == "abi3"
    if variant.key.stable_abi:  # only the stable ABI of the target and older may be used
        defines.append(("TORCH_TARGET_VERSION", target_version_macro(variant.key.torch)))
    if Version(variant.key.torch) < TORCH_DEFINES_LIMITED_API and abi3:
        defines.append(("Py_LIMITED_API", LIMITED_API))
    include_dirs = [*(str(p) for p in spec.torch.include), GENERATED_DIR, "."]
    cxx = [*spec.torch.cxx_flags, *variant.settings.extra_cflags]
    nvcc = (
        [
            *variant.nvcc_defaults(variant.settings.extra_cuda_cflags),
            *variant.settings.extra_cuda_cflags,
        ]
        if device
        else []
    )
    extension = "CUDAExtension" if device else "CppExtension"
    data = [f"*.{ext}" for ext in spec.torch.data_extensions]
    unit_specs = [
        {
            "name": u.name,
            "sources": list(u.sources),
            "include_dirs": list(u.include_dirs),
            "cxx": list(u.cxx_flags),
            "device": list(u.device_flags),
        }
        for u in units
        if u.sources
    ]
    cuda_block = (
        cuda_wheels_block(variant) if backend == "cuda" and variant.toolkit_wheels_home else ""
    )
    return f"""# Generated by wheelfactory for variant {variant.id} of a kernel-builder project. Edit build.toml.
import os

import torch
from setuptools import setup

EXPECTED_TORCH = {variant.torch_version!r}
if torch.__version__.split("+")[0] != EXPECTED_TORCH:
    raise SystemExit("wheelfactory: variant {variant.id} builds against torch==" + EXPECTED_TORCH
                     + " but torch " + torch.__version__ + " is installed in this build environment")
if bool(torch.compiled_with_cxx11_abi()) != {variant.key.cxx11_abi!r}:
    raise SystemExit("wheelfactory: variant {variant.id} needs the other C++ ABI build of torch " + EXPECTED_TORCH)
{cuda_block}
from torch.utils.cpp_extension import BuildExtension, {extension}  # noqa: E402 (reads CUDA_HOME when imported)

HERE = os.path.dirname(os.path.abspath(__file__))
# build.toml [kernel.X] units: each compiled with its own flags, includes and archs, then linked
# with the [torch] src bindings into one library.
UNITS = {json.dumps(unit_specs, indent=4)}


class UnitsBuildExtension(BuildExtension):
    def build_extension(self, ext):
        # By now torch has added its flags (TORCH_EXTENSION_NAME, the C++ ABI) to ext's arguments.
        # Less one, as kernel-builder's CMake build never sets it: TORCH_API_INCLUDE_EXTENSION_H
        # makes <torch/torch.h> include <torch/extension.h> and pybind11, which cannot compile under
        # the Python limited API (Py_LIMITED_API), and the ops are registered with the dispatcher.
        for flags in ext.extra_compile_args.values():
            flags[:] = [f for f in flags if f != "-DTORCH_API_INCLUDE_EXTENSION_H"]
        base = ext.extra_compile_args
        objects = []
        for unit in UNITS:
            objects += self.compiler.compile(
                unit["sources"], output_dir=os.path.join(self.build_temp, "unit-" + unit["name"]),
                macros=ext.define_macros, include_dirs=[os.path.join(HERE, d) for d in unit["include_dirs"]]
                + ext.include_dirs, debug=self.debug, depends=ext.depends,
                extra_postargs={{"cxx": base["cxx"] + unit["cxx"], "nvcc": base.get("nvcc", []) + unit["device"]}})
        ext.extra_objects = list(ext.extra_objects or []) + objects
        super().build_extension(ext)


setup(
    name={spec.general.name!r},
    version={version!r},
    packages={[package, *subpackages]!r},
    package_dir={{{package!r}: {package_dir!r}}},
    package_data={ {package: [BUILD_RECORD_FILE, *data], **{sub: data for sub in subpackages}}!r},
    include_package_data=False,
    python_requires=">=3.9",
    install_requires={list(requires)!r},
    {"license=" + repr(spec.general.license) + "," if spec.general.license else ""}
    ext_modules=[
        {extension}(
            name={package + "." + namespace!r},
            sources={list(sources)!r},
            include_dirs=[os.path.join(HERE, d) for d in {include_dirs!r}],
            define_macros={defines!r},
            extra_compile_args={{"cxx": {cxx!r}, "nvcc": {nvcc!r}}},
            py_limited_api={abi3!r},
        )
    ],
    cmdclass={{"build_ext": UnitsBuildExtension}},
    options={{"bdist_wheel": {{"py_limited_api": "cp39"}}}} if {abi3!r} else {{}},
)
"""
