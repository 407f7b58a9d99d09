"""Provenance records: the runner writes an in-toto statement beside each wheel it builds, a real
in-toto consumer (in-toto-attestation's Statement and SLSA Provenance v1 schemas) accepts it,
and index / merge carry it; a record that is not about the wheel beside it is never published."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from tests.testkit import REPO
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.runner import manifest
from wheelfactory.runner.provenance import SUFFIX, provenance_path
from wheelfactory.runner.run import run_matrix

from tests.publish.dist_fakes import make_dist
from tests.runner.test_run_matrix import FakeEngine
from tests.testkit import FakeStage  # noqa: E402


@pytest.fixture(scope="module")
def variants() -> tuple[Variant, ...]:
    table = load_table()
    text = '[matrix]\ntorch = ["2.12", "2.13"]\ncxx11_abi = true\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants


def _consumer_parses(document: dict[str, object]) -> provenance_pb2.Provenance:
    """The statement as in-toto-attestation reads it (unknown fields refused), validated; and its
    predicate as SLSA Provenance v1."""
    proto = json_format.ParseDict(document, statement_pb2.Statement())
    Statement.copy_from_pb(proto).validate()
    predicate = json_format.ParseDict(document["predicate"], provenance_pb2.Provenance())
    return predicate


def test_each_built_wheel_gets_a_statement_about_its_bytes(tmp_path: Path, variants: tuple[Variant, ...]) -> None:
    run_matrix(FakeStage, variants, FakeEngine(), tmp_path)  # type: ignore[arg-type]
    entries = manifest.read(tmp_path)
    for variant_id, entry in entries.items():
        wheel = tmp_path / str(entry.wheel)
        document = json.loads(provenance_path(wheel).read_text())
        assert document["subject"] == [{"name": wheel.name, "digest": {"sha256": entry.sha256}}]
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry.sha256
        predicate = _consumer_parses(document)
        definition = predicate.build_definition
        assert definition.external_parameters["variant"]["id"] == variant_id  # the matrix entry
        assert definition.internal_parameters["cache_key"] == entry.key
        names = {d.name: dict(d.digest) for d in definition.resolved_dependencies}
        assert names["image"] == {"sha256": "ab" * 32}
        assert names["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"] == {"sha256": "cd" * 32}
        assert set(names["project"]) == {"sha256"}
        assert predicate.run_details.builder.version["torch"] == "2.13.0"  # from the wheel set's names
        assert predicate.run_details.metadata.HasField("started_on")


def test_a_rebuild_replaces_the_record_and_a_stale_one_goes_with_its_wheel(tmp_path: Path,
                                                                           variants: tuple[Variant, ...]) -> None:
    run_matrix(FakeStage, variants[:1], FakeEngine(), tmp_path)  # type: ignore[arg-type]
    (entry,) = manifest.read(tmp_path).values()
    variant_dir = (tmp_path / str(entry.wheel)).parent
    stale = variant_dir / "fake-0.0-old.whl"
    stale.write_bytes(b"old")
    provenance_path(stale).write_text("{}")
    manifest.write(tmp_path, {})  # forget it: the next run builds again
    run_matrix(FakeStage, variants[:1], FakeEngine(), tmp_path)  # type: ignore[arg-type]
    assert sorted(p.name for p in variant_dir.iterdir() if p.name != "build.log") == sorted(
        [Path(str(entry.wheel)).name, Path(str(entry.wheel)).name + SUFFIX])


def _record(dist: Path, entry: manifest.Entry, sha256: str | None = None) -> Path:
    wheel = dist / str(entry.wheel)
    document = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1",
                "subject": [{"name": wheel.name, "digest": {"sha256": sha256 or entry.sha256}}], "predicate": {}}
    provenance_path(wheel).write_text(json.dumps(document))
    return provenance_path(wheel)


def _index(dist: Path, *flags: str, code: int = 0) -> dict[str, object]:
    from wheelfactory.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["index", "-o", str(dist), *flags])
    assert (exit_info.value.code or 0) == code
    return json.loads((dist / "index" / "index.json").read_text())  # type: ignore[no-any-return]


def test_the_index_lists_and_serves_the_record_beside_the_wheel(tmp_path: Path) -> None:
    entries = make_dist(tmp_path)
    with_record = "torch213-cxx11-cpu-x86_64-linux"
    record = _record(tmp_path, entries[with_record])
    provenance_path(tmp_path / str(entries["torch26-cxx98-cpu-x86_64-linux"].wheel)).unlink()  # an older build's
    listing = _index(tmp_path, "--allow-unattested")  # which only the flag lists
    by_id = {v["id"]: v for v in listing["variants"]}  # type: ignore[attr-defined]
    published = by_id[with_record]["provenance"]
    assert published == by_id[with_record]["wheel"] + SUFFIX
    assert (tmp_path / "index" / published).read_bytes() == record.read_bytes()
    assert by_id["torch26-cxx98-cpu-x86_64-linux"]["provenance"] is None  # none written: listed without
    assert f'href="{published.replace("+", "%2B")}"' in (tmp_path / "index" / "index.html").read_text()  # encoded


@pytest.mark.parametrize("damage", ["other-sha", "not-json", "directory", "not-a-statement"])
def test_a_record_about_other_bytes_keeps_the_wheel_out_of_the_index(tmp_path: Path, damage: str) -> None:
    entries = make_dist(tmp_path)
    vid = "torch213-cxx11-cpu-x86_64-linux"
    path = _record(tmp_path, entries[vid], sha256="0" * 64 if damage == "other-sha" else None)
    if damage == "not-json":
        path.write_bytes(b"\xff{")
    elif damage == "directory":
        path.unlink()
        path.mkdir()
    elif damage == "not-a-statement":
        path.write_text('{"subject": []}')
    listing = _index(tmp_path, code=7)  # refused: the rest is published, the command fails
    assert vid not in {v["id"] for v in listing["variants"]}  # type: ignore[attr-defined]
    (reason,) = [s["reason"] for s in listing["skipped"] if s["id"] == vid]  # type: ignore[attr-defined]
    assert path.name in reason and "rebuild it" in reason


def test_merge_carries_the_record_and_another_runs_record_of_the_same_wheel_is_no_conflict(tmp_path: Path) -> None:
    from wheelfactory.ci.merge import apply_merge, plan_merge

    part, out = tmp_path / "part", tmp_path / "out"
    entries = make_dist(part)
    for entry in entries.values():
        (part / str(entry.log)).write_text("log\n")
    vid = "torch213-cxx11-cpu-x86_64-linux"
    record = _record(part, entries[vid])
    apply_merge(plan_merge([part], out))
    assert (out / (str(entries[vid].wheel) + SUFFIX)).read_bytes() == record.read_bytes()
    first = record.read_bytes()
    record.write_text(record.read_text() + "\n")  # another run's record of the same wheel: no conflict
    apply_merge(plan_merge([part], out, manifest.read(out)))
    assert (out / (str(entries[vid].wheel) + SUFFIX)).read_bytes() == first  # the output's own build is kept


def test_the_record_names_the_checkouts_git_state(tmp_path: Path, variants: tuple[Variant, ...]) -> None:
    """A real git checkout: its commit and whether a tracked file changed (an untracked file does
    not count) reach the statement, and git_states reads them back."""
    import subprocess

    from wheelfactory.project.keys import git_state
    from wheelfactory.runner.provenance import BuiltWheel, git_states, statement

    project = tmp_path / "project"
    project.mkdir()
    assert git_state(project) is None  # not a checkout
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    (project / "kernel.toml").write_text("[kernel]\n")
    subprocess.run([*git, "add", "kernel.toml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (project / "notes.txt").write_text("untracked\n")
    clean = git_state(project)
    assert clean is not None and (clean.commit, clean.dirty) == (head, False)
    (project / "kernel.toml").write_text("[kernel]\nname = 'x'\n")
    dirty = git_state(project)
    assert dirty is not None and (dirty.commit, dirty.dirty) == (head, True)
    wheel = tmp_path / "tiny-0.1-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    built = BuiltWheel(variants[0], wheel, "0" * 64, "native", "tiny", "1" * 64, 315532800, "key", 0.0, 1.0, dirty)
    document = json.loads(json.dumps(statement(built, None)))
    _consumer_parses(document)  # SLSA's own reader takes the source entry
    assert git_states(document)[0] == dirty
