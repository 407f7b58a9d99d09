"""``wheelfactory publish``: one built (and checked) dist sent to every target.

Every target is planned before any is written: a wheel one of them holds with other bytes stops
the whole publish with nothing changed anywhere. Then the static targets (publish/release.py) and
the upload servers (publish/upload.py) are written one after the other.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from wheelfactory.errors import PublishError, UsageError
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.publish_config import (
    BucketTarget,
    DirectoryTarget,
    InvalidTarget,
    PublishConfig,
    Target,
    UploadTarget,
    parse_target,
)
from wheelfactory.plan.read import read_matrix
from wheelfactory.publish import release, upload
from wheelfactory.publish.collect import IndexedWheel, collect
from wheelfactory.publish.pypi_default import default_wheels
from wheelfactory.publish.stores import Store, open_store
from wheelfactory.publish.variant_metadata import variant_metadata
from wheelfactory.runner import manifest
from wheelfactory.runner.refusals import LeftOut
from wheelfactory.support.paths import StrPath


@dataclass(frozen=True)
class PublishRequest:
    dist: Path
    config: PublishConfig
    dry_run: bool = False
    allow_unattested: bool = False


@dataclass(frozen=True)
class Published:
    """What a publish did (or, with dry_run, would do): per target, one summary line."""

    lines: tuple[str, ...]
    unattested: int


def _checked_wheels(dist: Path, allow_unattested: bool) -> tuple[list[IndexedWheel], list[LeftOut]]:
    entries = manifest.read_listed(dist)
    wheels, skipped = collect(dist, entries, allow_unattested=allow_unattested)
    refused = [s for s in skipped if s.refused]
    if refused:  # a release is published whole or not at all
        raise PublishError(
            f"{len(refused)} variant(s) refused, nothing published: "
            + "; ".join(f"{s.variant_id}: {s.reason}" for s in refused[:3])
        )
    if not wheels:
        raise UsageError(f"{dist / manifest.MANIFEST}: no built wheel to publish")
    return wheels, skipped


def _default_wheels(
    request: PublishRequest, wheels: Sequence[IndexedWheel], table: CompatTable
) -> list[Path]:
    """PyPI's default variant without its local label, made only where a target refuses labels."""
    wanted = any(isinstance(t, UploadTarget) and not t.local_labels for t in request.config.targets)
    if not wanted or request.config.pypi_default is False:
        return []
    return default_wheels(wheels, table, request.config.pypi_default, request.dist)


def publish(request: PublishRequest, table: CompatTable, say: Callable[[str], None]) -> Published:
    if not request.config.targets:
        raise UsageError(
            "no publish target: name one with --to (s3://bucket/prefix, a directory, an upload URL "
            "or a twine alias), or list them in matrix.toml's [publish] table"
        )
    dist = request.dist
    targets = distinct_targets(request.config.targets, say)
    # Nothing rebuilds the wheels while they are read and sent; a dry run sends nothing, and takes
    # no lock either (the lock file would be its one write).
    with contextlib.ExitStack() as scratch:
        if not request.dry_run:
            scratch.enter_context(manifest.locked(dist))
        wheels, skipped = _checked_wheels(dist, request.allow_unattested)
        tampered: list[str] = []
        pages: tuple[tuple[str, str], ...] = ()
        links: tuple[tuple[str, Path], ...] = ()
        if any(not isinstance(t, UploadTarget) for t in targets):  # only static pages hold them
            # A dry run writes nothing anywhere: the labelled wheel copies go to a scratch folder
            copies = (
                Path(scratch.enter_context(tempfile.TemporaryDirectory()))
                if request.dry_run
                else dist
            )
            pages, links = variant_metadata(wheels, copies, tampered=tampered)
        if tampered:
            raise PublishError(
                f"variant wheel copies changed under {dist}: {'; '.join(tampered[:3])}; "
                "run `wheelfactory index` and publish again"
            )
        defaults = _default_wheels(request, wheels, table)
        lines: list[str] = []
        # each static target held from its plan to its last write
        with contextlib.ExitStack() as sessions:
            # Every target is planned (and what it holds read) before any is written: a conflict
            # on one leaves all of them as they were.
            statics: list[tuple[Store, release.StaticPlan]] = []
            uploads: list[upload.UploadPlan] = []
            for target in targets:
                if isinstance(target, UploadTarget):
                    uploads.append(upload.read_plan(target, wheels, defaults))
                    continue
                store = open_store(target)
                if not request.dry_run:  # the lock (and the directory) are writes too
                    sessions.enter_context(store.session())
                statics.append(
                    (
                        store,
                        release.plan_static(
                            store, target, wheels, skipped, extra_pages=pages, extra_links=links
                        ),
                    )
                )
            for store, plan in statics:
                if request.dry_run:
                    lines.extend(release.describe(plan))
                else:
                    release.execute(store, plan, say)
            for planned in uploads:
                if request.dry_run:
                    lines.extend(upload.render_plan(planned))
                else:
                    started = time.monotonic()
                    result = upload.execute_plan(planned, say=say)
                    lines.append(f"{planned.target}: {result} ({time.monotonic() - started:.1f} s)")
    return Published(tuple(lines), sum(w.provenance is None for w in wheels))


