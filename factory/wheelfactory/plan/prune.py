"""The pruning rules: which combinations of the matrix's axes cannot be built, and why.

Each rule answers from the compatibility table (a torch release without a CUDA build, a pre-cxx11
wheel that does not exist, no aarch64 build of a backend) or from matrix.toml ([cuda].toolkits,
an [[exclude]] entry); plan/expand.py lists what they prune with the plan. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from wheelfactory.plan.axes import BackendSelector, Selector
from wheelfactory.plan.compat import TorchRelease
from wheelfactory.plan.identity import Backend, VariantId
from wheelfactory.plan.matrix import Matrix


@dataclass(frozen=True)
class Pruned:
    """A combination the plan does not build; ``None`` axes mean "for every value"."""

    torch: str
    backend: str  # build name (cu124) or kind (cuda) when the whole kind is missing
    reason: str
    cxx11_abi: bool | None = None
    python: str | None = None
    arch: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "torch": self.torch,
            "backend": self.backend,
            "cxx11_abi": self.cxx11_abi,
            "python": self.python,
            "arch": self.arch,
            "reason": self.reason,
        }


def builds(
    matrix: Matrix, release: TorchRelease, selector: BackendSelector, pruned: list[Pruned]
) -> Iterator[Backend]:
    """The builds of ``release`` that ``selector`` names and the toolkit filters let through; what
    they leave out goes to ``pruned``."""
    available = release.backends(selector.kind)
    name = {"cuda": "CUDA", "rocm": "ROCm"}.get(selector.kind, "")
    if not available:
        pruned.append(
            Pruned(release.minor, selector.kind, f"torch {release.minor} has no {name} builds")
        )
        return
    if selector.pinned is not None and selector.kind != "cpu":
        matching = [b for b in available if selector.matches(b)]
        if not matching:
            assert selector.pinned.version is not None
            versions = ", ".join(b.version or "" for b in available)
            pruned.append(
                Pruned(
                    release.minor,
                    selector.pinned.build_name,
                    f"{name} {selector.pinned.version} has no torch {release.minor} build "
                    f"(torch {release.minor} ships {name} {versions})",
                )
            )
        yield from matching
        return
    settings = matrix.cuda.toolkits if selector.kind == "cuda" else matrix.rocm.toolkits
    for backend in available:
        default = release.pypi_default == backend.build_name
        if selector.kind == "cpu" or settings.admits(backend.version or "", default):
            yield backend
        else:
            pruned.append(
                Pruned(
                    release.minor,
                    backend.build_name,
                    f"{name} {backend.version} not selected by [{selector.kind}].toolkits "
                    f"({settings.text})",
                )
            )


def combinations(
    release: TorchRelease,
    backend: Backend,
    abis: tuple[bool, ...],
    pythons: tuple[str, ...],
    arches: tuple[str, ...],
) -> Iterator[tuple[VariantId, Pruned | None]]:
    """Every (ABI, Python, arch) for one torch build, with the reason where it cannot exist."""
    for abi in abis:
        if not release.has_build(backend, abi):
            yield VariantId(release.minor, backend, abi), _abi_reason(release, backend, abi)
            continue
        for python in pythons:
            if python != "abi3" and python not in release.python:
                yield (
                    VariantId(release.minor, backend, abi, python=python),
                    Pruned(
                        release.minor,
                        backend.build_name,
                        f"torch {release.minor} ships no wheels for Python {python} "
                        f"(it supports {release.python[0]} to {release.python[-1]})",
                        abi,
                        python,
                    ),
                )
                continue
            for arch in arches:
                key = VariantId(release.minor, backend, abi, arch=arch, python=python)
                if arch == "aarch64" and backend.build_name not in release.aarch64:
                    yield (
                        key,
                        pruned_for(
                            key,
                            backend,
                            f"torch {release.minor} publishes no aarch64 "
                            f"{backend.build_name} build (aarch64: {', '.join(release.aarch64)})",
                        ),
                    )
                    continue
                yield key, None


def _abi_reason(release: TorchRelease, backend: Backend, abi: bool) -> Pruned:
    other = release.abi_builds(not abi)
    if release.abi_builds(abi) is None:
        reason = (
            f"torch {release.minor} ships no pre-cxx11 wheels (every Linux build since 2.7 uses "
            "the cxx11 ABI)"
            if not abi
            else f"torch {release.minor} ships no cxx11-ABI wheels"
        )
    elif other is not None and other.includes(backend.build_name):
        label = "pre-cxx11" if not abi else "cxx11"
        have = "pre-cxx11" if abi else "cxx11"
        reason = (
            f"torch {release.minor} {backend.build_name} exists only with the {have} ABI "
            f"(no {label} build)"
        )
    else:  # pragma: no cover - the table loader guarantees every build has an ABI
        reason = f"torch {release.minor} has no {backend.build_name} build"
    return Pruned(release.minor, backend.build_name, reason, abi)


def pruned_for(key: VariantId, backend: Backend, reason: str) -> Pruned:
    return Pruned(key.torch, backend.build_name, reason, key.cxx11_abi, key.python, key.arch)


def excluded(
    matrix: Matrix, release: TorchRelease, backend: Backend, key: VariantId
) -> Pruned | None:
    """The first [[exclude]] entry that matches the combination, as what it prunes."""
    entry = next((e for e in matrix.exclude if _matches(e, release, backend, key)), None)
    if entry is None:
        return None
    return pruned_for(key, backend, f"excluded by {entry.where('exclude', matrix.file)}")


def _matches(selector: Selector, release: TorchRelease, backend: Backend, key: VariantId) -> bool:
    return (
        (selector.torch is None or release.minor in selector.torch.releases)
        and (selector.backend is None or selector.backend.matches(backend))
        and (selector.cxx11_abi is None or selector.cxx11_abi == key.cxx11_abi)
        and (selector.python is None or selector.python == key.python)
        and (selector.arch is None or selector.arch == key.arch)
    )
