"""Property-based fuzzing of what `index`, `export`, `report`, `merge`, `serve` and `which` read from dist/.

A dist/ is input like matrix.toml: a manifest.json someone edited (or a CI artifact that was
damaged), wheels that are not zips or carry a bad build record, an index.json that is corrupt.
Every such input must give exit 0 (the bad part skipped, with its reason) or exit 2 (7 for a part
`merge` cannot take) with exactly one stderr line ``wheelfactory: ...`` (``select: ...`` for
``which``, whose work runs in the served, standard-library select.py), never a traceback; nothing
may be written outside the dist and output directories; and an `index` that refuses a manifest
leaves the previous index generation served as it was.

Generators:

* manifests: any JSON value at the top; a valid manifest with one field of one entry replaced by
  a value of the wrong type, or removed, or set to a hostile string; unknown keys; bad schemas;
* wheels: a valid dist whose wheel is replaced by random bytes, by a zip without METADATA, by a zip
  whose ``_build.json`` is not JSON or has the wrong shape, or renamed to something that is not a
  wheel's file name (the manifest's sha256 and path updated, so the wheel gets as far as it can);
* provenance records: any bytes or JSON value beside a good wheel, or a statement about other bytes;
* index.json: any JSON value, and a valid listing with a variant's key removed or mistyped, read by
  the ``which`` CLI (a subprocess: a few examples), select.py's ``main`` in-process and ``serve``'s
  reader (``publish.index.read_listing``).

Documents per run: manifests 150, wheels 80, wheel names 30, provenance records 40, index.json
100 (select.py) + 60 (serve's reader) + 8 (the ``which`` CLI): 468.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.testkit import make_wheel, write_provenance
from wheelfactory.cli.main import main
from wheelfactory.errors import ConfigError
from wheelfactory.publish import select
from wheelfactory.publish.listing import read_listing
from wheelfactory.runner import manifest

# No example database: the suite must not write .hypothesis/ into the checkout.
FUZZ = settings(deadline=None, database=None, derandomize=True,  # CI sees what a local run saw
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                phases=[Phase.explicit, Phase.generate, Phase.shrink])

def examples(count: int) -> int:
    """``count``, times WHEELFACTORY_FUZZ_SCALE for a longer hunt (default 1: the suite's ~430 documents)."""
    return max(1, int(count * float(os.environ.get("WHEELFACTORY_FUZZ_SCALE", "1"))))


VID = "torch213-cxx11-cpu-x86_64-linux"
ABI3_VID = "torch213-cxx11-cpu-x86_64-linux-abi3"  # hypothetical second id; parsed or skipped either way
COMMANDS = ("index", "export", "report", "merge")
# --skip-abi-check writes this warning line before any error; it is not the error.
ABI_WARNING = "--skip-abi-check"

# Strings a hostile manifest may hold (rich markup among them: the CLI prints skip reasons escaped).
HOSTILE = st.sampled_from(["", "../x", "/etc/passwd", "a/../../b", "\n", "line\nbreak", "\x00", "\u202e",
                           "x" * 3000, "[red]x", "boom [/x]", "%s%n", "{}", "C:\\x", "~", " ", "nul\x00l", "2.13.0/../..",
                           "torch213-cxx11-cpu-x86_64-linux", "ü", "\ud800"])
TEXT = st.one_of(HOSTILE, st.text(max_size=40))
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


# --------------------------------------------------------------------------------------------
# A dist to damage, and running the CLI on it
# --------------------------------------------------------------------------------------------


def good_entry(wheel: Path, dist: Path) -> dict[str, Any]:
    return {"status": "built", "wheel": str(wheel.relative_to(dist)), "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "seconds": 1.0, "key": "k", "log": f"{VID}/build.log", "error": None, "engine": "docker", "image": None,
            "torch_version": "2.13.0", "toolkit": None, "size": None, "phases": None, "tests": None, "warnings": None}


def good_dist(dist: Path) -> tuple[Path, dict[str, Any]]:
    """One small valid variant (a pure-Python tiny wheel with a build record) and its manifest document."""
    wheel = make_wheel(dist / VID, "tiny", "0.1.0+cputorch2.13", files={"tiny/__init__.py": "VALUE = 1\n"},
                       build_record={"namespace": "_tiny_cpu_0123abcd", "arch_list": []},
                       metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n")
    write_provenance(wheel, VID)  # as a build writes it (runner/provenance.py)
    (dist / VID / "build.log").write_text("log\n")
    return wheel, {"schema": 1, "variants": {VID: good_entry(wheel, dist)}}


def write_manifest(dist: Path, document: Any) -> None:
    dist.mkdir(parents=True, exist_ok=True)
    (dist / manifest.MANIFEST).write_text(json.dumps(document))


def snapshot(root: Path, *, skip: tuple[Path, ...]) -> dict[str, int]:
    """Every file under ``root`` except those under ``skip``: path -> size."""
    found = {}
    for path in root.rglob("*"):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(root))] = path.stat().st_size
    return found


