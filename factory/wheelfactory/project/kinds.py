"""Which kind a project is, and what its own declaration does to the plan.

Three kinds: factory-native (kernel.toml), kernel-builder (a Hugging Face build.toml) and
bring-your-own (setup.py / pyproject.toml). ``[project] kind = "auto"`` looks in that order.
"""

from __future__ import annotations

from typing import Literal

from packaging.specifiers import SpecifierSet

from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.constraints import BUILDABLE_BACKENDS, ProjectConstraints, project_expand
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.matrix import Matrix, ProjectConfig
from wheelfactory.project.build_system import BuildSystem, read_build_system
from wheelfactory.project.build_toml import is_kernel_builder_project
from wheelfactory.project.kernel_toml import is_native_project

ProjectKind = Literal["native", "kernel-builder", "setuptools"]


def resolve_kind(config: ProjectConfig) -> ProjectKind:
    if config.kind == "native" or config.kind == "auto" and is_native_project(config.path):
        return "native"
    if config.kind == "kernel-builder" or config.kind == "auto" and is_kernel_builder_project(config.path):
        return "kernel-builder"
    return "setuptools"


def project_constraints(config: ProjectConfig) -> ProjectConstraints | None:
    """build.toml's backends and bounds for a kernel-builder project; a bring-your-own project's
    bounds on torch in its [build-system] requires (a build for another torch would stop at the
    build front end's check); None where nothing declared limits the plan (kernel.toml)."""
    kind = resolve_kind(config)
    if kind == "setuptools":
        return build_system_constraints(read_build_system(config.path))
    if kind != "kernel-builder":
        return None
    from wheelfactory.project import kernel_builder

    return kernel_builder.project_constraints(kernel_builder.load_kernel_builder(config.path))


def build_system_constraints(system: BuildSystem) -> ProjectConstraints | None:
    """A bring-your-own project's bounds on torch in its [build-system] requires; None: none."""
    if not system.torch_specifier:
        return None
    return ProjectConstraints(declared_in=system.declared_in, backends=BUILDABLE_BACKENDS,
                              torch=SpecifierSet(system.torch_specifier), torch_bounds_key="requires")


def project_plan(matrix: Matrix, table: CompatTable) -> Plan:
    """The matrix's plan, less what the project's own declaration rules out (with the reasons)."""
    return project_expand(matrix, table, project_constraints(matrix.project))
