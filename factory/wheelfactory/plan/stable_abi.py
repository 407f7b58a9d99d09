"""The stable-ABI variants ([matrix] stable_abi): after the expansion, one variant per backend
build and arch serves every torch release from the target on, and is verified on some of them
(its gate, [stable_abi] verify_on). Pure.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.version import Version

from wheelfactory.errors import ConfigError
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.prune import Pruned, pruned_for


def collapse_stable(
    matrix: Matrix, target: str, variants: dict[str, Variant], pruned: list[Pruned]
) -> None:
    """One stable-ABI variant per (backend build, arch) for every cp39-abi3 variant of a torch
    >= ``target`` (of a backend kind in ``matrix.stable_abi_backends``; None: any): built once,
    against the oldest of those releases, with TORCH_TARGET_VERSION = target, and loadable on any
    torch from ``target`` on. The variants it replaces are listed as pruned, naming it; those of
    them its wheel is verified on besides the oldest (``matrix.stable_abi_verify_on``, default
    the middle and the newest) are its ``gate``."""
    backends, verify_on = matrix.stable_abi_backends, matrix.stable_abi_verify_on
    floor = Version(target)
    groups: dict[tuple[str, str], list[Variant]] = {}
    for variant in variants.values():
        if backends is not None and variant.key.backend.kind not in backends:
            continue
        if (
            variant.key.python == "abi3"
            and variant.key.cxx11_abi
            and Version(variant.key.torch) >= floor
        ):
            groups.setdefault((variant.key.backend.tag, variant.key.arch), []).append(variant)
    for members in groups.values():
        members.sort(key=lambda v: Version(v.key.torch))
        base = members[0]
        gate = tuple(m for m in _gate_members(members, verify_on, matrix.file) if m is not base)
        verified = ", ".join(m.torch_version for m in (base, *gate))
        stable = replace(
            base,
            key=replace(base.key, torch=target, stable_abi=True),
            gate=gate,
            notes=(
                *base.notes,
                f"stable ABI: built against torch {base.torch_version} with "
                f"TORCH_TARGET_VERSION {target}; loads on torch >= {target}; "
                f"verified on torch {verified}",
            ),
        )
        for member in members:
            del variants[member.id]
            pruned.append(
                pruned_for(
                    member.key,
                    member.backend,
                    f'served by the stable-ABI variant {stable.id} ([matrix] stable_abi = "{target}")',
                )
            )
        variants[stable.id] = stable


def _gate_members(
    members: list[Variant], verify_on: tuple[str, ...] | None, matrix_file: str
) -> list[Variant]:
    """The members (oldest torch first) a stable-ABI wheel is verified on: ``verify_on``'s releases
    ("latest": the newest), or the oldest, middle and newest."""
    if verify_on is None:
        return list(
            {id(m): m for m in (members[0], members[len(members) // 2], members[-1])}.values()
        )
    by_minor = {m.key.torch: m for m in members}
    chosen = []
    for release in verify_on:
        member = members[-1] if release == "latest" else by_minor.get(release)
        if member is None:
            raise ConfigError(
                f"names torch {release}, which the stable-ABI variant does not serve here",
                file=matrix_file,
                key="stable_abi.verify_on",
                hint=f"name releases of [matrix] torch from the target on: {', '.join(by_minor)}",
            )
        if member not in chosen:
            chosen.append(member)
    return chosen
