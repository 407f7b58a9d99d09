"""``wheelfactory index``: dist/index, made from dist/manifest.json under the output directory's
lock: the wheels collect takes (publish/collect.py), their variant metadata (variant_metadata.py)
and the build report (report.py) as the pages of one plan (pages.py), written as a generation that
replaces the current one whole (generations.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wheelfactory.publish.collect import collect
from wheelfactory.publish.generations import INDEX_LINK, write_index
from wheelfactory.publish.pages import IndexPlan, plan_index
from wheelfactory.publish.reporting import served_report
from wheelfactory.publish.select_script import DEFAULT_BASE_URL
from wheelfactory.publish.variant_metadata import variant_metadata
from wheelfactory.runner import manifest
from wheelfactory.runner.refusals import LeftOut
from wheelfactory.support.paths import StrPath


@dataclass(frozen=True)
class Indexed:
    """What ``index_dist`` wrote: the plan (its wheels and the variants left out), the generation
    ``dist/index`` names now (``changed`` False: the plan was that generation's already), and the
    variant-labelled wheel copies found changed and made again (``tampered``)."""

    out: Path
    base_url: str
    plan: IndexPlan
    generation: Path
    changed: bool
    tampered: tuple[str, ...] = ()

    @property
    def link(self) -> Path:
        """``dist/index``, the symlink to the current generation."""
        return self.out / INDEX_LINK

    @property
    def refused(self) -> tuple[LeftOut, ...]:
        return tuple(left for left in self.plan.skipped if left.refused)

    @property
    def unattested(self) -> int:
        """Wheels listed without a provenance record (``allow_unattested``)."""
        return sum(wheel.provenance is None for wheel in self.plan.wheels)


def index_dist(
    out: StrPath = "dist", *, base_url: str | None = None, allow_unattested: bool = False
) -> Indexed:
    """Write ``out``/index: one pip index per variant, find-links pages, variants.json and an
    overview, for pip commands at ``base_url`` (default: what ``serve`` binds). A wheel that is not
    what its manifest entry says is refused (``Indexed.refused``) and the others are listed: the
    command then exits 7. UsageError when the manifest lists nothing."""
    shown = Path(out)
    dist = shown.resolve()
    entries = manifest.read_listed(dist, shown=shown)
    base = (base_url or DEFAULT_BASE_URL).rstrip("/")
    with manifest.locked(dist):
        wheels, left_out = collect(dist, entries, allow_unattested=allow_unattested)
        tampered: list[str] = []
        pages, links = variant_metadata(wheels, dist, tampered=tampered)
        listed = frozenset(wheel.variant_id for wheel in wheels)
        planned = plan_index(
            wheels,
            left_out,
            base_url=base,
            extra_pages=pages,
            extra_links=links,
            report=served_report(dist, entries, listed),
        )
        generation, changed = write_index(dist, planned)
    return Indexed(dist, base, planned, generation, changed, tuple(tampered))
