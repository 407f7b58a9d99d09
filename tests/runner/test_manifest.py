"""dist/manifest.json: its JSON shape (a documented contract), and many build threads recording
through one ManifestRecorder at once."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from tests.testkit import race
from wheelfactory.errors import ConfigError
from wheelfactory.runner import manifest

THREADS = 8
RECORDS = 200


def entry(n: int) -> manifest.Entry:
    return manifest.Entry(status="built", wheel=f"v{n}/fake-0.1-v{n}.whl", sha256=f"{n:064x}", seconds=1.5,
                          key=f"key-{n}", log=f"v{n}/build.log", engine="fake", torch_version="2.13.0",
                          toolkit=None, size=n)


def test_the_json_shape_is_the_documented_one(tmp_path: Path) -> None:
    manifest.write(tmp_path, {"v1": entry(1)})
    data = json.loads((tmp_path / manifest.MANIFEST).read_text())
    assert data == {"schema": 1, "variants": {"v1": {
        "status": "built", "wheel": "v1/fake-0.1-v1.whl", "sha256": f"{1:064x}", "seconds": 1.5, "key": "key-1",
        "log": "v1/build.log", "error": None, "engine": "fake", "image": None, "torch_version": "2.13.0",
        "toolkit": None, "size": 1, "phases": None, "tests": None, "warnings": None, "hub_metadata": None,
        "gate": None}}}
    assert list(data["variants"]["v1"]) == ["status", "wheel", "sha256", "seconds", "key", "log", "error", "engine",
                                            "image", "torch_version", "toolkit", "size", "phases", "tests",
                                            "warnings", "hub_metadata", "gate"]
    assert manifest.read(tmp_path) == {"v1": entry(1)}


def test_read_checks_every_field_the_entry_has() -> None:
    """read() validates each Entry field by its declared JSON shape: a new field needs its shape."""
    assert list(manifest._FIELD_TYPES) == [field.name for field in dataclasses.fields(manifest.Entry)]


def test_a_written_manifest_with_every_field_set_reads_back(tmp_path: Path) -> None:
    full = dataclasses.replace(entry(1), error="boom", image="sha256:ab", phases={"compile": 2.0, "repair": 1},
                               tests={"command": "pytest", "passed": True}, warnings=["no device code"])
    manifest.write(tmp_path, {"v1": full})
    assert manifest.read(tmp_path) == {"v1": full}


@pytest.mark.parametrize("text, message", [
    ("[]", "manifest.json: expected a JSON object, got a list"),
    ('{"schema": 1, "variants": []}', "manifest.json: variants: expected an object, got a list"),
    ('{"schema": 1, "variants": {"v": {"status": "built"}}}', "manifest.json: variants.v: missing key wheel"),
    ('{"schema": 1, "variants": {"v": 3}}', "manifest.json: variants.v: expected an object, got a number"),
    ('{"schema": 1, "variants": {}, "extra": 1}', "manifest.json: extra: unknown key"),
    ('{"schema": 1, "variants": {"v": {"status": "built", "engine": "\\ud800"}}}',
     "manifest.json: holds text that is not valid Unicode"),
    ('{"schema": 9, "variants": {}}', "manifest.json: schema: unknown manifest schema 9"),
    ("{", "manifest.json: not JSON"),
])
def test_a_bad_manifest_is_a_config_error_naming_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / manifest.MANIFEST).write_text(text)
    with pytest.raises(ConfigError) as raised:
        manifest.read(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path}/{message}")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_file_is_byte_for_byte_what_json_dumps_gives(tmp_path: Path, count: int) -> None:
    entries = {f"v{n}": entry(n) for n in range(count)}
    if count:
        entries["z\n\"odd\"\tid é"] = manifest.Entry(status="failed", wheel=None, sha256=None, seconds=0.0, key="",
                                                  log=None, error='line 1\nline "2" \\ é\u2028')
    manifest.write(tmp_path, entries)
    expected = {"schema": 1, "variants": {vid: dataclasses.asdict(e) for vid, e in sorted(entries.items())}}
    assert (tmp_path / manifest.MANIFEST).read_text() == json.dumps(expected, indent=2) + "\n"
    (tmp_path / "r").mkdir()
    recorder = manifest.ManifestRecorder(tmp_path / "r", entries)
    recorder.record("v-new", entry(99))
    expected["variants"] = {vid: dataclasses.asdict(e) for vid, e in sorted({**entries, "v-new": entry(99)}.items())}
    assert (tmp_path / "r" / manifest.MANIFEST).read_text() == json.dumps(expected, indent=2) + "\n"


def test_an_entry_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        manifest.Entry("built", None, None, 1.0, "k", None)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        entry(1).status = "failed"  # type: ignore[misc]


def test_concurrent_records_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads x 200 records, all released at once: no write fails (the old per-process temp name
    made one thread rename another's temp file away: FileNotFoundError) and every variant is in the
    final file. fsync is skipped: it makes 1,600 writes slow and has no part in the race."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    manifest.write(tmp_path, {"earlier": entry(-1)})  # a previous run's entry is kept
    recorder = manifest.ManifestRecorder(tmp_path)
    errors = race(lambda t, i: recorder.record(f"t{t}-r{i}", entry(t * RECORDS + i)), THREADS, RECORDS)
    assert errors == [], f"{len(errors)} of {THREADS * RECORDS} records failed, e.g. {errors[0]!r}"
    expected = {f"t{t}-r{i}" for t in range(THREADS) for i in range(RECORDS)} | {"earlier"}
    on_disk = json.loads((tmp_path / manifest.MANIFEST).read_text())["variants"]
    assert set(on_disk) == expected
    assert manifest.read(tmp_path) == recorder.snapshot()
    assert manifest.read(tmp_path)["t3-r7"] == entry(3 * RECORDS + 7)
    assert [p.name for p in tmp_path.iterdir()] == [manifest.MANIFEST]  # no temp file left
