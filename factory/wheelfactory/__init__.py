"""wheelfactory: a multi-variant wheel factory for PyTorch C++/CUDA/ROCm kernels.

The public API is what this module exports (``__all__``); every other module path is private and
may change. Planning is pure: ``load_plan`` reads matrix.toml and the compatibility table and never
touches Docker, compilers or the network. ``build`` runs the plan through an engine into an
output directory, as ``wheelfactory build`` does.

    import wheelfactory
    plan = wheelfactory.load_plan("matrix.toml")
    for variant in plan.variants:
        print(variant.id, variant.local_version)
"""

from __future__ import annotations

__version__ = "0.1.0"  # before the imports below: modules they load read it

import os
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
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Backend, Variant, VariantId
from wheelfactory.plan.matrix import Matrix, load_matrix
from wheelfactory.plan.prune import Pruned
from wheelfactory.project.kinds import project_plan

if TYPE_CHECKING:
    from wheelfactory.runner.session import BuildResult

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

PathLike = str | os.PathLike[str]


def load_plan(matrix: PathLike, compat: PathLike | None = None) -> Plan:
    """The plan of a matrix.toml: ``plan.variants`` (what builds) and ``plan.pruned`` (what the
    compatibility table, or a kernel-builder project's build.toml, rules out, each with its reason).
    ``compat`` replaces the bundled table.
    Raises ConfigError (one line naming file, key and line) on bad input."""
    table = load_table(Path(compat) if compat is not None else None)
    path = Path(matrix)
    return project_plan(load_matrix(path, table, display=str(matrix)), table)


def build(
    matrix: PathLike,
    *,
    compat: PathLike | None = None,
    out: PathLike | None = None,
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
    from wheelfactory.runner.session import build_matrix

    return build_matrix(
        Path(matrix),
        compat=Path(compat) if compat is not None else None,
        out=Path(out) if out is not None else None,
        engine=engine,
        python=python,
        only=only,
        shard=shard,
        jobs=jobs,
        max_memory=max_memory,
        setup=setup,
    )