@contextlib.contextmanager
def sandbox() -> Iterator[tuple[Path, Path, Path]]:
    """(root, dist, out): a fresh tree, the working directory inside it (no matrix.toml there)."""
    with tempfile.TemporaryDirectory(prefix="wf-fuzz-") as temp:
        root = Path(temp)
        (root / "cwd").mkdir()
        (root / "sibling").mkdir()
        (root / "sibling" / "keep.txt").write_text("untouched\n")
        before = Path.cwd()
        os.chdir(root / "cwd")
        try:
            yield root, root / "dist", root / "out"
        finally:
            os.chdir(before)


def run(capfd: pytest.CaptureFixture[str], command: str, dist: Path, out: Path) -> tuple[int, str, str]:
    args = {"index": ["index", "-o", str(dist)],
            "export": ["export", "-o", str(dist), "--hf-layout", str(out)],
            "report": ["report", "-o", str(dist)],
            "merge": ["merge", str(dist), "-o", str(out)],
            "which": ["which", "--index", str(dist / "index")]}[command]
    capfd.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capfd.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def assert_clean(code: int, out: str, err: str, *, prefix: str = "wheelfactory: ",
                 codes: tuple[int, ...] = (0, 2, 7)) -> None:
    """``code`` is one of ``codes``; exit 2 (bad input) or 7 (a part merge cannot take) is exactly
    one stderr line starting with ``prefix``."""
    assert "Traceback" not in out + err, err
    assert code in codes, (code, out, err)
    if code in (2, 7):
        lines = [line for line in err.splitlines() if ABI_WARNING not in line]
        assert len(lines) == 1, err
        assert lines[0].startswith(prefix), err


def assert_contained(root: Path, dist: Path, out: Path, before: dict[str, int]) -> None:
    assert snapshot(root, skip=(dist, out)) == before


def check_commands(capfd: pytest.CaptureFixture[str], root: Path, dist: Path, out: Path, commands: tuple[str, ...]
                   ) -> list[int]:
    before = snapshot(root, skip=(dist, out))
    codes = []
    for command in commands:
        code, stdout, stderr = run(capfd, command, dist, out)
        assert_clean(code, stdout, stderr)
        assert_contained(root, dist, out, before)
        codes.append(code)
    return codes


# --------------------------------------------------------------------------------------------
# Manifests
# --------------------------------------------------------------------------------------------

FIELDS = [field.name for field in dataclasses.fields(manifest.Entry)]


@st.composite
def bad_manifests(draw: st.DrawFn) -> Any:
    """A manifest document to write over a valid dist's (None: keep the good one's shape, mutated)."""
    kind = draw(st.sampled_from(["top", "schema", "variants", "entry", "field", "missing", "unknown", "hostile"]))
    if kind == "top":
        return ("replace", draw(JSON))
    if kind == "schema":
        return ("schema", draw(JSON))
    if kind == "variants":
        return ("variants", draw(JSON))
    if kind == "entry":
        return ("entry", draw(JSON))
    if kind == "field":
        return ("field", draw(st.sampled_from(FIELDS)), draw(JSON))
    if kind == "missing":
        return ("missing", draw(st.sampled_from(FIELDS)))
    if kind == "unknown":
        return ("unknown", draw(TEXT.filter(lambda k: k not in FIELDS)), draw(JSON))
    return ("field", draw(st.sampled_from(["wheel", "log", "error", "engine", "image", "torch_version", "toolkit",
                                           "key", "sha256"])), draw(TEXT))


def apply(document: dict[str, Any], change: tuple[Any, ...]) -> Any:
    entry = document["variants"][VID]
    kind = change[0]
    if kind == "replace":
        return change[1]
    if kind == "schema":
        document["schema"] = change[1]
    elif kind == "variants":
        document["variants"] = change[1]
    elif kind == "entry":
        document["variants"][VID] = change[1]
    elif kind == "field":
        entry[change[1]] = change[2]
    elif kind == "missing":
        entry.pop(change[1], None)  # a field the good entry leaves out (its default) is missing already
    elif kind == "unknown":
        entry[change[1]] = change[2]
    return document


