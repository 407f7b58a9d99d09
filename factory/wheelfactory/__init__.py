"""wheelfactory: a multi-variant wheel factory for PyTorch C++/CUDA/ROCm kernels.

The public API is what this module exports (``__all__``); every other module path is private and
may change. Planning is pure: ``load_plan`` reads matrix.toml and the compatibility table and never
touches Docker, compilers or the network. ``build`` runs the plan through an engine into an
output directory, as ``wheelfactory build`` does. Every other command has its function here too,
the one the command line calls (``index_dist`` for ``wheelfactory index``, ``merge`` for
``wheelfactory merge``, ...): plain arguments in, a typed result out, which the CLI only renders.
They are loaded on first use, so that importing wheelfactory stays light.

    import wheelfactory
    plan = wheelfactory.load_plan("matrix.toml")
    for variant in plan.variants:
        print(variant.id, variant.local_version)
"""

from __future__ import annotations

__version__ = "0.1.0"  # before the imports below: modules they load read it

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wheelfactory.errors import (
    BuildFailed,
    ConfigError,
    DockerUnavailable,
    EnvironmentProblem,
    ImageBuildFailed,
    OutputLocked,
    PublishError,
    UsageError,
    VariantsNotBuilt,
    WheelfactoryError,
    WorkflowStale,
)
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Backend, Variant, VariantId
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.prune import Pruned
from wheelfactory.plan.read import read_matrix
from wheelfactory.project.kinds import project_plan
from wheelfactory.support.paths import StrPath

if TYPE_CHECKING:  # for type checkers; at run time each is imported on first use (__getattr__)
    from wheelfactory.ci.bake import bake
    from wheelfactory.ci.compat_refresh import refresh_compat
    from wheelfactory.ci.github_command import github_workflow
    from wheelfactory.ci.merge import merge
    from wheelfactory.engines.machine import (
        collect_garbage,
        make_base_image,
        rocm_check,
        start_docker,
    )
    from wheelfactory.publish.hf_layout import export_hf
    from wheelfactory.publish.index import index_dist
    from wheelfactory.publish.publishing import publish_dist
    from wheelfactory.publish.reporting import report_dist
    from wheelfactory.publish.selector import which
    from wheelfactory.publish.serve import open_index
    from wheelfactory.runner.session import BuildResult

# Each command's function (and BuildResult), by the module it lives in.
_LAZY = {
    "BuildResult": "wheelfactory.runner.session",
    "index_dist": "wheelfactory.publish.index",
    "report_dist": "wheelfactory.publish.reporting",
    "export_hf": "wheelfactory.publish.hf_layout",
    "publish_dist": "wheelfactory.publish.publishing",
    "open_index": "wheelfactory.publish.serve",
    "which": "wheelfactory.publish.selector",
    "merge": "wheelfactory.ci.merge",
    "bake": "wheelfactory.ci.bake",
    "github_workflow": "wheelfactory.ci.github_command",
    "refresh_compat": "wheelfactory.ci.compat_refresh",
    "start_docker": "wheelfactory.engines.machine",
    "make_base_image": "wheelfactory.engines.machine",
    "collect_garbage": "wheelfactory.engines.machine",
    "rocm_check": "wheelfactory.engines.machine",
}

__all__ = [
    "__version__",
    # planning
    "load_plan",
    "Plan",
    "Pruned",
    "Variant",
    "VariantId",
    "Backend",
    "Matrix",
    "CompatTable",
    # building
    "build",
    "BuildResult",
    # publishing (``wheelfactory index``, ``report``, ``export``, ``publish``, ``serve``, ``which``)
    "index_dist",
    "report_dist",
    "export_hf",
    "publish_dist",
    "open_index",
    "which",
    # CI (``merge``, ``bake``, ``ci github``, ``compat refresh``)
    "merge",
    "bake",
    "github_workflow",
    "refresh_compat",
    # the machine (``engine start``, ``base-image``, ``gc``, ``rocm-check``)
    "start_docker",
    "make_base_image",
    "collect_garbage",
    "rocm_check",
    # errors (each with its exit code)
    "WheelfactoryError",
    "ConfigError",
    "UsageError",
    "BuildFailed",
    "DockerUnavailable",
    "OutputLocked",
    "VariantsNotBuilt",
    "ImageBuildFailed",
    "PublishError",
    "WorkflowStale",
    "EnvironmentProblem",
]


def __getattr__(name: str) -> object:
    """A command's function, imported on first use (PEP 562)."""
    if name in _LAZY:
        found = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = found
        return found
    raise AttributeError(f"module 'wheelfactory' has no attribute {name!r}")


def load_plan(
    matrix: StrPath, compat: StrPath | None = None, *, shard: tuple[int, int] | None = None
) -> Plan:
    """The plan of a matrix.toml: ``plan.variants`` (what builds) and ``plan.pruned`` (what the
    compatibility table, or a kernel-builder project's build.toml, rules out, each with its reason).
    ``compat`` replaces the bundled table; ``shard`` (i, n): only shard i of n (``plan --shard``).
    Raises ConfigError (one line naming file, key and line) on bad input."""
    spec, table = read_matrix(Path(matrix), Path(compat) if compat is not None else None)
    plan = project_plan(spec, table)
    return plan.shard(*shard) if shard else plan


def build(
    matrix: StrPath,
    *,
    compat: StrPath | None = None,
    out: StrPath | None = None,
    engine: str | None = None,
    python: str | None = None,
    only: Sequence[str] = (),
    shard: tuple[int, int] | None = None,
    jobs: int | None = None,
    max_memory: int | None = None,
    setup: bool = False,
) -> BuildResult:
    """Build the plan of ``matrix`` as ``wheelfactory build`` does, into ``out`` (default: the
    matrix's [build] out) with its ``manifest.json`` (engine "auto", "docker" or "host"; ``python``:
    the interpreter whose torch the host engine builds for; ``only`` fnmatch patterns on variant
    ids; ``shard`` (i, n); ``max_memory`` in bytes; ``setup``: first make a Docker engine answer,
    as ``--setup``). A pure-Python (noarch) kernel-builder project
    needs no engine: one wheel per backend, each a variant of the manifest (``torch-cpu``).
    Returns every variant's outcome (``result.outcomes``, ``result.failed``); a variant that fails
    does not raise. With engine "auto" and no Docker engine, the host builds what it can and
    ``result.not_built`` lists the other selected variants, each with its reason and what to do
    (where `wheelfactory build` exits 5). Raises the errors above when the run cannot start."""
    from wheelfactory.runner.session import prepare_build

    return prepare_build(
        matrix,
        compat=compat,
        out=out,
        engine=engine,
        python=python,
        only=only,
        shard=shard,
        jobs=jobs,
        max_memory=max_memory,
        setup=setup,
    ).run()
