"""Hugging Face kernel-builder projects (build.toml): built per variant from the unedited tree.

What kernel-builder does with Nix and CMake, done here with torch's own extension builder:

* the extension is ``<package>._<name>_<8 hex>`` (TORCH_EXTENSION_NAME), unique per variant and
  release, so two builds load side by side in one process and the Hub loader can tell them apart;
* ``_ops.py`` is generated into the package (``ops``, ``add_op_namespace_prefix``), as the
  templates write it, and so is ``registration.h`` (the macros the bindings include);
* each ``[kernel.X]`` unit is compiled with its own flags, includes and archs (its
  ``cuda-capabilities``, else the project's, else the matrix's), then linked with the
  ``[torch] src`` bindings into one library, by a generated setup.py
  (project/kernel_builder_setup.py);
* ``python-depends`` become Requires-Dist; the wheel is checked against the project's own tests
  (project/kernel_builder_checks.py).

``plan_kernel_builder_stage`` is pure given the project's files; ``KernelBuilderStage.write`` only
copies and writes the staging directory. Planning limits (backends, torch and CUDA bounds) are
``project_constraints`` and prune the plan in plan/constraints.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from wheelfactory._runtime._record import BUILD_RECORD_FILE, BuildRecord
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.constraints import BUILDABLE_BACKENDS, ProjectConstraints
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.torch_pin import TorchRequirement, torch_requires_dist
from wheelfactory.project.bring_your_own import IGNORED
from wheelfactory.project.build_system import GENERATED_PYPROJECT
from wheelfactory.project.build_toml import (
    DECLARATION,
    KernelBuilderSpec,
    KernelUnit,
    kernel_depends_for,
)
from wheelfactory.project.kernel_builder_checks import wheel_checks
from wheelfactory.project.kernel_builder_setup import (
    GENERATED_DIR,
    UnitBuild,
    registration_h,
    setup_py,
)
from wheelfactory.project.keys import tree_digest
from wheelfactory.project.kind_facts import KERNEL_BUILDER, KindFacts
from wheelfactory.project.noarch import depends_requirements
from wheelfactory.project.stage import CompiledStage, library_file, variant_record
from wheelfactory.project.wheel_checks import WheelChecks
from wheelfactory.support.project_copy import copy_project_file
from wheelfactory.support.project_copy import project_files as copy_rule_files

OPS_MODULE = "_ops.py"
COMPILED = {
    "cpu": (".c", ".cc", ".cpp", ".cxx"),
    "cuda": (".c", ".cc", ".cpp", ".cxx", ".cu"),
    "rocm": (".c", ".cc", ".cpp", ".cxx", ".cu", ".hip"),
}
# A kernel-builder dependency the factory can satisfy: torch is in every build environment. The
# CUTLASS and metal-cpp ones come from Nix in kernel-builder; here they are refused, said so.
PROVIDED_DEPENDS = ("torch",)


def buildable(spec: KernelBuilderSpec) -> KernelBuilderSpec:
    """build.toml's spec, with what this factory cannot build refused now (one line, before any
    build)."""
    root = spec.root
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
class KernelBuilderStage(CompiledStage):
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
    def source_root(self) -> Path:
        return self.spec.root

    @property
    def kernel_depends(self) -> tuple[dict[str, object], ...]:
        return kernel_depends_for(self.spec.general.kernel_depends, self.variant.key.backend.kind)

    @property
    def checks(self) -> WheelChecks:
        return wheel_checks(self.spec, self.variant, self.namespace, self.tests)

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
        (dest / GENERATED_DIR / "registration.h").write_text(registration_h())
        package = dest / self.spec.python_package
        package.mkdir(parents=True, exist_ok=True)
        (package / OPS_MODULE).write_text(ops_module(self.namespace))
        (package / BUILD_RECORD_FILE).write_text(json.dumps(self.record.to_json(), indent=2) + "\n")
        (dest / "setup.py").write_text(self.setup_py)
        (dest / "pyproject.toml").write_text(GENERATED_PYPROJECT)


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
    files = project_files(spec.root)
    record = variant_record(
        staged_variant,
        name=spec.general.python_name,
        version=full_version,
        namespace=namespace,
        ops=(),
        library=library_file(namespace, variant),
        source_digest=tree_digest(spec.root, files),
    )
    setup_text = setup_py(
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
        setup_text,
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
