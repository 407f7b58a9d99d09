"""What a project's own declaration allows, applied to the plan: build.toml's backends and its
torch and CUDA bounds prune variants, each with the reason and the file that said so.

Pure: the project module reads the declaration and hands over a ``ProjectConstraints``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import Plan, expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.prune import Pruned

# Backends a build here can produce; others a project declares (metal, xpu, neuron, tpu, cann)
# are pruned with a reason.
BUILDABLE_BACKENDS = ("cpu", "cuda", "rocm")


@dataclass(frozen=True)
class ProjectConstraints:
    declared_in: str  # the file, for the reasons ("kernels/x/build.toml")
    backends: tuple[str, ...]  # backend kinds the project builds (any, including ones we cannot)
    torch: SpecifierSet = SpecifierSet()
    cuda: SpecifierSet = SpecifierSet()
    torch_bounds_key: str = "[torch] minver/maxver"  # where ``torch`` comes from, for the reasons
    # the torch release a stable-ABI build targets ([torch] stable-abi)
    stable_abi: str | None = None
    # the backend kinds it is declared for; None: all
    stable_abi_backends: tuple[str, ...] | None = None

    def reason(self, variant: Variant) -> str | None:
        """Why ``variant`` is out (None: in)."""
        kind = variant.key.backend.kind
        if kind not in self.backends:
            return f"{self.declared_in} builds no {kind} kernel (backends: {', '.join(self.backends) or 'none'})"
        if self.torch and Version(variant.torch_version) not in self.torch:
            return f"{self.declared_in} {self.torch_bounds_key} allow torch {self.torch}"
        if (
            kind == "cuda"
            and self.cuda
            and variant.toolkit
            and Version(variant.toolkit) not in self.cuda
        ):
            return f"{self.declared_in} allows CUDA {self.cuda}"
        return None

    def unbuildable(self) -> tuple[str, ...]:
        return tuple(b for b in self.backends if b not in BUILDABLE_BACKENDS)


def project_expand(
    matrix: Matrix, table: CompatTable, constraints: ProjectConstraints | None
) -> Plan:
    """The matrix's plan under the project's constraints: a stable-ABI target the project declares
    is the matrix's ``stable_abi`` (one variant per backend build then serves every torch from
    it), and what the project rules out is pruned."""
    return constrain(expand(project_matrix(matrix, constraints), table), constraints)


def project_matrix(matrix: Matrix, constraints: ProjectConstraints | None) -> Matrix:
    """``matrix`` with the project's stable-ABI target as its ``stable_abi``."""
    if constraints is None or constraints.stable_abi is None:
        return matrix
    if matrix.stable_abi not in (None, constraints.stable_abi):
        raise ConfigError(
            f"[matrix] stable_abi = {matrix.stable_abi!r}, and {constraints.declared_in} "
            f"[torch] stable-abi targets {constraints.stable_abi}",
            file=matrix.file,
            key="matrix.stable_abi",
            hint="drop one, or make them the same release",
        )
    return replace(
        matrix,
        stable_abi=constraints.stable_abi,
        stable_abi_backends=constraints.stable_abi_backends,
    )


def constrain(plan: Plan, constraints: ProjectConstraints | None) -> Plan:
    """``plan`` less the variants the project rules out, each added to ``pruned`` with its reason;
    backends no engine here builds are listed once each."""
    if constraints is None:
        return plan
    kept: list[Variant] = []
    pruned = list(plan.pruned)
    for variant in plan.variants:
        reason = constraints.reason(variant)
        if reason is None:
            kept.append(variant)
        else:
            key = variant.key
            pruned.append(
                Pruned(
                    key.torch,
                    variant.backend.build_name,
                    reason,
                    key.cxx11_abi,
                    key.python,
                    key.arch,
                )
            )
    for backend in constraints.unbuildable():
        pruned.append(
            Pruned(
                "*",
                backend,
                f"{constraints.declared_in} declares {backend}: wheelfactory builds "
                f"{', '.join(BUILDABLE_BACKENDS)} only",
            )
        )
    return Plan(tuple(kept), tuple(pruned))