@settings(FUZZ, max_examples=examples(150))
@given(change=bad_manifests(), command=st.sampled_from(COMMANDS))
def test_a_bad_manifest_is_one_line_or_skipped(capfd: pytest.CaptureFixture[str], change: tuple[Any, ...],
                                               command: str) -> None:
    with sandbox() as (root, dist, out):
        _, document = good_dist(dist)
        write_manifest(dist, document)
        assert check_commands(capfd, root, dist, out, ("index",)) == [0]  # the generation readers have
        served = (dist / "index").resolve()
        listing = (served / "index.json").read_bytes()
        write_manifest(dist, apply(document, change))
        (code,) = check_commands(capfd, root, dist, out, (command,))
        read_listing(dist)  # whatever happened, a complete generation is served
        if command == "index" and code != 0:  # refused: the previous generation, untouched
            assert (dist / "index").resolve() == served and (served / "index.json").read_bytes() == listing


@pytest.mark.parametrize("field, value, expected", [
    ("wheel", 3, f"variants.{VID}: wheel: expected a string, got 3"),
    ("seconds", "1", f"variants.{VID}: seconds: expected a number, got \"1\""),
    ("status", "done", f"variants.{VID}: status: expected one of built, cached, failed, got \"done\""),
    ("warnings", ["a", 1], f"variants.{VID}: warnings: [1]: expected a string, got 1"),
    ("phases", {"compile": "x"}, f"variants.{VID}: phases: compile: expected a number, got \"x\""),
    ("size", True, f"variants.{VID}: size: expected an integer, got true"),
])
def test_a_wrong_typed_field_names_the_file_and_the_key(tmp_path: Path, field: str, value: Any, expected: str) -> None:
    _, document = good_dist(tmp_path)
    document["variants"][VID][field] = value
    write_manifest(tmp_path, document)
    with pytest.raises(ConfigError) as raised:
        manifest.read(tmp_path)
    assert str(raised.value) == f"{tmp_path / manifest.MANIFEST}: {expected}"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_manifest_that_is_a_directory_is_one_line(capfd: pytest.CaptureFixture[str], command: str) -> None:
    with sandbox() as (root, dist, out):
        (dist / manifest.MANIFEST).mkdir(parents=True)
        assert check_commands(capfd, root, dist, out, (command,)) == [2]


@pytest.mark.parametrize("text", [b"", b"{", b"\xff\xfe", b"[" * 100_000, b'{"schema": 2, "variants": {}}',
                                  b'{"variants": {}}', b'{"schema": true, "variants": {}}'])
def test_an_unreadable_manifest_is_one_line(capfd: pytest.CaptureFixture[str], text: bytes) -> None:
    with sandbox() as (root, dist, out):
        dist.mkdir()
        (dist / manifest.MANIFEST).write_bytes(text)
        assert check_commands(capfd, root, dist, out, COMMANDS) == [2] * len(COMMANDS)


def test_a_skip_reason_with_markup_is_printed_plainly(capfd: pytest.CaptureFixture[str]) -> None:
    with sandbox() as (root, dist, out):
        _, document = good_dist(dist)
        document["variants"][VID].update(status="failed", error="boom [/x]")
        write_manifest(dist, document)
        check_commands(capfd, root, dist, out, ("index",))


# --------------------------------------------------------------------------------------------
# Wheels
# --------------------------------------------------------------------------------------------


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


INFO = "tiny-0.1.0+cputorch2.13.dist-info"
METADATA = {f"{INFO}/METADATA": b"Metadata-Version: 2.1\nName: tiny\nVersion: 0.1.0+cputorch2.13\n"}


