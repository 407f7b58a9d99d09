"""The matrix report's model: dist/manifest.json (and the plan) as a grid of torch x backend x
C++ ABI.

``build_report`` is pure: it turns the manifest's entries, the plan (when there is a matrix)
and a few facts probed from the output directory (``probe_dist``) into a frozen ``Report``.
publish/report_html.py and report_svg.py render one as text, deterministically (the same input
gives the same bytes; nothing in them depends on the clock or on absolute paths of ours);
publish/reporting.py writes them.

Rows are torch releases (then stable-ABI builds); columns are the backend builds and ABIs that
occur. A grid cell lists every variant or pruned combination that falls into it (Pythons,
archs); each of those is one ``<td>`` with ``data-variant`` (or ``data-pruned``),
``data-status`` and a ``title`` saying why, for hovering.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import (
    Backend,
    InvalidBackend,
    InvalidVariantId,
    VariantId,
)
from wheelfactory.plan.prune import Pruned
from wheelfactory.plan.versions import major_minor, minor_of
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.runner import manifest
from wheelfactory.support import paths

Status = Literal["built", "cached", "failed", "missing", "pruned"]
STATUSES: tuple[Status, ...] = ("built", "cached", "failed", "missing", "pruned")


# (fill, border, text) per status: the HTML page and the SVG use the same colours.
COLOURS: dict[Status, tuple[str, str, str]] = {
    "built": ("#c8e6c9", "#2e7d32", "#1b3d1f"),
    "cached": ("#cfe2ff", "#1d5fbf", "#0d2a55"),
    "failed": ("#f8c9cc", "#b3261e", "#5c0f0b"),
    "missing": ("#fff3cd", "#b07d00", "#4d3700"),
    "pruned": ("#e6e6e6", "#9e9e9e", "#555555"),
}
LEGEND: dict[Status, str] = {
    "built": "built in this run, verified",
    "cached": "built earlier with the same key, verified",
    "failed": "the build or a verification step failed",
    "missing": "planned by the matrix, not in the manifest",
    "pruned": "ruled out by the plan (hover for the reason)",
}
_KINDS = ("cpu", "cuda", "rocm")
_ABIS = ("cxx11", "cxx98", "any")


@dataclass(frozen=True)
class Row:
    """A torch release, or the stable-ABI builds that serve every torch from ``torch`` on."""

    torch: str  # major.minor
    stable_abi: bool = False

    @property
    def label(self) -> str:
        return f"stable ABI, torch >= {self.torch}" if self.stable_abi else f"torch {self.torch}"

    @property
    def key(self) -> str:
        return f"stable-{self.torch}" if self.stable_abi else self.torch

    def sort_key(self) -> tuple[bool, Version]:
        return self.stable_abi, Version(self.torch)


@dataclass(frozen=True)
class Column:
    """A backend build at id precision (``cpu``, ``cu130``, ``rocm6.2``) or, for what a whole
    backend kind lacks, the kind (``cuda``); and a C++ ABI (``cxx11``, ``cxx98``, ``any``)."""

    backend: str
    abi: str

    @property
    def label(self) -> str:
        return f"{self.backend} {self.abi}"

    @property
    def kind(self) -> str:
        if self.backend in _KINDS:
            return self.backend
        return "cuda" if self.backend.startswith("cu") else "rocm"

    def sort_key(self) -> tuple[int, bool, Version, int]:
        exact = self.backend not in _KINDS
        version = Version("0")
        if exact and self.kind != "cpu":
            version = Version(Backend.parse(self.backend).version or "0")
        return _KINDS.index(self.kind), not exact, version, _ABIS.index(self.abi)


@dataclass(frozen=True)
class ReportCell:
    """One variant (from the manifest or the plan) or one pruned combination, in its grid cell."""

    label: str  # the variant id; for a pruned combination an id pattern, * for "every value"
    row: Row
    column: Column
    status: Status
    reason: str  # the hover text: verification, the error, why it is pruned or missing
    python: str | None = None  # "abi3", "3.11"; None: every Python (pruned)
    arch: str | None = None  # None: every arch (pruned)
    # shown in the cell: the first line of a failure, or of a built one's first warning
    detail: str = ""
    wheel: str | None = None  # relative to the output directory
    size: int | None = None
    seconds: float | None = None
    log: str | None = None  # relative to the output directory
    index: str | None = None  # the variant's index page, relative to the output directory
    torch_version: str | None = None
    engine: str | None = None

    @property
    def is_variant(self) -> bool:
        return self.status != "pruned"

    @property
    def sub_label(self) -> str:
        """What tells the members of one grid cell apart: ``abi3 x86_64``, ``cp311 any arch``."""
        python = (
            "any python"
            if self.python is None
            else ("abi3" if self.python == "abi3" else "cp" + self.python.replace(".", ""))
        )
        return f"{python} {self.arch or 'any arch'}"

    def sort_key(self) -> tuple[tuple[bool, Version], tuple[int, bool, Version, int], bool, str]:
        return self.row.sort_key(), self.column.sort_key(), not self.is_variant, self.label


@dataclass(frozen=True)
class Unplaced:
    """A manifest entry whose id is not a variant id: listed below the grid, never dropped."""

    variant_id: str
    status: str
    reason: str


@dataclass(frozen=True)
class Report:
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    cells: tuple[ReportCell, ...]  # sorted by row, column, variants before pruned, label
    unplaced: tuple[Unplaced, ...] = ()
    matrix: str | None = None  # the matrix file the plan came from, as the user named it
    has_index: bool = False  # dist/index/index.html exists
    project: str | None = None  # the wheels' project and public version, from their file names
    version: str | None = None
    updated: str | None = None  # when the manifest was last written (UTC), a build's last record

    def at(self, row: Row, column: Column) -> tuple[ReportCell, ...]:
        return tuple(c for c in self.cells if c.row == row and c.column == column)

    def counts(self) -> dict[Status, int]:
        found = {status: 0 for status in STATUSES}
        for cell in self.cells:
            found[cell.status] += 1
        for other in self.unplaced:
            found[_manifest_status(other.status)] += 1
        return found

    def summary(self) -> str:
        counts = self.counts()
        variants = sum(n for status, n in counts.items() if status != "pruned")
        text = (
            f"{variants} variant(s): {counts['built']} built, {counts['cached']} cached, "
            f"{counts['failed']} failed, {counts['missing']} missing; "
            f"{counts['pruned']} pruned combination(s)"
        )
        if self.unplaced:
            entries = "entry" if len(self.unplaced) == 1 else "entries"
            text += f"; {len(self.unplaced)} manifest {entries} not in the grid"
        return text


@dataclass(frozen=True)
class DistFacts:
    """What ``build_report`` needs from the output directory besides the manifest."""

    indexed: frozenset[str] = frozenset()  # variant ids with a dist/index/<id>/ directory
    sizes: Mapping[str, int] | None = None  # wheel sizes the manifest does not record
    has_index: bool = False
    updated: str | None = None  # the manifest's modification time, UTC


def probe_dist(dist: Path, entries: Mapping[str, manifest.Entry]) -> DistFacts:
    """The only I/O behind a report: which variants the index lists, and wheel sizes that an
    older manifest did not record. Every ``wheel`` and ``log`` the manifest names (the page links
    them) must lie inside ``dist``: a ConfigError naming the manifest otherwise (support/paths.py)."""
    index = dist / INDEX_LINK
    listed = str(dist / manifest.MANIFEST)
    for vid, entry in sorted(entries.items()):
        for what, name in (("wheel", entry.wheel), ("log", entry.log)):
            if name:
                paths.inside(dist, name, what=f"{vid} names the {what}", file=listed)
    indexed = frozenset(vid for vid in entries if (index / vid).is_dir())
    sizes: dict[str, int] = {}
    for vid, entry in entries.items():
        if entry.size is None and entry.wheel and (dist / entry.wheel).is_file():
            sizes[vid] = (dist / entry.wheel).stat().st_size
    try:
        stamp = (dist / manifest.MANIFEST).stat().st_mtime
        updated: str | None = datetime.fromtimestamp(stamp, timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"
        )
    except OSError:
        updated = None
    return DistFacts(indexed, sizes, (index / "index.html").is_file(), updated)


def build_report(
    entries: Mapping[str, manifest.Entry],
    plan: Plan | None = None,
    *,
    facts: DistFacts = DistFacts(),
    matrix: str | None = None,
) -> Report:
    """The grid for a manifest; with a plan, also its pruned combinations and the variants it
    plans that the manifest lacks (``missing``)."""
    cells: list[ReportCell] = []
    unplaced: list[Unplaced] = []
    sizes = facts.sizes or {}
    for vid, entry in sorted(entries.items()):
        try:
            key = VariantId.parse(vid)
        except InvalidVariantId as exc:
            unplaced.append(Unplaced(vid, entry.status, str(exc)))
            continue
        cells.append(_entry_cell(vid, key, entry, sizes.get(vid), vid in facts.indexed))
    if plan is not None:
        source = matrix or "the matrix"
        for variant in plan.variants:
            if variant.id not in entries:
                cells.append(
                    ReportCell(
                        variant.id,
                        _row(variant.key),
                        _column(variant.key),
                        "missing",
                        f"planned by {source}, not in the manifest: build it with "
                        f"`wheelfactory build --only '{variant.id}'`",
                        python=variant.key.python,
                        arch=variant.key.arch,
                        torch_version=variant.torch_version,
                    )
                )
        cells.extend(_pruned_cell(p) for p in plan.pruned)
    cells.sort(key=ReportCell.sort_key)
    rows = tuple(sorted({c.row for c in cells}, key=Row.sort_key))
    columns = tuple(sorted({c.column for c in cells}, key=Column.sort_key))
    project, version = _release(entries)
    return Report(
        rows,
        columns,
        tuple(cells),
        tuple(unplaced),
        matrix,
        facts.has_index,
        project,
        version,
        facts.updated,
    )


def _release(entries: Mapping[str, manifest.Entry]) -> tuple[str | None, str | None]:
    """(project, public version) of the newest wheel the manifest names; (None, None) with none."""
    found: list[tuple[Version, str]] = []
    for entry in entries.values():
        if entry.wheel:
            try:
                project, release, _, _ = parse_wheel_filename(posixpath.basename(entry.wheel))
            except (InvalidWheelFilename, InvalidVersion):
                continue
            found.append((Version(release.public), str(project)))
    if not found:
        return None, None
    newest, name = max(found)
    return name, str(newest)


def _row(key: VariantId) -> Row:
    return Row(key.torch, key.stable_abi)


def _column(key: VariantId) -> Column:
    return Column(key.backend.build_name, "cxx11" if key.cxx11_abi else "cxx98")


def _manifest_status(text: str) -> Status:
    """A manifest status as a report status; anything else (a manifest from elsewhere) is a failure."""
    return "built" if text == "built" else "cached" if text == "cached" else "failed"


def _entry_cell(
    vid: str, key: VariantId, entry: manifest.Entry, size: int | None, indexed: bool
) -> ReportCell:
    status = _manifest_status(entry.status)
    detail = ""
    torch = f"torch {entry.torch_version or key.torch}"
    if status != "failed":
        how = "built" if status == "built" else "cached (built earlier with the same key)"
        tested = (
            f", its project's tests ({entry.tests.get('command')})"
            if entry.tests and entry.tests.get("passed")
            else ""
        )
        reason = (
            f"{how}, passed verification, the smoke test{tested}: {entry.wheel or 'no wheel'}; {torch}"
            + (f"; engine {entry.engine}" if entry.engine else "")
            + "".join(f"; WARNING: {w}" for w in entry.warnings or ())
        )
        detail = f"warning: {entry.warnings[0]}" if entry.warnings else ""
    elif entry.status == "failed":
        text = (entry.error or "").strip()
        detail = text.splitlines()[0] if text else "failed (no error recorded)"
        reason = f"failed: {text or 'no error recorded'}"
        if entry.tests and not entry.tests.get("passed") and entry.tests.get("excerpt"):
            reason += f"\n{entry.tests['excerpt']}"  # the project's tests: pytest's summary
    else:
        detail = f"unknown manifest status {entry.status!r}"
        reason = f"{detail}: rebuild it"
    return ReportCell(
        vid,
        _row(key),
        _column(key),
        status,
        reason,
        python=key.python,
        arch=key.arch,
        detail=detail,
        wheel=entry.wheel,
        size=entry.size if entry.size is not None else size,
        seconds=entry.seconds,
        log=entry.log,
        index=f"{INDEX_LINK}/{vid}/simple/index.html" if indexed else None,
        torch_version=entry.torch_version,
        engine=entry.engine,
    )


def _pruned_backend(text: str) -> tuple[str, str]:
    """(column name, id tag) of a pruned entry's backend: ``cu124`` -> (cu124, cu124);
    ``rocm6.2.4`` -> (rocm6.2, rocm62), as variant ids spell it; a kind stays a kind."""
    try:
        backend = Backend.parse(text)
    except InvalidBackend:
        return text, text  # "cuda", "rocm": every build of the kind
    if backend.kind == "rocm" and backend.version is not None:
        backend = Backend("rocm", minor_of(backend.version))
    return backend.build_name, backend.tag


def _pruned_cell(pruned: Pruned) -> ReportCell:
    backend, tag = _pruned_backend(pruned.backend)
    abi = "any" if pruned.cxx11_abi is None else ("cxx11" if pruned.cxx11_abi else "cxx98")
    major, minor = major_minor(pruned.torch)
    head = f"torch{major}{minor}-{'*' if abi == 'any' else abi}-{tag}"
    if pruned.arch is None and pruned.python is None:
        label = f"{head}-*"
    else:
        python = (
            "*"
            if pruned.python is None
            else ("" if pruned.python == "abi3" else "-cp" + pruned.python.replace(".", ""))
        )
        label = f"{head}-{pruned.arch or '*'}-linux{python}"
    return ReportCell(
        label,
        Row(pruned.torch),
        Column(backend, abi),
        "pruned",
        f"pruned: {pruned.reason}",
        python=pruned.python,
        arch=pruned.arch,
    )


def human_size(size: int | None) -> str:
    if size is None:
        return ""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def human_seconds(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f} s"
