"""Rewriting a finished wheel: a new version (the local label a bring-your-own build gets), extra
.dist-info files (variant.json) and a variant label in the file name, with METADATA, the
.dist-info directory name and RECORD changed together so installers see one consistent wheel.
The result is written through support/atomic.py (a hidden temp name, then a rename): it appears
only complete."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version
from wheelfactory.support import atomic


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def rewrite_wheel(wheel: Path, dest_dir: Path, *, version: Version | None = None,
                  dist_info_files: Mapping[str, bytes] | None = None, variant_label: str | None = None) -> Path:
    """A copy of ``wheel`` in ``dest_dir`` with the changes asked for; returns its path."""
    name, old_version, _, _ = parse_wheel_filename(wheel.name)
    parts = wheel.name[:-len(".whl")].split("-")
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
    with atomic.replacing(target, what="the rewritten wheel") as partial, zipfile.ZipFile(wheel) as source, \
            zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
        items = [item for item in source.infolist() if item.filename != old_info + "RECORD"]
        for item in items:
            data = source.read(item.filename)
            filename = new_info + item.filename[len(old_info):] if item.filename.startswith(old_info) \
                else item.filename
            if filename in added:
                continue  # replaced below
            if filename == new_info + "METADATA" and version is not None:
                data = re.sub(rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1)
            info = zipfile.ZipInfo(filename, item.date_time)
            info.external_attr, info.compress_type = item.external_attr, zipfile.ZIP_DEFLATED
            out.writestr(info, data)
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
        out.writestr(new_info + "RECORD", text.getvalue())
    return target
