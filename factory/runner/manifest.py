"""dist/manifest.json: what was built, under which key, with which result.

Written atomically (support/atomic.py: a temp file per write, then a rename) so a reader never sees
half of it. Within a run one ManifestRecorder owns the entries and serializes the writes of the
build threads; across processes the whole output directory is locked for the duration of a build
so two runs cannot interleave.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout
from wheelfactory.errors import OutputLocked, WheelfactoryError
from wheelfactory.support import atomic

MANIFEST = "manifest.json"
LOCK = ".wheelfactory.lock"
Status = Literal["built", "cached", "failed"]


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One variant's line in the manifest; the field order is the JSON's key order."""

    status: Status
    wheel: str | None  # relative to the output directory
    sha256: str | None
    seconds: float
    key: str
    log: str | None
    error: str | None = None
    engine: str | None = None
    image: str | None = None  # the build image's id (docker engine): pins the toolchain exactly
    # What the variant id does not say, for the index pages: "2.13.0", "12.8" (None: cpu).
    torch_version: str | None = None
    toolkit: str | None = None
    size: int | None = None  # the wheel's bytes
    # Seconds per phase of the build (support/timeline.py), in the order they ran; "compile" is the
    # build backend's run. None: not built in this run (cached) or by an older wheelfactory.
    phases: dict[str, float] | None = None
    # The project's own tests against this wheel ([test]): command, passed, seconds, and an
    # excerpt of their output when they failed. None: no tests configured for this variant.
    tests: dict[str, object] | None = None
    # What verification found that the user must see and that does not fail the build (e.g. a
    # bring-your-own CUDA wheel with no device code). None: nothing.
    warnings: list[str] | None = None

    @property
    def compile_seconds(self) -> float | None:
        return self.phases.get("compile") if self.phases else None


def read(out: Path) -> dict[str, Entry]:
    path = out / MANIFEST
    try:
        data = json.loads(path.read_text())
        return {vid: Entry(**entry) for vid, entry in data.get("variants", {}).items()}
    except FileNotFoundError:
        return {}
    except (ValueError, TypeError) as exc:
        raise WheelfactoryError(f"{path} is not a wheelfactory manifest ({exc}); move it away and rebuild") from None


def write(out: Path, entries: Mapping[str, Entry]) -> None:
    """Replace the manifest with ``entries``. One writer at a time: in a run, use ManifestRecorder."""
    _write(out, {vid: _fragment(vid, entry) for vid, entry in entries.items()})


def _fragment(variant_id: str, entry: Entry) -> str:
    """One variant's part of the file, laid out as ``json.dumps(..., indent=2)`` lays it at its depth
    (strings escape their newlines, so every newline here is the layout's)."""
    return f"{json.dumps(variant_id)}: " + json.dumps(asdict(entry), indent=2).replace("\n", "\n    ")


def _write(out: Path, fragments: Mapping[str, str]) -> None:
    """The file from each variant's fragment: the bytes ``json.dumps({"schema": 1, "variants": ...},
    indent=2)`` gives, without encoding every entry again on each write (a run rewrites the file
    after every variant)."""
    variants = "{\n    " + ",\n    ".join(f for _, f in sorted(fragments.items())) + "\n  }" if fragments else "{}"
    atomic.write_text(out / MANIFEST, f'{{\n  "schema": 1,\n  "variants": {variants}\n}}\n', what="the manifest")


class ManifestRecorder:
    """The one owner of a run's manifest: the build threads record through it, each record updates
    the entries and rewrites the file under one lock, so no update is lost and no two writes race."""

    def __init__(self, out: Path, entries: Mapping[str, Entry] | None = None) -> None:
        self.out = out
        self._entries = dict(entries if entries is not None else read(out))
        self._fragments = {vid: _fragment(vid, entry) for vid, entry in self._entries.items()}
        self._lock = threading.Lock()

    def get(self, variant_id: str) -> Entry | None:
        with self._lock:
            return self._entries.get(variant_id)

    def snapshot(self) -> dict[str, Entry]:
        with self._lock:
            return dict(self._entries)

    def record(self, variant_id: str, entry: Entry) -> None:
        """Set one variant's entry and write the manifest (a killed run keeps what finished)."""
        with self._lock:
            self._entries[variant_id] = entry
            self._fragments[variant_id] = _fragment(variant_id, entry)
            _write(self.out, self._fragments)


def lock(out: Path) -> FileLock:
    """An exclusive lock on the output directory; released by the OS if the process dies."""
    out.mkdir(parents=True, exist_ok=True)
    lock_ = FileLock(str(out / LOCK))
    try:
        lock_.acquire(timeout=0)
    except Timeout:
        raise OutputLocked(f"{out} is in use by another wheelfactory build; wait for it or use another -o") from None
    return lock_
