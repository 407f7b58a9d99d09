"""What a project's own declaration allows, applied to the plan: build.toml's backends and its
torch and CUDA bounds prune variants, each with the reason and the file that said so.

Pure: the project module reads the declaration and hands over a ``ProjectConstraints``.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from wheelfactory.plan.expand import Plan, Pruned
from wheelfactory.plan.identity import Variant

# Backends a build here can produce; others a project declares (metal, xpu, neuron, tpu, cann)
# are pruned with a reason.
BUILDABLE_BACKENDS = ("cpu", "cuda", "rocm")


@dataclass(frozen=True)
class ProjectConstraints:
    declared_in: str  # the file, for the reasons ("kernels/x/build.toml")
    backends: tuple[str, ...]  # backend kinds the project builds (any, including ones we cannot)
    torch: SpecifierSet = SpecifierSet()
    cuda: SpecifierSet = SpecifierSet()

    def reason(self, variant: Variant) -> str | None:
        """Why ``variant`` is out (None: in)."""
        kind = variant.key.backend.kind
        if kind not in self.backends:
            return f"{self.declared_in} builds no {kind} kernel (backends: {', '.join(self.backends) or 'none'})"
        if self.torch and Version(variant.torch_version) not in self.torch:
            return f"{self.declared_in} [torch] minver/maxver allow torch {self.torch}"
        if kind == "cuda" and self.cuda and variant.toolkit and Version(variant.toolkit) not in self.cuda:
            return f"{self.declared_in} allows CUDA {self.cuda}"
        return None

    def unbuildable(self) -> tuple[str, ...]:
        return tuple(b for b in self.backends if b not in BUILDABLE_BACKENDS)


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
            pruned.append(Pruned(key.torch, variant.backend.build_name, reason, key.cxx11_abi, key.python, key.arch))
    for backend in constraints.unbuildable():
        pruned.append(Pruned("*", backend, f"{constraints.declared_in} declares {backend}: wheelfactory builds "
                                            f"{', '.join(BUILDABLE_BACKENDS)} only"))
    return Plan(tuple(kept), tuple(pruned))
