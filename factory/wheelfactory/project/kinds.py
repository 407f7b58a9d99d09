"""The project kinds: one table, consulted once per build, as cibuildwheel's platforms/__init__.py
chooses a platform module. Nothing outside this module and project/kind_facts.py asks which kind
a project is (tests/project/test_kinds_table.py checks it): the session loads the project through
its kind, the stages carry their kind's facts, and verify/ and engines/ read those.

=====================  ===============================  ============================================
kind                   the project                      what it builds
=====================  ===============================  ============================================
native                 kernel.toml                      one compiled wheel per variant (an engine)
kernel-builder-noarch  build.toml, no [kernel.*] table  one pure-Python wheel per backend (written)
kernel-builder         build.toml                       one compiled wheel per variant (an engine)
bring-your-own         setup.py / pyproject.toml        one compiled wheel per variant (an engine)
=====================  ===============================  ============================================

``[project] kind = "auto"`` takes the first row whose project is there; a kind named in
matrix.toml takes its row ("kernel-builder": the noarch row when build.toml compiles nothing;
"setuptools": the old spelling of bring-your-own; the names are plan/kind_names.py's). Deciding
reads the project once (``Project``): the plan's constraints and the build's load take build.toml's
spec from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from packaging.specifiers import SpecifierSet

from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.constraints import BUILDABLE_BACKENDS, ProjectConstraints, project_expand
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.kind_names import AUTO, REQUESTS, KindName
from wheelfactory.plan.matrix import Matrix, ProjectConfig
from wheelfactory.project import kernel_builder
from wheelfactory.project.bring_your_own import load_byo, plan_byo_stage
from wheelfactory.project.build_system import BuildSystem, read_build_system
from wheelfactory.project.build_toml import (
    DECLARATION,
    KernelBuilderSpec,
    is_kernel_builder_project,
)
from wheelfactory.project.build_toml_reader import load_build_toml
from wheelfactory.project.kernel_toml import is_native_project, load_kernel
from wheelfactory.project.kind_facts import (
    BRING_YOUR_OWN,
    KERNEL_BUILDER,
    KERNEL_BUILDER_NOARCH,
    NATIVE,
    KindFacts,
)
from wheelfactory.project.native import check_inputs, plan_stage
from wheelfactory.project.noarch import NoarchBuild, NoarchStage, plan_noarch
from wheelfactory.project.stage import Staged
from wheelfactory.project.vcs_version import ProbeRunner


@dataclass(frozen=True, kw_only=True)
class LoadContext:
    """What loading a project for a build needs besides its path."""

    matrix: Matrix
    table: CompatTable
    matrix_file: str  # for messages
    run_probe: ProbeRunner  # computes a git version (a bring-your-own build that reads git)


@dataclass(frozen=True, kw_only=True)
class LoadedProject:
    """A project read once for a build: what its declaration rules out and how what it builds is
    staged (a planned variant; for a project that compiles nothing, one of ``pure_python``)."""

    facts: KindFacts
    constraints: ProjectConstraints | None  # None: nothing it declares limits the plan
    stage_for: Callable[[Any], Staged]
    # What a project that compiles nothing builds: one wheel per backend the plan keeps, each a
    # manifest variant (engines/pure_python.py writes them); (): the plan's variants, compiled
    pure_python: tuple[NoarchBuild, ...] = ()


@dataclass(frozen=True)
class Project:
    """The project matrix.toml names, as deciding its kind reads it: build.toml is parsed once, and
    the plan's constraints and the build's load take it from here."""

    config: ProjectConfig

    @cached_property
    def build_toml(self) -> KernelBuilderSpec:
        return load_build_toml(self.config.path)

    def kernel_builder(self) -> KernelBuilderSpec:
        """build.toml, with what this factory cannot build refused (kernel_builder.buildable)."""
        return kernel_builder.buildable(self.build_toml)


@dataclass(frozen=True, kw_only=True)
class ProjectKind:
    facts: KindFacts
    # [project] kind = "auto": is the project of this kind
    detect: Callable[[Project], bool]
    # for a plan, without loading it all
    constraints: Callable[[Project], ProjectConstraints | None]
    load: Callable[[Project, LoadContext], LoadedProject]  # for a build

    @property
    def name(self) -> KindName:
        return self.facts.name

    @property
    def named(self) -> tuple[str, ...]:
        """The matrix.toml [project] kind values that ask for it."""
        return tuple(value for value, kinds in REQUESTS.items() if self.name in kinds)


@dataclass(frozen=True)
class ResolvedKind:
    """A project's kind, with the project as deciding it read it."""

    kind: ProjectKind
    project: Project

    @property
    def name(self) -> KindName:
        return self.kind.name

    def constraints(self) -> ProjectConstraints | None:
        return self.kind.constraints(self.project)

    def load(self, context: LoadContext) -> LoadedProject:
        return self.kind.load(self.project, context)


