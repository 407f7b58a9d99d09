"""Expansion: Matrix + compatibility table -> variants, plus every pruned combination and why.

Pure: no files, no Docker, no network. The same inputs give the same plan, in the same order.
What cannot be built is decided by plan/prune.py, the stable-ABI variants by plan/stable_abi.py.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.plan.axes import Include, TorchSelector
from wheelfactory.plan.compat import CompatTable, TorchRelease
from wheelfactory.plan.identity import Backend, BuildSettings, Variant, VariantId, split_arch_list
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.prune import Pruned, builds, combinations, excluded, pruned_for
from wheelfactory.plan.stable_abi import collapse_stable


@dataclass(frozen=True)
class Plan:
    variants: tuple[Variant, ...]
    pruned: tuple[Pruned, ...]

    def shard(self, index: int, count: int) -> Plan:
        """Shard ``index`` of ``count`` (1-based): round-robin over the sorted plan, so shards
        are disjoint, cover the plan, and each gets a mix of torch releases and backends."""
        if count < 1 or not 1 <= index <= count:
            raise UsageError(f"shard {index}/{count} does not exist: use I/N with 1 <= I <= N")
        return Plan(self.variants[index - 1 :: count], self.pruned)

    def as_dict(self) -> dict[str, object]:
        return {
            "variants": [v.as_dict() for v in self.variants],
            "pruned": [p.as_dict() for p in self.pruned],
        }

    def github_matrix(self) -> dict[str, object]:
        """A GitHub Actions ``strategy.matrix`` object: one job per variant."""
        return {
            "include": [
                {
                    key: value
                    for key, value in v.as_dict().items()
                    if key
                    in (
                        "id",
                        "torch",
                        "torch_version",
                        "backend",
                        "build",
                        "toolkit",
                        "cxx11_abi",
                        "python",
                        "arch",
                        "local_version",
                        "arch_list",
                    )
                }
                for v in self.variants
            ]
        }


def parse_shard(text: str) -> tuple[int, int]:
    parts = text.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() and len(p.strip()) <= 9 for p in parts):
        raise UsageError(
            f"--shard {text[:40]!r}{'...' if len(text) > 40 else ''}: expected I/N with numbers "
            "below a billion, e.g. 2/4"
        )
    index, count = int(parts[0]), int(parts[1])
    if count < 1 or not 1 <= index <= count:
        raise UsageError(
            f"--shard {text}: shard {index} of {count} does not exist; use 1/{count} to "
            f"{count}/{count}"
            if count >= 1
            else f"--shard {text}: N must be at least 1"
        )
    return index, count


def expand(matrix: Matrix, table: CompatTable) -> Plan:
    variants: dict[str, Variant] = {}
    pruned: list[Pruned] = []
    for release, selector in _releases(matrix, table):
        for backend_selector in matrix.backends:
            for backend in builds(matrix, release, backend_selector, pruned):
                for key, reason in combinations(
                    release, backend, matrix.cxx11_abi, matrix.python, matrix.arch
                ):
                    if reason is None:
                        reason = excluded(matrix, release, backend, key)
                    if reason is not None:
                        pruned.append(reason)
                        continue
                    variant = _variant(matrix, table, release, selector, backend, key, None, pruned)
                    if variant is not None:
                        variants.setdefault(variant.id, variant)
    for include in matrix.include:
        _apply_include(matrix, table, include, variants, pruned)
    if matrix.stable_abi is not None:
        collapse_stable(matrix, matrix.stable_abi, variants, pruned)
    if matrix.cuda.split_archs:
        _split_archs(variants)
    ordered = tuple(sorted(variants.values(), key=Variant.sort_key))
    return Plan(ordered, tuple(_dedupe(pruned)))


def _split_archs(variants: dict[str, Variant]) -> None:
    """[cuda] split_archs: each CUDA variant becomes one variant per SASS arch of its arch list and,
    where the list asks for PTX, one PTX variant (identity.split_arch_list). Each part compiles the
    whole arch list, so the parts of one build share every compile (the compile cache serves the
    second part on), and its wheel keeps only its own device code (verify/fatbin.py)."""
    for variant in [v for v in variants.values() if v.key.backend.kind == "cuda"]:
        parts = split_arch_list(variant.arch_list)
        del variants[variant.id]
        for part in parts:
            split = replace(
                variant,
                key=replace(variant.key, gpu=part.tag),
                split_from=variant.id,
                notes=(
                    *variant.notes,
                    f"part of {variant.id}, which compiles {';'.join(variant.arch_list)}",
                ),
            )
            variants[split.id] = split


def _releases(matrix: Matrix, table: CompatTable) -> Iterator[tuple[TorchRelease, TorchSelector]]:
    seen: set[str] = set()
    for release in table.releases:  # table order: oldest first
        for selector in matrix.torch:
            if release.minor in selector.releases and release.minor not in seen:
                seen.add(release.minor)
                yield release, selector


def _variant(
    matrix: Matrix,
    table: CompatTable,
    release: TorchRelease,
    selector: TorchSelector,
    backend: Backend,
    key: VariantId,
    include: Include | None,
    pruned: list[Pruned],
) -> Variant | None:
    notes: list[str] = []
    arch_list: tuple[str, ...] = ()
    toolkit_wheels: tuple[str, ...] = ()
    toolkit_home = ""
    toolkit_debian = ""
    if backend.kind == "cuda":
        assert backend.version is not None
        toolkit = table.cuda_toolkit(backend.version)
        toolkit_wheels, toolkit_home = toolkit.wheels, toolkit.wheels_home
        toolkit_debian = toolkit.debian
        wanted = (
            include.arch_list if include and include.arch_list else None
        ) or matrix.cuda.arch_list
        if wanted is None:
            arch_list = toolkit.arch_list
        else:
            arch_list = tuple(a for a in wanted if toolkit.can_compile(a))
            dropped = [a for a in wanted if a not in arch_list]
            if dropped:
                notes.append(
                    f"dropped {';'.join(dropped)}: CUDA {backend.version} compiles "
                    f"{toolkit.min_arch} to {toolkit.max_arch}"
                )
            if not arch_list:
                pruned.append(
                    pruned_for(
                        key,
                        backend,
                        f"none of the requested CUDA archs "
                        f"({';'.join(wanted)}) can be compiled by CUDA {backend.version}",
                    )
                )
                return None
    elif backend.kind == "rocm":
        assert backend.version is not None
        arch_list = matrix.rocm.gfx_targets or table.rocm_toolkit(backend.version).gfx_targets
    return Variant(
        key=key,
        torch_version=selector.build_version(release),
        toolkit=backend.version,
        arch_list=arch_list,
        torch_index=table.torch_index(release, backend, key.cxx11_abi, key.arch),
        torch_on_pypi=release.on_pypi(backend, key.cxx11_abi, key.arch),
        wheel_platform=release.wheel_platform,
        settings=_settings(matrix, include),
        notes=tuple(notes),
        toolkit_wheels=toolkit_wheels,
        toolkit_wheels_home=toolkit_home,
        toolkit_debian=toolkit_debian,
    )


def _settings(matrix: Matrix, include: Include | None) -> BuildSettings:
    # [build] keys that change the wheel
    run_wide = BuildSettings(debug_info=matrix.build.debug_info, strip=matrix.build.strip)
    return run_wide.merged(include.settings) if include else run_wide


def _apply_include(
    matrix: Matrix,
    table: CompatTable,
    include: Include,
    variants: dict[str, Variant],
    pruned: list[Pruned],
) -> None:
    """An [[include]] adds its combinations, or attaches its settings to ones already planned.

    Axes it leaves out range over the matrix's values, like GitHub Actions' include.
    Asking for something that cannot exist is an error, not a silent prune.
    """
    match = include.match
    where = match.where("include", matrix.file)
    assert match.torch is not None and match.backend is not None
    release = table.release(match.torch.releases[0])
    assert release is not None
    backends = [b for b in release.backends(match.backend.kind) if match.backend.matches(b)]
    if not backends:
        raise ConfigError(
            f"{where}: torch {release.minor} has no {match.backend.text} build",
            hint=f"its builds: {', '.join(b.build_name for b in release.all_builds())}",
        )
    abis = (match.cxx11_abi,) if match.cxx11_abi is not None else matrix.cxx11_abi
    pythons = (match.python,) if match.python else matrix.python
    arches = (match.arch,) if match.arch else matrix.arch
    added = 0
    reasons: list[str] = []
    for backend in backends:
        for key, reason in combinations(release, backend, abis, pythons, arches):
            if reason is not None:
                reasons.append(reason.reason)
                continue
            existing = variants.get(str(key))
            candidate = _variant(matrix, table, release, match.torch, backend, key, include, pruned)
            if candidate is None:
                continue
            if existing is not None:
                candidate = replace(
                    existing,
                    settings=existing.settings.merged(include.settings),
                    arch_list=candidate.arch_list if include.arch_list else existing.arch_list,
                    notes=existing.notes + candidate.notes,
                )
            variants[candidate.id] = candidate
            added += 1
    if not added:
        raise ConfigError(
            f"{where}: asks for a combination that cannot be built: "
            f"{reasons[0] if reasons else 'nothing matched'}",
            hint="fix or remove the entry",
        )


def _dedupe(pruned: list[Pruned]) -> Iterator[Pruned]:
    seen: set[Pruned] = set()
    for entry in pruned:
        if entry not in seen:
            seen.add(entry)
            yield entry


def select(
    plan: Plan, only: Sequence[str], shard: tuple[int, int] | None = None
) -> tuple[Variant, ...]:
    """``--shard I/N`` (the plan's shard, as ``plan --shard`` prints it), then ``--only``
    patterns (fnmatch on ids) within it. Each pattern must match a variant of the whole plan
    (a typo is an error); a shard may hold none of its matches (that shard builds nothing)."""
    for pattern in only:
        if not any(fnmatch.fnmatchcase(v.id, pattern) for v in plan.variants):
            raise ConfigError(
                f"--only {pattern!r} matches no variant of the plan",
                hint="see `wheelfactory plan` for the ids",
            )
    variants = plan.shard(*shard).variants if shard is not None else plan.variants
    if not only:
        return variants
    return tuple(v for v in variants if any(fnmatch.fnmatchcase(v.id, pattern) for pattern in only))