@st.composite
def bad_wheel_bytes(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "no-metadata", "record", "record-json", "members", "truncated"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "no-metadata":
        return zip_bytes({"tiny/__init__.py": b"", **draw(st.dictionaries(
            st.sampled_from(["tiny/x.py", "other/y.py", "README", "tiny/_build.json"]), st.binary(max_size=20),
            max_size=3))})
    if kind == "record":
        record = draw(st.binary(max_size=60))
        return zip_bytes({"tiny/__init__.py": b"", "tiny/_build.json": record, **METADATA})
    if kind == "record-json":
        record = json.dumps(draw(JSON)).encode()
        return zip_bytes({"tiny/__init__.py": b"", "tiny/_build.json": record, **METADATA})
    if kind == "members":
        names = draw(st.lists(st.sampled_from(["tiny/__init__.py", "tiny/", "a/b", "tiny/_build.json/x", "x",
                                               f"{INFO}/METADATA", "other/__init__.py", "tiny/../../esc",
                                               "/abs", "tiny/a", "tiny/a/b"]), max_size=5, unique=True))
        return zip_bytes({name: b"{}" for name in names} | METADATA)
    good = zip_bytes({"tiny/__init__.py": b"VALUE = 1\n", "tiny/_build.json": b"{}", **METADATA})
    return good[:draw(st.integers(0, len(good) - 1))]


def replace_wheel(dist: Path, wheel: Path, document: dict[str, Any], data: bytes, name: str | None = None
                  ) -> None:
    target = wheel if name is None else wheel.with_name(name)
    wheel.unlink()
    target.write_bytes(data)
    document["variants"][VID].update(wheel=str(target.relative_to(dist)), sha256=hashlib.sha256(data).hexdigest())
    write_manifest(dist, document)


@settings(FUZZ, max_examples=examples(80))
@given(data=bad_wheel_bytes(), command=st.sampled_from(COMMANDS))
def test_a_bad_wheel_is_one_line_or_skipped(capfd: pytest.CaptureFixture[str], data: bytes, command: str) -> None:
    with sandbox() as (root, dist, out):
        wheel, document = good_dist(dist)
        replace_wheel(dist, wheel, document, data)
        check_commands(capfd, root, dist, out, (command,))


WHEEL_NAME = st.one_of(
    st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=30),
    st.sampled_from(["x.whl", "tiny.whl", "tiny-0.1.0.whl", "tiny-x-cp39-abi3-any.whl", "tiny-0.1.0-cp39-abi3.whl",
                     "-0.1.0-cp39-abi3-manylinux_2_28_x86_64.whl", "tiny-0.1.0-!!-cp39-abi3-any.whl",
                     "tiny-0.1.0-cp39-abi3-manylinux_2_28_x86_64.zip", "tiny__x-0.1-py3-none-any.whl"]),
).filter(lambda n: n not in (".", "..") and len(n.encode()) < 200)


@settings(FUZZ, max_examples=examples(30))
@given(name=WHEEL_NAME)
def test_a_wheel_with_a_bad_name_is_skipped_or_one_line(capfd: pytest.CaptureFixture[str], name: str) -> None:
    with sandbox() as (root, dist, out):
        wheel, document = good_dist(dist)
        replace_wheel(dist, wheel, document, wheel.read_bytes(), name)
        check_commands(capfd, root, dist, out, ("index", "export"))


def test_a_non_zip_wheel_is_skipped_with_its_reason(capfd: pytest.CaptureFixture[str]) -> None:
    with sandbox() as (root, dist, out):
        wheel, document = good_dist(dist)
        replace_wheel(dist, wheel, document, b"not a zip")
        assert check_commands(capfd, root, dist, out, ("index",)) == [7]  # refused: the index is written, then exit 7
        listing = json.loads((dist / "index" / "index.json").read_text())
        assert listing["variants"] == []
        assert "is not a readable wheel" in listing["skipped"][0]["reason"]


def test_a_build_record_of_the_wrong_shape_is_skipped_with_its_reason(capfd: pytest.CaptureFixture[str]) -> None:
    with sandbox() as (root, dist, out):
        wheel, document = good_dist(dist)
        record = json.dumps({"arch_list": "8.0"}).encode()
        replace_wheel(dist, wheel, document, zip_bytes({"tiny/__init__.py": b"", "tiny/_build.json": record,
                                                        **METADATA}))
        assert check_commands(capfd, root, dist, out, ("index",)) == [7]  # refused: the index is written, then exit 7
        reason = json.loads((dist / "index" / "index.json").read_text())["skipped"][0]["reason"]
        assert "tiny/_build.json: arch_list: expected a list of strings" in reason


# --------------------------------------------------------------------------------------------
# Provenance records beside the wheels
# --------------------------------------------------------------------------------------------