def _native(_: Project, context: LoadContext) -> LoadedProject:
    spec = context.matrix
    kernel = load_kernel(spec.project.path)
    check_inputs(kernel, spec.test)  # what leaves the project is refused now, before any engine
    stage_for = partial(
        plan_stage,
        kernel,
        table=context.table,
        tests=spec.test,
        torch_requirement=spec.build.torch_requirement,
    )
    return LoadedProject(facts=NATIVE, constraints=None, stage_for=stage_for)


def _kernel_builder(project: Project, context: LoadContext) -> LoadedProject:
    spec = context.matrix
    kernel = project.kernel_builder()
    # what leaves the project is refused now, before any engine
    kernel_builder.project_files(kernel.root)
    stage_for = partial(
        kernel_builder.plan_kernel_builder_stage,
        kernel,
        table=context.table,
        tests=spec.test,
        torch_requirement=spec.build.torch_requirement,
    )
    return LoadedProject(
        facts=KERNEL_BUILDER,
        constraints=kernel_builder.project_constraints(kernel),
        stage_for=stage_for,
    )


def _is_noarch(project: Project) -> bool:
    return is_kernel_builder_project(project.config.path) and project.build_toml.noarch


def _kernel_builder_noarch(project: Project, context: LoadContext) -> LoadedProject:
    """One build per backend kind the plan keeps (build.toml's backends, the matrix's choice)."""
    kernel = project.kernel_builder()
    constraints = kernel_builder.noarch_constraints(kernel)
    backends = sorted(
        {
            v.key.backend.kind
            for v in project_expand(context.matrix, context.table, constraints).variants
        }
    )
    builds = plan_noarch(kernel, backends)
    if not builds:
        raise ConfigError(
            f"the matrix selects no backend {kernel.root / DECLARATION} declares "
            f"({', '.join(kernel.general.backends)})",
            key="matrix.backends",
            hint="add one of them to [matrix] backends",
        )
    return LoadedProject(
        facts=KERNEL_BUILDER_NOARCH,
        constraints=constraints,
        stage_for=partial(NoarchStage, spec=kernel),
        pure_python=builds,
    )


def _bring_your_own(_: Project, context: LoadContext) -> LoadedProject:
    spec = context.matrix
    byo = load_byo(spec.project, context.matrix_file, context.run_probe)
    stage_for = partial(
        plan_byo_stage, byo, tests=spec.test, torch_requirement=spec.build.torch_requirement
    )
    return LoadedProject(
        facts=BRING_YOUR_OWN,
        constraints=build_system_constraints(byo.build_system),
        stage_for=stage_for,
    )


def build_system_constraints(system: BuildSystem) -> ProjectConstraints | None:
    """A bring-your-own project's bounds on torch in its [build-system] requires; None: none."""
    if not system.torch_specifier:
        return None
    return ProjectConstraints(
        declared_in=system.declared_in,
        backends=BUILDABLE_BACKENDS,
        torch=SpecifierSet(system.torch_specifier),
        torch_bounds_key="requires",
    )


# The table, in the order "auto" looks (bring-your-own last: any other project is one).
KINDS: tuple[ProjectKind, ...] = (
    ProjectKind(
        facts=NATIVE,
        detect=lambda project: is_native_project(project.config.path),
        constraints=lambda _: None,
        load=_native,
    ),
    ProjectKind(
        facts=KERNEL_BUILDER_NOARCH,
        detect=_is_noarch,
        constraints=lambda project: kernel_builder.noarch_constraints(project.kernel_builder()),
        load=_kernel_builder_noarch,
    ),
    ProjectKind(
        facts=KERNEL_BUILDER,
        detect=lambda project: is_kernel_builder_project(project.config.path),
        constraints=lambda project: kernel_builder.project_constraints(project.kernel_builder()),
        load=_kernel_builder,
    ),
    ProjectKind(
        facts=BRING_YOUR_OWN,
        detect=lambda _: True,
        constraints=lambda project: build_system_constraints(
            read_build_system(project.config.path)
        ),
        load=_bring_your_own,
    ),
)


def resolve_kind(config: ProjectConfig) -> ResolvedKind:
    """The project's kind: the first row whose project is there ("auto"), or among the rows
    matrix.toml names the first whose project is there, else the last (its load says what is missing)."""
    project = Project(config)
    if config.kind == AUTO:
        return ResolvedKind(next(kind for kind in KINDS if kind.detect(project)), project)
    named = [kind for kind in KINDS if config.kind in kind.named]
    return ResolvedKind(next((kind for kind in named if kind.detect(project)), named[-1]), project)


def project_constraints(config: ProjectConfig) -> ProjectConstraints | None:
    """build.toml's backends and bounds for a kernel-builder project; a bring-your-own project's
    bounds on torch in its [build-system] requires (a build for another torch would stop at the
    build front end's check); None where nothing declared limits the plan (kernel.toml)."""
    return resolve_kind(config).constraints()


def project_plan(matrix: Matrix, table: CompatTable) -> Plan:
    """The matrix's plan, less what the project's own declaration rules out (with the reasons)."""
    return project_expand(matrix, table, project_constraints(matrix.project))
