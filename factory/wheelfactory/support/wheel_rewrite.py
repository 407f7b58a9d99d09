"""Rewriting a finished wheel: a new version (the local label a bring-your-own build gets), its
requirement on torch (the variant's pin), extra .dist-info files (variant.json) and a variant label
in the file name, with METADATA, the .dist-info directory name and RECORD changed together so
installers see one consistent wheel.
The result is written through support/atomic.py (a hidden temp name, then a rename): it appears
only complete."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from wheelfactory.support import atomic


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _requires_dist(line: str) -> str | None:
    """The value of a ``Requires-Dist:`` header line (not a continuation line); else None."""
    name, colon, value = line.partition(":")
    return value.strip() if colon and name.lower() == "requires-dist" else None


def _torch_requirement(value: str) -> Requirement | None:
    try:
        requirement = Requirement(value)
    except InvalidRequirement:
        return None  # the project's own business: left as it is
    return requirement if canonicalize_name(requirement.name) == "torch" else None


def require_torch(metadata: bytes, requirement: str) -> bytes:
    """METADATA whose every ``Requires-Dist`` on torch has the specifier of ``requirement`` (each
    line keeps its own extras and markers; no other requirement changes), plus an unconditional
    ``Requires-Dist: <requirement>`` when no line requires torch without a marker: a torch
    extension always needs torch. Only the header block is read; the description stays as it is."""
    lines = metadata.decode("utf-8").split("\n")
    # the blank line
    end = next((n for n, line in enumerate(lines) if not line.strip("\r")), len(lines))
    eol = "\r" if lines[0].endswith("\r") else ""  # a METADATA written with CRLF keeps them
    unconditional, after = False, end
    for number in range(end):
        line = lines[number].rstrip("\r")
        value = _requires_dist(line)
        if value is None:
            continue
        after = number + 1
        found = _torch_requirement(value)
        if found is None:
            continue
        pinned = Requirement(requirement)
        pinned.extras, pinned.marker = found.extras, found.marker
        lines[number] = f"Requires-Dist: {pinned}{eol}"
        unconditional = unconditional or found.marker is None
    if not unconditional:
        lines.insert(after, f"Requires-Dist: {Requirement(requirement)}{eol}")
    return "\n".join(lines).encode("utf-8")


def rewrite_wheel(
    wheel: Path,
    dest_dir: Path,
    *,
    version: Version | None = None,
    dist_info_files: Mapping[str, bytes] | None = None,
    variant_label: str | None = None,
    torch_requirement: str | None = None,
    contents: Callable[[str, bytes], bytes] | None = None,
) -> Path:
    """A copy of ``wheel`` in ``dest_dir`` with the changes asked for; returns its path.
    ``torch_requirement``: METADATA requires torch so (:func:`require_torch`). ``contents``: each
    file outside .dist-info, by its path in the wheel and bytes, gives the bytes to ship."""
    name, old_version, _, _ = parse_wheel_filename(wheel.name)
    parts = wheel.name[: -len(".whl")].split("-")
    old_version_text = parts[1]
    new_version = version or old_version
    parts[1] = str(new_version)
    if variant_label:
        parts.append(variant_label)  # PEP 825: the label is the last component before .whl
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / ("-".join(parts) + ".whl")
    old_info = f"{parts[0]}-{old_version_text}.dist-info/"
    new_info = f"{parts[0]}-{new_version}.dist-info/"
    added = {new_info + rel: data for rel, data in (dist_info_files or {}).items()}
    records: list[list[str]] = []
    with (
        atomic.replacing(target, what="the rewritten wheel") as partial,
        zipfile.ZipFile(wheel) as source,
        zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out,
    ):
        items = [item for item in source.infolist() if item.filename != old_info + "RECORD"]
        for item in items:
            data = source.read(item.filename)
            filename = (
                new_info + item.filename[len(old_info) :]
                if item.filename.startswith(old_info)
                else item.filename
            )
            if filename in added:
                continue  # replaced below
            if contents is not None and not filename.startswith(new_info):
                data = contents(filename, data)
            if filename == new_info + "METADATA" and version is not None:
                data = re.sub(
                    rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1
                )
            if filename == new_info + "METADATA" and torch_requirement is not None:
                data = require_torch(data, torch_requirement)
            info = zipfile.ZipInfo(filename, item.date_time)
            info.external_attr, info.compress_type = item.external_attr, zipfile.ZIP_DEFLATED
            out.writestr(info, data)
            # auditwheel's wheels hold directory entries; RECORD lists files only
            if not item.is_dir():
                records.append([filename, record_hash(data), str(len(data))])
        date_time = items[0].date_time if items else (1980, 1, 1, 0, 0, 0)
        for filename, data in sorted(added.items()):
            info = zipfile.ZipInfo(filename, date_time)
            info.external_attr, info.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
            out.writestr(info, data)
            records.append([filename, record_hash(data), str(len(data))])
        records.append([f"{new_info}RECORD", "", ""])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(records)  # RECORD is CSV (PEP 376)
        # The wheel's own time, not now: a rewrite of the same wheel is the same bytes.
        info = zipfile.ZipInfo(new_info + "RECORD", date_time)
        info.external_attr, info.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
        out.writestr(info, text.getvalue())
    return target