@st.composite
def bad_provenance(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "subject", "digest"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    statement: dict[str, Any] = {"_type": "https://in-toto.io/Statement/v1", "predicate": {},
                                 "predicateType": "https://slsa.dev/provenance/v1"}
    if kind == "subject":
        statement["subject"] = draw(JSON)
    else:
        statement["subject"] = [{"name": draw(TEXT), "digest": {"sha256": draw(TEXT)}}]
    return json.dumps(statement).encode()


@settings(FUZZ, max_examples=examples(40))
@given(data=bad_provenance(), command=st.sampled_from(("index", "merge")))
def test_a_bad_provenance_record_keeps_its_wheel_out_and_is_not_a_traceback(
        capfd: pytest.CaptureFixture[str], data: bytes, command: str) -> None:
    with sandbox() as (root, dist, out):
        wheel, document = good_dist(dist)
        write_manifest(dist, document)
        wheel.with_name(wheel.name + ".intoto.json").write_bytes(data)
        (code,) = check_commands(capfd, root, dist, out, (command,))
        assert code == 7  # refused (PublishError): the rest is written, the command fails
        if command == "index":
            assert json.loads((dist / "index" / "index.json").read_text())["variants"] == []  # none is about it


# --------------------------------------------------------------------------------------------
# index.json (serve, which)
# --------------------------------------------------------------------------------------------

GOOD_VARIANT = {"id": VID, "project": "tiny", "version": "0.1.0+cputorch2.13", "torch": "2.13", "torch_version": "2.13.0",
                "backend": "cpu", "toolkit": None, "cxx11_abi": True, "python": "abi3", "arch": "x86_64",
                "stable_abi": False, "index": f"{VID}/simple/"}


@st.composite
def bad_listings(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "variants", "field", "missing"]))
    if kind == "bytes":
        return draw(st.binary(max_size=100))
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    if kind == "variants":
        return json.dumps({"schema": 1, "variants": draw(JSON)}).encode()
    variant = dict(GOOD_VARIANT)
    key = draw(st.sampled_from(sorted(GOOD_VARIANT)))
    if kind == "field":
        variant[key] = draw(JSON)
    else:
        variant.pop(key)
    return json.dumps({"schema": 1, "variants": [variant]}).encode()


def index_with(root: Path, listing: bytes) -> Path:
    index = root / "dist" / "index"
    index.mkdir(parents=True, exist_ok=True)
    (index / "index.json").write_bytes(listing)
    (index / "index.html").write_text("<html></html>\n")
    return root / "dist"


@settings(FUZZ, max_examples=examples(100))
@given(listing=bad_listings())
def test_select_reads_a_bad_index_json_in_one_line(capfd: pytest.CaptureFixture[str], listing: bytes) -> None:
    """select.py's own main, in-process (torch imported once): exit 0, 1 (no variant fits) or 2."""
    with sandbox() as (root, _, _):
        dist = index_with(root, listing)
        capfd.readouterr()
        try:
            code = select.main(["--index", str(dist / "index")])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            if not isinstance(exc.code, int):  # a message SystemExit: printed by the interpreter
                print(exc.code, file=sys.stderr)
        captured = capfd.readouterr()
        assert "Traceback" not in captured.out + captured.err
        assert code in (0, 1, 2)
        if code == 2:
            assert len(captured.err.splitlines()) == 1 and captured.err.startswith("select: "), captured.err


@settings(FUZZ, max_examples=examples(60))
@given(listing=bad_listings())
def test_serve_reads_a_bad_index_json_as_a_config_error(listing: bytes) -> None:
    with sandbox() as (root, _, _):
        dist = index_with(root, listing)
        try:
            read_listing(dist)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(str(dist / "index" / "index.json"))


@settings(FUZZ, max_examples=examples(8))
@given(listing=bad_listings())
def test_the_which_cli_on_a_bad_index_json_is_one_line(capfd: pytest.CaptureFixture[str], listing: bytes) -> None:
    """`wheelfactory which` runs select.py in the target interpreter: 0, 1 (EXIT_NO_MATCH) or 2,
    and its one error line is select.py's (``select: ``)."""
    with sandbox() as (root, dist, out):
        index_with(root, listing)
        before = snapshot(root, skip=(dist, out))
        code, stdout, stderr = run(capfd, "which", dist, out)
        assert_clean(code, stdout, stderr, prefix="select: ", codes=(0, 1, 2))
        assert_contained(root, dist, out, before)


def test_the_which_cli_names_the_bad_key(capfd: pytest.CaptureFixture[str]) -> None:
    with sandbox() as (root, dist, out):
        variant = dict(GOOD_VARIANT, cxx11_abi="yes")
        index_with(root, json.dumps({"schema": 1, "variants": [variant]}).encode())
        code, stdout, stderr = run(capfd, "which", dist, out)
        assert code == 2
        assert stderr.strip() == (f"select: {dist / 'index' / 'index.json'}: variants[0]: cxx11_abi: \"yes\" has the "
                                  "wrong type; run `wheelfactory index` again")
