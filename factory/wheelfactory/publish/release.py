"""Publishing a release to a static index (a directory or a bucket: publish/stores.py).

Releases accumulate: the target's own ``index.json`` lists every wheel published there before, so
the pages are made again from those wheels plus this dist's (publish/pages.py ``plan_index``), and
an earlier release stays listed although its wheels are in no local dist any more.

Files are immutable, as on PyPI: a wheel (or its ``.metadata``) that the target holds with other
bytes under the same name refuses the whole publish before anything is written. The same bytes
are skipped, so a publish run again after being killed completes what it started.

Order keeps readers safe: every file a page may link (wheels, ``.metadata``, provenance records,
variant-wheel copies) is written before any page, and pages deepest first (a project's page before
its variant's root, the roots before the top pages). Each write is atomic, so a reader, between any
two writes, sees pages that link only files that are there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError, PublishError
from wheelfactory.plan.index_pages import JSON_CONTENT
from wheelfactory.plan.publish_config import BucketTarget, DirectoryTarget
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.publish.index_json import InvalidListing, check_listing
from wheelfactory.publish.listing import wheels_from_listing
from wheelfactory.publish.pages import plan_index
from wheelfactory.publish.stores import Store, sha256_of
from wheelfactory.publish.variant_metadata import with_earlier_files
from wheelfactory.runner.refusals import LeftOut

LISTING = "index.json"
# Files no page may link to before they are there, and that never change once published.
IMMUTABLE_SUFFIXES = (".whl", ".metadata")
FILE_SUFFIXES = (*IMMUTABLE_SUFFIXES, ".intoto.json")
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".whl": "application/octet-stream",
    ".metadata": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".py": "text/x-python; charset=utf-8",
    ".json": "application/json",
}


@dataclass(frozen=True)
class Write:
    """One file of the plan: its bytes (a page, a ``.metadata``) or the local file holding them."""

    path: str
    body: bytes | Path
    sha256: str
    held: str | None  # the sha256 the target holds at this path; None: nothing

    @property
    def is_file(self) -> bool:
        return self.path.endswith(FILE_SUFFIXES)

    @property
    def needed(self) -> bool:
        return self.held != self.sha256

    @property
    def size(self) -> int:
        return len(self.body) if isinstance(self.body, bytes) else self.body.stat().st_size

    @property
    def content_type(self) -> str:
        if self.path.endswith("/index.json") and "/simple/" in f"/{self.path}":
            return JSON_CONTENT  # a PEP 691 page: a static host serves it with its media type
        return next(
            (t for s, t in _CONTENT_TYPES.items() if self.path.endswith(s)),
            "application/octet-stream",
        )


@dataclass(frozen=True)
class StaticPlan:
    target: DirectoryTarget | BucketTarget
    base_url: str
    writes: tuple[Write, ...]  # in the order they are written; only those whose bytes change
    unchanged: int  # files and pages already there with these bytes
    kept: int  # wheels of earlier releases, listed again from the target's index.json
    added: int  # wheels of this dist not on the target yet
    # records the target holds with other bytes for the same wheel: left as they are
    kept_provenance: tuple[str, ...]


def read_published(store: Store, target: object) -> list[IndexedWheel]:
    """The wheels the target's index.json lists (none when it has none yet). A listing that cannot
    be read stops the publish: publishing over it would drop every earlier release."""
    raw = store.read(LISTING)
    if raw is None:
        return []
    where = f"{target}/{LISTING}"
    try:
        listing = check_listing(raw)
    except InvalidListing as exc:
        raise PublishError(
            f"{where}: {exc}; it lists the releases published there, so nothing was written: "
            "restore it (or publish to an empty target)"
        ) from None
    try:
        return wheels_from_listing(listing, where=where)
    except ConfigError as exc:
        raise PublishError(
            f"{exc}; nothing was written: restore {where} (or publish to an empty target)"
        ) from None


def merge_releases(
    published: Sequence[IndexedWheel], new: Sequence[IndexedWheel], target: object
) -> tuple[list[IndexedWheel], int]:
    """Every wheel to list: the published ones, with this dist's added (the same bytes under the
    same name count once); the number of this dist's wheels that are new there. A name published
    with other bytes is PublishError: nothing is written."""
    by_path = {wheel.path: wheel for wheel in published}
    conflicts = [
        f"{w.path} (published {by_path[w.path].sha256[:12]}, this dist {w.sha256[:12]})"
        for w in new
        if w.path in by_path and by_path[w.path].sha256 != w.sha256
    ]
    if conflicts:
        raise conflict_error(target, conflicts)
    added = sum(w.path not in by_path for w in new)
    # Both copies of a wheel listed twice go on: plan_index keeps the local file and the
    # provenance link either side has.
    return [*published, *new], added


def conflict_error(target: object, conflicts: Sequence[str]) -> PublishError:
    return PublishError(
        f"{target}: {len(conflicts)} file(s) already published with other bytes: "
        f"{'; '.join(conflicts[:3])}{' ...' if len(conflicts) > 3 else ''}. A published file "
        "never changes (PyPI's rule): nothing was written; bump the version to publish "
        "new bytes"
    )


def order_writes(writes: Sequence[Write]) -> list[Write]:
    """Files first, then pages deepest first, and in one folder its index pages last (they link
    the folder's other pages: variants.json, select.py)."""

    def index_page(write: Write) -> bool:
        return write.path.rsplit("/", 1)[-1] in ("index.html", "index.json")

    return sorted(writes, key=lambda w: (not w.is_file, -w.path.count("/"), index_page(w), w.path))


def plan_static(
    store: Store,
    target: DirectoryTarget | BucketTarget,
    new: Sequence[IndexedWheel],
    skipped: Sequence[LeftOut],
    *,
    extra_pages: tuple[tuple[str, str], ...] = (),
    extra_links: tuple[tuple[str, Path], ...] = (),
) -> StaticPlan:
    """What publishing ``new`` to ``target`` writes, asking the store what it holds; nothing is
    written here. PublishError when a file would change."""
    published = read_published(store, target)
    rewritten = {wheel.path for wheel in new}
    gone = [
        wheel.path
        for wheel in published
        if wheel.path not in rewritten and not store.holds(wheel.path)
    ]
    if gone:  # the pages would go on linking them: pip would find a release it cannot download
        raise PublishError(
            f"{target}: {len(gone)} wheel(s) its {LISTING} lists are no longer there: "
            f"{'; '.join(gone[:3])}{' ...' if len(gone) > 3 else ''}. Nothing was written: put "
            "them back, or publish to an empty target (the pages link every release listed)"
        )
    wheels, added = merge_releases(published, new, target)
    base_url = (target.base_url or store.default_base_url()).rstrip("/")
    extra_pages = with_earlier_files(extra_pages, store.read)  # the variant pages accumulate too
    index = plan_index(
        wheels, list(skipped), base_url=base_url, extra_pages=extra_pages, extra_links=extra_links
    )
    candidates: list[tuple[str, bytes | Path, str]] = [
        *(
            (path, data, sha256_of(data))
            for path, data in [
                *((path, text.encode("utf-8")) for path, text in index.pages),
                *index.blobs,
            ]
        ),
        # hashed once, by plan_index
        *((path, source, index.link_sha256[path]) for path, source in index.links),
    ]
    writes: list[Write] = []
    conflicts: list[str] = []
    kept_provenance: list[str] = []
    for path, body, digest in candidates:
        write = Write(path, body, digest, store.held(path))
        if write.held is not None and write.needed and write.is_file:
            if path.endswith(IMMUTABLE_SUFFIXES):
                conflicts.append(f"{path} (held {write.held[:12]}, this dist {digest[:12]})")
            else:
                # a record of the same wheel bytes: the first one stays
                kept_provenance.append(path)
            continue
        writes.append(write)
    if conflicts:
        raise conflict_error(target, conflicts)
    needed = [w for w in writes if w.needed]
    return StaticPlan(
        target,
        base_url,
        tuple(order_writes(needed)),
        len(candidates) - len(needed),
        len(published) - (len(new) - added),
        added,
        tuple(kept_provenance),
    )


def execute(store: Store, plan: StaticPlan, say: Callable[[str], None]) -> None:
    started = time.monotonic()
    for write in plan.writes:
        store.put(write.path, write.body, write.sha256, write.content_type)
        if write.is_file:
            say(f"  wrote {write.path} ({write.size} bytes)")
    say(
        f"{plan.target}: {sum(w.is_file for w in plan.writes)} file(s) and "
        f"{sum(not w.is_file for w in plan.writes)} page(s) written, {plan.unchanged} unchanged; "
        f"{plan.added} new wheel(s), {plan.kept} from earlier releases still listed; {plan.base_url}/ "
        f"({time.monotonic() - started:.1f} s)"
    )


def describe(plan: StaticPlan) -> list[str]:
    """``--dry-run``: what would be written, in order, and which pages change."""
    lines = [
        f"{plan.target}: would write {len(plan.writes)} file(s) and page(s) ({plan.unchanged} unchanged); "
        f"{plan.added} new wheel(s), {plan.kept} from earlier releases"
    ]
    for write in plan.writes:
        what = "upload" if write.is_file else ("change" if write.held else "add")
        lines.append(f"  {what} {write.path} ({write.size} bytes)")
    lines.extend(
        f"  keep {path} (the target's record of the same wheel)" for path in plan.kept_provenance
    )
    return lines
