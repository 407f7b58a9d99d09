"""``wheelfactory merge``: several build output directories combined into one.

A part is what ``wheelfactory build -o PART`` wrote (a CI build job's artifact): ``manifest.json``
and, per variant, the files its entry names, ``<variant>/<wheel>`` and ``<variant>/build.log``.
Only those files are merged; anything else in a part (``images.log``, hidden work files) is not.

``plan_merge`` decides (it reads manifests and hashes files, and writes nothing): for each
variant, the entry the output keeps and the files to copy. The output directory's own manifest,
when it has one, comes first, then the parts in the order given. A built or cached entry wins
over a failed one; between two failures the first is kept; two different wheels for one variant
are an error, naming both. A file is never copied over a different file of the same name, except
one that the output's own entry for that variant named and that entry is being replaced (the log
of a failure that a part built). A part's built entry whose wheel is not what the entry says
(verify/wheel_identity.py: file name tags, local label, build record, RECORD) or that has no
provenance record of its bytes is refused: left out, and the command fails after merging the
rest. ``apply_merge`` copies the files (each to a hidden temp name,
then renamed: a wheel appears only complete) and writes the manifest atomically; ``merge`` does
both under the output directory's lock.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wheelfactory.errors import ConfigError, MergeConflict, UsageError
from wheelfactory.plan.identity import InvalidVariantId, VariantId
from wheelfactory.project.keys import file_sha256
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import SUFFIX as PROVENANCE_SUFFIX
from wheelfactory.runner.provenance import provenance_path
from wheelfactory.runner.refusals import LeftOut, is_pure_python, wheel_refusal
from wheelfactory.support import atomic, paths
from wheelfactory.support.paths import StrPath


@dataclass(frozen=True)
class Copy:
    source: Path  # the file in its part
    target: str  # relative to the output directory (as the manifest names it)
    sha256: str


@dataclass(frozen=True)
class Choice:
    """The entry the output keeps for one variant, and where it comes from."""

    variant_id: str
    entry: manifest.Entry
    origin: Path  # the part (or the output directory itself)
    notes: tuple[str, ...] = ()  # what else the parts said about this variant


@dataclass(frozen=True)
class MergePlan:
    out: Path
    choices: tuple[Choice, ...]  # sorted by variant id
    # the files to copy; files already there with the same bytes are left out
    copies: tuple[Copy, ...]
    parts: tuple[Path, ...] = field(default=())
    # built entries of the parts not merged: a check failed (each with its ``part``)
    refused: tuple[LeftOut, ...] = ()
    unattested: tuple[str, ...] = ()  # merged without a provenance record (allow_unattested)

    @property
    def entries(self) -> dict[str, manifest.Entry]:
        return {choice.variant_id: choice.entry for choice in self.choices}

    def counts(self) -> tuple[int, int]:
        """(built or cached, failed)."""
        ok = sum(choice.entry.status in ("built", "cached") for choice in self.choices)
        return ok, len(self.choices) - ok


def _ok(entry: manifest.Entry) -> bool:
    return entry.status in ("built", "cached")


def _files(entry: manifest.Entry) -> list[str]:
    return [name for name in (entry.wheel, entry.log) if name]


def _inside(part: Path, name: str, variant_id: str) -> Path:
    """The file a manifest entry names, which must lie inside its part (support/paths.py)."""
    try:
        return paths.inside(
            part, name, what=f"{variant_id} names", file=str(part / manifest.MANIFEST)
        )
    except ConfigError as exc:  # merge's own exit code for a part it cannot take (7)
        raise MergeConflict(str(exc)) from None


def read_part(part: Path) -> dict[str, manifest.Entry]:
    if not part.is_dir():
        raise UsageError(
            f"{part}: no such directory; pass the directories `wheelfactory build -o DIR` wrote"
        )
    if not (part / manifest.MANIFEST).is_file():
        raise UsageError(
            f"{part} is not a build output: it has no {manifest.MANIFEST}; pass the directories "
            f"`wheelfactory build -o DIR` wrote"
        )
    return manifest.read(part)


def _refusal(part: Path, vid: str, entry: manifest.Entry, allow_unattested: bool) -> str | None:
    """Why a part's built entry may not be merged (one line), None when it may: its wheel is not
    what the entry says (verify/wheel_identity.py), or it has no provenance record of these bytes
    for this variant (unless ``allow_unattested``). A missing wheel or another sha256 is left to
    the copy plan (a MergeConflict, as before)."""
    if is_pure_python(entry) or not entry.wheel or not entry.sha256:
        return None  # a pure-Python (noarch) build: its id is a layout directory, not a variant
    source = _inside(part, entry.wheel, vid)
    if not source.is_file() or file_sha256(source) != entry.sha256:
        return None
    try:
        key = VariantId.parse(vid)
    except InvalidVariantId as exc:
        return str(exc)
    return wheel_refusal(source, vid, key, entry, allow_unattested=allow_unattested, verb="merge")


def plan_merge(
    parts: Sequence[Path],
    out: Path,
    existing: Mapping[str, manifest.Entry] | None = None,
    *,
    allow_unattested: bool = False,
) -> MergePlan:
    """What merging ``parts`` into ``out`` (whose manifest lists ``existing``) does. A part's built
    entry whose wheel fails a check is left out and listed in ``refused`` (the variant keeps what
    the other parts or the output say of it, if anything)."""
    if not parts:
        raise UsageError("give at least one build output directory to merge")
    out = out.resolve()
    resolved = [part.resolve() for part in parts]
    for shown, part in zip(parts, resolved):
        if part == out:
            raise UsageError(
                f"{shown} is the output directory itself; merge other directories into it"
            )
    existing = dict(existing or {})
    candidates: dict[str, list[tuple[Path, manifest.Entry]]] = {}
    for vid, entry in existing.items():
        candidates.setdefault(vid, []).append((out, entry))
    refused: list[LeftOut] = []
    for part in resolved:
        for vid, entry in read_part(part).items():
            reason = _refusal(part, vid, entry, allow_unattested) if _ok(entry) else None
            if reason is not None:
                refused.append(LeftOut(vid, reason, refused=True, part=part))
                continue
            candidates.setdefault(vid, []).append((part, entry))
    choices = [_choose(vid, candidates[vid]) for vid in sorted(candidates)]
    unattested = tuple(
        c.variant_id
        for c in choices
        if c.origin != out
        and _ok(c.entry)
        and c.entry.wheel
        and not is_pure_python(c.entry)
        and not provenance_path(_inside(c.origin, c.entry.wheel, c.variant_id)).is_file()
    )
    copies: dict[str, Copy] = {}
    for choice in choices:
        if choice.origin == out:
            continue
        replaceable = (
            set(_files(existing[choice.variant_id])) if choice.variant_id in existing else set()
        )
        names = _files(choice.entry)
        if _ok(choice.entry) and choice.entry.wheel:
            # The wheel's provenance record travels with it. A record of another run of the same
            # wheel (reproducible builds give the same bytes) is replaced, not a conflict.
            record = choice.entry.wheel + PROVENANCE_SUFFIX
            if _inside(choice.origin, record, choice.variant_id).is_file():
                names.append(record)
                replaceable.add(record)
        for name in names:
            source = _inside(choice.origin, name, choice.variant_id)
            if not source.is_file():
                raise MergeConflict(
                    f"{choice.origin / manifest.MANIFEST} lists {name} for {choice.variant_id}, "
                    f"but {source} is missing"
                )
            digest = file_sha256(source)
            if name == choice.entry.wheel and digest != choice.entry.sha256:
                raise MergeConflict(
                    f"{source} does not match the sha256 that {choice.origin / manifest.MANIFEST} "
                    f"records for it; rebuild {choice.variant_id}"
                )
            planned = copies.get(name)
            if planned is not None:
                if planned.sha256 != digest:
                    raise MergeConflict(
                        f"{planned.source} and {source} are different files that would both "
                        f"become {out / name}"
                    )
                continue
            target = _inside(out, name, choice.variant_id)
            if target.is_file():
                if file_sha256(target) == digest:
                    continue
                if name not in replaceable:
                    raise MergeConflict(
                        f"{out / name} already exists and differs from {source}; merge into an "
                        f"empty directory, or move one of them away"
                    )
            copies[name] = Copy(source, name, digest)
    return MergePlan(
        out,
        tuple(choices),
        tuple(copies[name] for name in sorted(copies)),
        tuple(resolved),
        tuple(refused),
        unattested,
    )


def _choose(vid: str, found: list[tuple[Path, manifest.Entry]]) -> Choice:
    """The first built or cached entry (all of them must be the same wheel), else the first failure."""
    built = [(part, entry) for part, entry in found if _ok(entry)]
    for part, entry in built[1:]:
        first_part, first = built[0]
        if (
            entry.sha256 != first.sha256
            or Path(entry.wheel or "").name != Path(first.wheel or "").name
        ):
            raise MergeConflict(
                f"two different wheels for {vid}: {first_part / (first.wheel or '')} "
                f"(sha256 {(first.sha256 or '')[:16]}) and {part / (entry.wheel or '')} "
                f"(sha256 {(entry.sha256 or '')[:16]}); keep one of the two builds"
            )
    origin, entry = built[0] if built else found[0]
    failed = [part for part, other in found if not _ok(other)]
    notes = (
        (f"kept the build from {origin}; failed in {', '.join(map(str, failed))}",)
        if built and failed
        else ()
    )
    return Choice(vid, entry, origin, notes)


def apply_merge(plan: MergePlan) -> None:
    """Copy the planned files and write the manifest, each atomically (a failure: WriteFailed)."""
    for copy in plan.copies:
        target = paths.inside(
            plan.out, copy.target, what="the copy target", file=str(plan.out / manifest.MANIFEST)
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic.replacing(target, what=f"the copy of {copy.source} at") as partial:
            shutil.copyfile(copy.source, partial)
    manifest.write(plan.out, plan.entries)


def merge(
    parts: Sequence[StrPath], out: StrPath = "dist", *, allow_unattested: bool = False
) -> MergePlan:
    """``wheelfactory merge``: ``parts`` merged into ``out`` under the output directory's lock;
    returns what was done (the caller fails on ``refused`` after this wrote the rest)."""
    dist = Path(out).resolve()
    with manifest.locked(dist):
        plan = plan_merge(
            [Path(part) for part in parts],
            dist,
            manifest.read(dist),
            allow_unattested=allow_unattested,
        )
        apply_merge(plan)
    return plan
