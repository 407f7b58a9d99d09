from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.project.bring_your_own import set_local_version


def make_wheel(directory: Path, version: str = "0.3.0") -> Path:
    wheel = directory / f"byo_ext-{version}-cp311-cp311-manylinux_2_34_x86_64.whl"
    info = f"byo_ext-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("byo_ext/__init__.py", "x = 1\n")
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: byo-ext\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        archive.writestr(f"{info}/RECORD", "stale\n")
    return wheel


def test_set_local_version_rewrites_metadata_name_and_record(tmp_path: Path) -> None:
    out = set_local_version(make_wheel(tmp_path), "cputorch2.6cxx98", tmp_path / "out")
    assert out.name == "byo_ext-0.3.0+cputorch2.6cxx98-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        info = "byo_ext-0.3.0+cputorch2.6cxx98.dist-info"
        assert f"{info}/METADATA" in names and not any(n.startswith("byo_ext-0.3.0.dist-info") for n in names)
        assert "Version: 0.3.0+cputorch2.6cxx98" in archive.read(f"{info}/METADATA").decode()
        rows = list(csv.reader(io.StringIO(archive.read(f"{info}/RECORD").decode())))
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                assert digest == "" and size == ""
                continue
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert {row[0] for row in rows} == set(names)
    assert not list((tmp_path / "out").glob(".*partial"))


def test_a_wheel_with_a_local_label_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="already has a local version label"):
        set_local_version(make_wheel(tmp_path, "0.3.0+mine"), "cputorch2.6", tmp_path / "out")
