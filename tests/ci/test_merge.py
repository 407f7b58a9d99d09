"""factory/wheelfactory/ci/merge.py and `wheelfactory merge`: build output directories (CI artifacts) combined
into one dist, which `wheelfactory index` then accepts. The parts are synthetic: small but valid
wheel zips (METADATA, WHEEL, RECORD, the build record) and manifests written by wheelfactory.runner.manifest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.testkit import make_wheel, run_cli, write_provenance
from wheelfactory.ci.merge import apply_merge, plan_merge
from wheelfactory.errors import WriteFailed
from wheelfactory.project.keys import file_sha256
from wheelfactory.runner import manifest

CPU213 = "torch213-cxx11-cpu-x86_64-linux"
CPU214 = "torch214-cxx11-cpu-x86_64-linux"
CU130 = "torch213-cxx11-cu130-x86_64-linux"
LOCAL = {CPU213: "cputorch2.13", CPU214: "cputorch2.14", CU130: "cu130torch2.13"}
TORCH = {CPU213: "2.13.0", CPU214: "2.14.1", CU130: "2.13.0"}


def variant_wheel(folder: Path, vid: str, payload: str = "") -> Path:
    """A wheel as the factory names and fills it (enough for the index and variants.json)."""
    local = LOCAL[vid]
    archs = ["8.0", "9.0", "12.0+PTX"] if "cu" in local else []
    wheel = make_wheel(folder, "fusedops", f"0.1.0+{local}", files={"fusedops/__init__.py": f"# {vid} {payload}\n"},
                       build_record={"variant": vid, "arch_list": archs}, metadata="Requires-Python: >=3.9\n")
    write_provenance(wheel, vid)  # as a build writes it (runner/provenance.py); it travels with the wheel
    return wheel


def make_part(root: Path, results: dict[str, manifest.Status], *, payload: str = "") -> Path:
    """A build output directory: ``results`` maps variant ids to built / cached / failed."""
    entries = dict(manifest.read(root))
    for vid, status in results.items():
        folder = root / vid
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "build.log"
        log.write_text(f"# {vid}: {status} in {root.name}\n")
        toolkit = "13.0" if vid == CU130 else None
        if status == "failed":
            entries[vid] = manifest.Entry(status="failed", wheel=None, sha256=None, seconds=3.0, key=f"key-{vid}",
                                          log=str(log.relative_to(root)), error="nvcc failed", engine="docker",
                                          image=None, torch_version=TORCH[vid], toolkit=toolkit)
        else:
            wheel = variant_wheel(folder, vid, payload)
            entries[vid] = manifest.Entry(status=status, wheel=str(wheel.relative_to(root)),
                                          sha256=file_sha256(wheel), seconds=12.5, key=f"key-{vid}",
                                          log=str(log.relative_to(root)), error=None, engine="docker",
                                          image="sha256:img", torch_version=TORCH[vid], toolkit=toolkit,
                                          size=wheel.stat().st_size)
    (root / "images.log").write_text(f"images of {root.name}\n")  # not merged
    manifest.write(root, entries)
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def test_merged_parts_are_indexed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parts = tmp_path / "parts"
    one = make_part(parts / f"wheels-{CPU213}", {CPU213: "built"})
    two = make_part(parts / "wheels-shard-2", {CPU214: "cached", CU130: "failed"})
    out = tmp_path / "dist"
    assert run_cli("merge", str(one), str(two), "-o", str(out)) == 0
    printed = capsys.readouterr().out
    assert f"{CU130}: failed (from {two})" in printed
    # 3 logs, 2 wheels and their 2 provenance records
    assert f"{out}: 3 variant(s) (2 built or cached, 1 failed) from 2 part(s), 7 file(s) copied" in printed
    entries = manifest.read(out)
    assert entries == {**manifest.read(one), **manifest.read(two)}
    merged = files(out)
    wheels = {f"{vid}/{Path(entries[vid].wheel or '').name}" for vid in (CPU213, CPU214)}
    assert set(merged) == {"manifest.json", f"{CPU213}/build.log", f"{CPU214}/build.log", f"{CU130}/build.log",
                           *wheels, *(f"{w}.intoto.json" for w in wheels)}
    for part in (one, two):
        for name, data in files(part).items():
            if name not in ("manifest.json", "images.log"):
                assert merged[name] == data
    assert not list(out.rglob("*.partial")) and not list(out.rglob(".*.tmp"))
    # `wheelfactory index` accepts the merged dist: both wheels listed, the failure named.
    assert run_cli("index", "-o", str(out)) == 0
    printed = capsys.readouterr().out
    assert f"not listed {CU130}: status failed: nvcc failed" in printed
    listing = json.loads((out / "index" / "index.json").read_text())
    assert sorted(v["id"] for v in listing["variants"]) == [CPU213, CPU214]
    # Merging the same parts again changes nothing.
    assert run_cli("merge", str(one), str(two), "-o", str(out)) == 0
    assert ", 0 file(s) copied" in capsys.readouterr().out
    assert manifest.read(out) == entries


@pytest.mark.parametrize("order", ["failed-first", "built-first"])
def test_a_build_wins_over_a_failure(tmp_path: Path, order: str) -> None:
    failed = make_part(tmp_path / "a", {CPU213: "failed"})
    built = make_part(tmp_path / "b", {CPU213: "built"})
    parts = [failed, built] if order == "failed-first" else [built, failed]
    out = tmp_path / "dist"
    plan = plan_merge(parts, out)
    (choice,) = plan.choices
    assert choice.origin == built and choice.entry.status == "built"
    assert choice.notes == (f"kept the build from {built}; failed in {failed}",)
    apply_merge(plan)
    assert (out / CPU213 / "build.log").read_text() == f"# {CPU213}: built in b\n"


def test_between_two_failures_the_first_is_kept(tmp_path: Path) -> None:
    first = make_part(tmp_path / "a", {CU130: "failed"})
    second = make_part(tmp_path / "b", {CU130: "failed"})
    (choice,) = plan_merge([first, second], tmp_path / "dist").choices
    assert choice.origin == first


def test_the_same_wheel_twice_is_one_wheel(tmp_path: Path) -> None:
    one = make_part(tmp_path / "a", {CPU213: "built"})
    two = tmp_path / "b"
    two.mkdir()
    (two / CPU213).mkdir()
    wheel = manifest.read(one)[CPU213].wheel or ""
    (two / wheel).write_bytes((one / wheel).read_bytes())  # the same bytes, another log
    write_provenance(two / wheel, CPU213)  # another run's record of the same bytes
    (two / CPU213 / "build.log").write_text("another log\n")
    manifest.write(two, {CPU213: manifest.read(one)[CPU213]})
    plan = plan_merge([one, two], tmp_path / "dist")
    assert [c.origin for c in plan.choices] == [one] and plan.refused == ()
    assert [c.target for c in plan.copies] == [f"{CPU213}/build.log", wheel, f"{wheel}.intoto.json"]


def test_two_different_wheels_for_one_variant_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = make_part(tmp_path / "a", {CPU213: "built"}, payload="one")
    two = make_part(tmp_path / "b", {CPU213: "cached"}, payload="two")
    out = tmp_path / "dist"
    assert run_cli("merge", str(one), str(two), "-o", str(out)) == 7  # PublishError
    err = capsys.readouterr().err
    wheel = manifest.read(one)[CPU213].wheel
    assert err.startswith(f"wheelfactory: error: two different wheels for {CPU213}: {one / str(wheel)} (sha256 ")
    assert f"and {two / str(wheel)} (sha256 " in err and err.count("\n") == 1
    assert not out.joinpath(manifest.MANIFEST).exists() and not out.joinpath(CPU213).exists()


def test_never_overwrites_a_different_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    part = make_part(tmp_path / "a", {CPU213: "built"})
    out = tmp_path / "dist"
    (out / CPU213).mkdir(parents=True)
    (out / CPU213 / "build.log").write_text("someone else's log\n")
    assert run_cli("merge", str(part), "-o", str(out)) == 7
    assert capsys.readouterr().err == (f"wheelfactory: error: {out / CPU213 / 'build.log'} already exists and "
                                       f"differs from {part / CPU213 / 'build.log'}; merge into an empty directory, "
                                       f"or move one of them away\n")
    assert (out / CPU213 / "build.log").read_text() == "someone else's log\n"
    assert not (out / manifest.MANIFEST).exists()


def test_the_outputs_own_failure_is_replaced_by_a_build(tmp_path: Path) -> None:
    out = make_part(tmp_path / "dist", {CPU213: "failed", CPU214: "built"})
    before = manifest.read(out)
    part = make_part(tmp_path / "a", {CPU213: "built", CPU214: "failed"})
    plan = plan_merge([part], out, before)
    apply_merge(plan)
    after = manifest.read(out)
    assert after[CPU213] == manifest.read(part)[CPU213]  # the build replaced the failure, its log too
    assert (out / CPU213 / "build.log").read_text() == f"# {CPU213}: built in a\n"
    assert after[CPU214] == before[CPU214]  # the output's own build stays
    assert (out / CPU214 / "build.log").read_text() == f"# {CPU214}: built in dist\n"


@pytest.mark.parametrize("case", ["no-manifest", "no-directory", "missing-wheel", "wrong-sha", "outside", "itself"])
def test_bad_parts_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    part = make_part(tmp_path / "a", {CPU213: "built"})
    out = tmp_path / "dist"
    entry = manifest.read(part)[CPU213]
    wheel = part / (entry.wheel or "")
    target = str(part)
    expected = {
        "no-manifest": (2, f"{part} is not a build output: it has no manifest.json"),
        "no-directory": (2, f"{tmp_path / 'nothing'}: no such directory"),
        "missing-wheel": (7, f"{part / 'manifest.json'} lists {entry.wheel} for {CPU213}, but {wheel} is missing"),
        "wrong-sha": (7, f"{wheel} does not match the sha256 that {part / 'manifest.json'} records for it"),
        "outside": (7, f"{part / 'manifest.json'}: {CPU213} names '../../etc/passwd', which is not a path inside"),
        "itself": (2, f"{out} is the output directory itself"),
    }[case]
    if case == "no-manifest":
        (part / manifest.MANIFEST).unlink()
    elif case == "no-directory":
        target = str(tmp_path / "nothing")
    elif case == "missing-wheel":
        wheel.unlink()
    elif case == "wrong-sha":
        wheel.write_bytes(b"not the wheel")
    elif case == "outside":
        manifest.write(part, {CPU213: manifest.Entry(status="failed", wheel=None, sha256=None, seconds=1.0, key="k",
                                                     log="../../etc/passwd")})
    elif case == "itself":
        out.mkdir()
        target = str(out)
    assert run_cli("merge", target, "-o", str(out)) == expected[0]
    err = capsys.readouterr().err
    assert err.startswith("wheelfactory: error: ") and expected[1] in err and err.count("\n") == 1, err


def test_copies_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part = make_part(tmp_path / "a", {CPU213: "built"})
    out = tmp_path / "dist"

    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    plan = plan_merge([part], out)
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(WriteFailed, match="No space left on device") as caught:  # exit 9: the machine's disk
        apply_merge(plan)
    assert caught.value.exit_code == 9 and "\n" not in str(caught.value)
    assert [p.name for p in out.rglob("*") if p.is_file()] == []  # no partial file, no manifest


def test_the_output_is_locked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    part = make_part(tmp_path / "a", {CPU213: "built"})
    out = tmp_path / "dist"
    with manifest.locked(out):
        assert run_cli("merge", str(part), "-o", str(out)) == 4  # OutputLocked
    assert "is in use by another wheelfactory build" in capsys.readouterr().err
    assert run_cli("merge", str(part), "-o", str(out)) == 0
