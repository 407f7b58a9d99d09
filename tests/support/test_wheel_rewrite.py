"""require_torch: the Requires-Dist rewrite that gives a finished wheel its variant's torch pin;
and rewrite_wheel's RECORD."""

from __future__ import annotations

import zipfile
from email.parser import BytesParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from tests.testkit import make_wheel
from wheelfactory.support.wheel_rewrite import require_torch, rewrite_wheel

PIN = "torch>=2.13,<2.14"


def requirements(metadata: bytes) -> list[Requirement]:
    return [Requirement(r) for r in BytesParser().parsebytes(metadata).get_all("Requires-Dist") or []]


def test_the_torch_line_is_replaced_and_the_others_are_untouched() -> None:
    metadata = (b"Metadata-Version: 2.1\nName: byo-ext\nVersion: 0.3.0\nRequires-Dist: numpy>=1.24\n"
                b"Requires-Dist: torch>=2.0\nRequires-Dist: pytest[testing]>=8; extra == \"test\"\n"
                b"Provides-Extra: test\n\nRequires-Dist: torch (the description mentions it)\n")
    out = require_torch(metadata, PIN)
    lines = out.decode().splitlines()
    assert lines[3:6] == ["Requires-Dist: numpy>=1.24", "Requires-Dist: torch<2.14,>=2.13",
                          'Requires-Dist: pytest[testing]>=8; extra == "test"']
    assert out.endswith(b"\n\nRequires-Dist: torch (the description mentions it)\n")  # the body is not metadata
    assert [str(r) for r in requirements(out)] == ["numpy>=1.24", "torch<2.14,>=2.13",
                                                   'pytest[testing]>=8; extra == "test"']


def test_each_torch_line_keeps_its_extras_and_markers() -> None:
    metadata = (b"Name: x\nRequires-Dist: Torch[optree] (>=2.0)\n"
                b"Requires-Dist: torch>=2.1; extra == \"gpu\"\n\n")
    found = requirements(require_torch(metadata, PIN))
    assert [(r.name.lower(), r.extras, str(r.specifier), str(r.marker or "")) for r in found] == [
        ("torch", {"optree"}, "<2.14,>=2.13", ""), ("torch", set(), "<2.14,>=2.13", 'extra == "gpu"')]


def test_a_project_that_requires_no_torch_gets_the_pin() -> None:
    after_others = require_torch(b"Name: x\nVersion: 1\nRequires-Dist: numpy\nSummary: s\n\nbody\n", PIN)
    assert after_others == (b"Name: x\nVersion: 1\nRequires-Dist: numpy\nRequires-Dist: torch<2.14,>=2.13\n"
                            b"Summary: s\n\nbody\n")
    no_body = require_torch(b"Name: x\nVersion: 1\n", "torch>=2.10")
    assert no_body == b"Name: x\nVersion: 1\nRequires-Dist: torch>=2.10\n"
    # torch only under an extra: the wheel still needs torch without it
    gated = requirements(require_torch(b'Name: x\nRequires-Dist: torch; extra == "cuda"\n\n', PIN))
    assert [str(r) for r in gated] == ['torch<2.14,>=2.13; extra == "cuda"', "torch<2.14,>=2.13"]


def test_crlf_metadata_and_unparsable_lines_are_kept() -> None:
    out = require_torch(b"Name: x\r\nRequires-Dist: torch\r\nRequires-Dist: not a [requirement\r\n\r\n", PIN)
    assert out == b"Name: x\r\nRequires-Dist: torch<2.14,>=2.13\r\nRequires-Dist: not a [requirement\r\n\r\n"


def test_rewriting_the_same_wheel_later_gives_the_same_bytes(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """No member of a rewritten wheel takes the time of the rewrite (RECORD once did)."""
    import time

    from tests.testkit import make_wheel
    from wheelfactory.support.wheel_rewrite import rewrite_wheel

    wheel = make_wheel(tmp_path / "in", "tiny", "0.1.0", files={"tiny/__init__.py": "VALUE = 1\n"})
    outputs = []
    for offset, name in ((0.0, "a"), (86400.0 * 400, "b")):
        now = time.time() + offset
        monkeypatch.setattr(time, "time", lambda now=now: now)
        outputs.append(rewrite_wheel(wheel, tmp_path / name, dist_info_files={"variant.json": b"{}"},
                                     variant_label="x").read_bytes())
    assert outputs[0] == outputs[1]


def test_directory_entries_stay_out_of_record(tmp_path: Path) -> None:
    """auditwheel's repaired wheels hold directory entries (``pkg/``); a rewrite keeps them in the
    zip and lists only files in RECORD, as the wheel spec and the index's identity check want."""
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": b"library"})
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr(zipfile.ZipInfo("tiny/"), b"")
        archive.writestr(zipfile.ZipInfo("tiny-0.1.0.dist-info/"), b"")
    out = rewrite_wheel(wheel, tmp_path / "out", contents=lambda name, data: data.upper())
    with zipfile.ZipFile(out) as archive:
        record = archive.read("tiny-0.1.0.dist-info/RECORD").decode()
        names = set(archive.namelist())
        assert archive.read("tiny/_C.abi3.so") == b"LIBRARY"
    listed = [line.split(",")[0] for line in record.splitlines()]
    assert "tiny/" in names and all(not name.endswith("/") for name in listed) and set(listed) <= names
