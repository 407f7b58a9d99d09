"""dist/manifest.json: what was built, under which key, with which result.

Written atomically (temp file + rename) so a reader never sees half of it; the whole output
directory is locked for the duration of a build so two runs cannot interleave.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout
from wheelfactory.errors import OutputLocked, WheelfactoryError

MANIFEST = "manifest.json"
LOCK = ".wheelfactory.lock"
Status = Literal["built", "cached", "failed"]




@dataclass(frozen=True)
class Entry:
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


def read(out: Path) -> dict[str, Entry]:
    path = out / MANIFEST
    try:
        data = json.loads(path.read_text())
        return {vid: Entry(**entry) for vid, entry in data.get("variants", {}).items()}
    except FileNotFoundError:
        return {}
    except (ValueError, TypeError) as exc:
        raise WheelfactoryError(f"{path} is not a wheelfactory manifest ({exc}); move it away and rebuild") from None


def write(out: Path, entries: dict[str, Entry]) -> None:
    path = out / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    data = {"schema": 1, "variants": {vid: asdict(e) for vid, e in sorted(entries.items())}}
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def lock(out: Path) -> FileLock:
    """An exclusive lock on the output directory; released by the OS if the process dies."""
    out.mkdir(parents=True, exist_ok=True)
    lock_ = FileLock(str(out / LOCK))
    try:
        lock_.acquire(timeout=0)
    except Timeout:
        raise OutputLocked(f"{out} is in use by another wheelfactory build; wait for it or use another -o") from None
    return lock_
