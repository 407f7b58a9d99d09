"""Content hashes: the build cache key and the per-build op namespace id."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path


def tree_digest(root: Path, files: Iterable[Path]) -> str:
    """sha256 over (relative path, content) of each file, in sorted order."""
    digest = hashlib.sha256()
    for rel in sorted(set(files)):
        digest.update(str(rel).encode() + b"\0")
        digest.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return digest.hexdigest()


def python_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def json_digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
