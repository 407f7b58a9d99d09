"""Small valid wheels made as the factory names them, and their provenance records. Imports nothing
beyond the standard library (no pytest), so the benchmarks can make wheels too; testkit re-exports
every name."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path

DEFAULT_TAG = "cp39-abi3-manylinux_2_28_x86_64"


def make_wheel(
    directory: Path,
    name: str = "tiny",
    version: str = "0.1.0",
    *,
    tag: str = DEFAULT_TAG,
    files: Mapping[str, str | bytes] | None = None,
    build_record: Mapping[str, object] | None = None,
    metadata: str = "",
    record: str | None = None,
    metadata_version: str = "2.1",
) -> Path:
    """A small wheel zip ``<directory>/<name>-<version>-<tag>.whl``, made like the factory names them.

    It holds ``<name>/__init__.py`` (empty unless ``files`` gives it), the other ``files``
    (archive path -> content), ``<name>/_build.json`` when ``build_record`` is given, and a
    dist-info: METADATA (``metadata_version``, Name, Version, then the header lines in ``metadata``: a
    field newer than 2.1, License-Expression, needs 2.4 for twine to take it), WHEEL with the
    tag, and RECORD: by default every member with its sha256 and size, as a real build writes it
    (``record``: that text instead, "" for an empty one)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    contents: dict[str, str | bytes] = {f"{name}/__init__.py": "", **(files or {})}
    if build_record is not None:
        contents[f"{name}/_build.json"] = json.dumps(build_record)
    contents[f"{info}/METADATA"] = (f"Metadata-Version: {metadata_version}\nName: {name.replace('_', '-')}\nVersion: {version}\n"
                                    + metadata)
    contents[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    if record is None:
        lines = []
        for member, data in contents.items():
            raw = data.encode() if isinstance(data, str) else data
            digest = base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()
            lines.append(f"{member},sha256={digest},{len(raw)}\n")
        record = "".join(lines) + f"{info}/RECORD,,\n"
    contents[f"{info}/RECORD"] = record
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in contents.items():
            archive.writestr(member, data)
    return path


def write_provenance(wheel: Path, variant_id: str) -> Path:
    """``<wheel>.intoto.json``: a provenance record (runner/provenance.py's shape, its parts the
    publishing commands read) naming the wheel's bytes and the variant it was built for."""
    statement = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1",
                 "subject": [{"name": wheel.name, "digest": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}}],
                 "predicate": {"buildDefinition": {"externalParameters": {"variant": {"id": variant_id}}}}}
    path = wheel.with_name(wheel.name + ".intoto.json")
    path.write_text(json.dumps(statement, indent=2) + "\n")
    return path
