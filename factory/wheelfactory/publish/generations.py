"""The index in the output directory, as *generations*: ``write_index`` publishes a plan
(publish/pages.py) as a directory under ``dist/.index/`` holding the pages and hard links to the
wheels, which then becomes ``dist/index`` by an atomic symlink swap. A reader (pip, a browser,
``wheelfactory serve``) sees the old index or the new one, never a mix; a page never links a wheel
that is not in its own generation (a rebuild that replaces ``dist/<variant>/<wheel>`` leaves the
indexed inode alone); the previous generation is kept so that a download started from it
completes. A plan whose digest is the current generation's, and whose every file that generation
still holds, writes nothing; one with a file gone (removed by hand, or a copy that left some out)
is written afresh.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from wheelfactory.errors import IndexBuildError
from wheelfactory.publish.pages import IndexPlan
from wheelfactory.runner import manifest
from wheelfactory.support import paths

INDEX_LINK = "index"  # dist/index: the current generation (a symlink)
GENERATIONS = ".index"  # dist/.index/<generation>/
KEEP_GENERATIONS = 2  # the current one and the one before it (downloads in flight)
DIGEST_FILE = ".content-sha256"


def current_generation(dist: Path) -> Path | None:
    link = dist / INDEX_LINK
    return link.resolve() if link.is_symlink() else None


def _remove_leftover(path: Path) -> None:
    """A killed run's temp name: a link (never followed) or file is unlinked, a directory removed."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _holds_every_file(generation: Path, plan: IndexPlan) -> bool:
    """Whether each page, blob and linked file of ``plan`` is a regular file in ``generation``
    (a digest file says what was written, not what is still there)."""
    names = [rel for rel, _ in plan.pages] + [rel for rel, _ in plan.blobs]
    names += [rel for rel, _ in plan.links]
    return all(
        (generation / rel).is_file() and not (generation / rel).is_symlink() for rel in names
    )


def write_index(dist: Path, plan: IndexPlan) -> tuple[Path, bool]:
    """Publish ``plan`` as ``dist/index``; returns (generation directory, changed)."""
    link = dist / INDEX_LINK
    if link.exists() and not link.is_symlink():
        raise IndexBuildError(
            f"{link} exists and is not an index wheelfactory made (a symlink to a generation): "
            "move it away"
        )
    current = current_generation(dist)
    if (
        current is not None
        and (current / DIGEST_FILE).is_file()
        and (current / DIGEST_FILE).read_text().strip() == plan.digest
        and _holds_every_file(current, plan)
    ):
        return current, False
    generations = dist / GENERATIONS
    if generations.is_symlink():  # nothing under dist is followed out of it
        raise IndexBuildError(
            f"{generations} is a symlink: the index is written only inside {dist}; remove the link"
        )
    generations.mkdir(parents=True, exist_ok=True)
    for leftover in generations.glob(".tmp-*"):  # a killed run's half generation (we hold the lock)
        _remove_leftover(leftover)
    name = f"g{time.time_ns()}"
    temp = generations / f".tmp-{name}"
    temp.mkdir()
    # A fresh generation nobody reads until the rename below: its pages (index.json, the variants
    # json...) are written plainly; the generation as a whole is what appears atomically.
    for rel, text in plan.pages:  # each name checked again: whatever made it, nothing lands outside
        target = paths.inside(temp, rel, what="the index page", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for rel, data in plan.blobs:
        target = paths.inside(temp, rel, what="the index file", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for rel, source in plan.links:
        target = paths.inside(temp, rel, what="the index file", file=str(dist / manifest.MANIFEST))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)  # the same inode: a later rebuild cannot change what we list
        except OSError:
            shutil.copy2(source, target)  # another filesystem
    (temp / DIGEST_FILE).write_text(plan.digest + "\n")
    generation = generations / name
    os.rename(temp, generation)
    # Not support/atomic.py: the target is a symlink, replaced by a symlink (atomic.py refuses to
    # replace one with a file). The per-process name is enough: we hold the output directory's lock.
    swap = dist / f".{INDEX_LINK}.{os.getpid()}.tmp"
    # ours, and any a killed run left between link and rename
    for leftover in dist.glob(f".{INDEX_LINK}.*.tmp"):
        _remove_leftover(leftover)
    os.symlink(os.path.relpath(generation, dist), swap)
    os.replace(swap, link)  # the atomic step: readers switch from one complete index to the other
    for old in sorted(p for p in generations.iterdir() if p.name.startswith("g"))[
        :-KEEP_GENERATIONS
    ]:
        shutil.rmtree(old, ignore_errors=True)
    return generation, True