def distinct_targets(targets: Sequence[Target], say: Callable[[str], None]) -> tuple[Target, ...]:
    """``targets`` each once: the same directory named twice (``site`` and ``site/../site``, a link
    to it), bucket prefix or upload URL is one target, said in one line (two sessions on one
    directory would block each other on its lock)."""
    seen: dict[object, Target] = {}
    for target in targets:
        key = _identity(target)
        if key in seen:
            say(f"{target}: named twice (as {seen[key]}): published once")
            continue
        seen[key] = target
    return tuple(seen.values())


def _identity(target: Target) -> object:
    if isinstance(target, DirectoryTarget):
        return ("directory", os.path.realpath(target.path))
    if isinstance(target, BucketTarget):
        return ("bucket", target.endpoint_url, target.bucket, target.prefix.strip("/"))
    return ("upload", target.url, target.repository)


def targets_from_cli(
    texts: Sequence[str], config: PublishConfig, base_dir: Path, *, base_url: str | None = None
) -> tuple[Target, ...]:
    """``--to`` replaces the matrix's targets; each string read as [publish] reads one."""
    if not texts:
        if base_url is not None:
            raise UsageError(
                "--base-url goes with --to (in matrix.toml, give each target its base_url)"
            )
        return config.targets
    targets: list[Target] = []
    for text in texts:
        try:
            targets.append(parse_target(text, base_dir=base_dir, base_url=base_url))
        except InvalidTarget as exc:
            raise UsageError(f"--to: {exc}") from None
    return tuple(targets)


def publish_dist(
    out: StrPath = "dist",
    *,
    matrix: StrPath | None = None,
    compat: StrPath | None = None,
    targets: Sequence[str] = (),
    base_url: str | None = None,
    dry_run: bool = False,
    allow_unattested: bool = False,
    say: Callable[[str], None] = print,
) -> Published:
    """``wheelfactory publish``: ``out``'s wheels to the targets of ``matrix``'s [publish] table
    (default: matrix.toml if it exists), or to ``targets`` (read as [publish] reads one, with
    ``base_url`` for the static ones); ``say`` hears each step. ``dry_run``: what would be sent
    and which pages change (``Published.lines``), nothing written."""
    compat_path = Path(compat) if compat is not None else None
    matrix_path = Path(matrix) if matrix is not None else None
    if matrix_path is None and Path("matrix.toml").is_file():
        matrix_path = Path("matrix.toml")
    if matrix_path is not None:
        spec, table = read_matrix(matrix_path, compat_path)
        config = spec.publish
    else:
        table, config = load_table(compat_path), PublishConfig()
    config = replace(
        config, targets=targets_from_cli(targets, config, Path.cwd(), base_url=base_url)
    )
    request = PublishRequest(
        Path(out).resolve(), config, dry_run=dry_run, allow_unattested=allow_unattested
    )
    return publish(request, table, say)
