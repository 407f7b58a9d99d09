"""Issue 25 items 2 and 3: `index`, `export` and `merge` publish only wheels that are what their
manifest entry says (variant id, build record, local label, RECORD, provenance record), and fail
(exit 7, PublishError) when they refused one, after publishing the rest. Through the real CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.publish.dist_fakes import make_dist
from tests.testkit import make_wheel, write_provenance
from wheelfactory.runner import manifest

GOOD = ["torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux"]
MOVED, RECORD, LABEL, HASHES = ("torch214-cxx11-cpu-x86_64-linux", "torch212-cxx11-cpu-x86_64-linux",
                                "torch211-cxx11-cpu-x86_64-linux", "torch210-cxx11-cpu-x86_64-linux")


def wheelfactory(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def add(dist: Path, entries: dict[str, manifest.Entry], vid: str, wheel: Path, torch: str) -> None:
    entries[vid] = manifest.Entry(status="built", wheel=str(wheel.relative_to(dist)),
                                  sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(), seconds=1.0, key="k",
                                  log=f"{vid}/build.log", error=None, engine="docker", image=None,
                                  torch_version=torch, toolkit=None)


def tiny(dist: Path, vid: str, version: str, record_variant: str) -> Path:
    wheel = make_wheel(dist / vid, "tiny", version, files={"tiny/__init__.py": "VALUE = 1\n"},
                       build_record={"namespace": "_tiny_cpu_0123abcd", "arch_list": [], "variant": record_variant},
                       metadata="Requires-Python: >=3.9\n")
    write_provenance(wheel, vid)
    return wheel


def mismatched_dist(dist: Path) -> dict[str, manifest.Entry]:
    """make_dist's three good wheels and the four identity mismatches, each with a provenance
    record of its bytes for its entry (only the identity check can refuse them)."""
    entries = make_dist(dist)
    # 1. the torch 2.13 wheel listed as a torch 2.14 variant
    source = dist / str(entries[GOOD[0]].wheel)
    moved = dist / MOVED / source.name
    moved.parent.mkdir()
    shutil.copy(source, moved)
    write_provenance(moved, MOVED)
    add(dist, entries, MOVED, moved, "2.14.0")
    # 2. a build record naming another variant
    add(dist, entries, RECORD, tiny(dist, RECORD, "0.1.0+cputorch2.12", "torch26-cxx98-cpu-x86_64-linux"), "2.12.0")
    # 3. a local label of another variant
    add(dist, entries, LABEL, tiny(dist, LABEL, "0.1.0+cputorch2.6cxx98", LABEL), "2.11.0")
    # 4. a member changed after RECORD was written (the manifest and provenance updated to the new bytes)
    wheel = tiny(dist, HASHES, "0.1.0+cputorch2.10", HASHES)
    with zipfile.ZipFile(wheel) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["tiny/__init__.py"] = b"import os; os.system('id')\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    write_provenance(wheel, HASHES)
    add(dist, entries, HASHES, wheel, "2.10.0")
    manifest.write(dist, entries)
    return entries


def test_index_refuses_each_identity_mismatch_names_it_and_exits_7(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    mismatched_dist(dist)
    done = wheelfactory("index", "-o", str(dist), cwd=tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    for vid, why in ((MOVED, "local version label 'cputorch2.13' does not end with 'cputorch2.14'"),
                     (RECORD, "tiny/_build.json: variant is 'torch26-cxx98-cpu-x86_64-linux'"),
                     (LABEL, "local version label 'cputorch2.6cxx98' does not end with 'cputorch2.11'"),
                     (HASHES, "tiny/__init__.py does not match its")):
        assert f"refused {vid}: " in done.stdout and why in done.stdout, (vid, done.stdout)
    assert "4 variant(s) refused" in done.stderr and done.stderr.count("\n") == 1
    listing = json.loads((dist / "index" / "index.json").read_text())
    assert sorted(v["id"] for v in listing["variants"]) == GOOD  # the rest is published
    assert not (dist / "index" / "whl" / "torch-2.14.0+cpu.html").exists()


def test_a_tampered_variant_wheel_copy_is_named_remade_and_exits_7(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    make_dist(dist)
    assert wheelfactory("index", "-o", str(dist), cwd=tmp_path).returncode == 0
    (copy,) = [p for p in (dist / ".index" / "variant-wheels").rglob("*.whl") if "cu130" in p.name]
    original = copy.read_bytes()
    with zipfile.ZipFile(copy) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["tiny/__init__.py"] = b"PLANTED = 1\n"
    copy.unlink()
    with zipfile.ZipFile(copy, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    done = wheelfactory("index", "-o", str(dist), cwd=tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    assert "refused variant wheel .index/variant-wheels/" in done.stdout and copy.name in done.stdout
    served = dist / "index" / "variants" / "simple" / "tiny" / copy.name
    assert served.read_bytes() == original  # what is served is made from the source, not the planted bytes
    assert wheelfactory("index", "-o", str(dist), cwd=tmp_path).returncode == 0  # and it stays so


def test_a_cache_directory_linked_out_of_dist_is_not_followed(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    make_dist(dist)
    outside = tmp_path / "outside"
    outside.mkdir()
    (dist / ".index").mkdir()
    (dist / ".index" / "variant-wheels").symlink_to(outside)
    done = wheelfactory("index", "-o", str(dist), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(outside.iterdir()) == [] and not (dist / ".index" / "variant-wheels").is_symlink()


def test_a_wheel_without_provenance_is_refused_unless_the_flag_says_so(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    entries = make_dist(dist)
    (dist / (str(entries[GOOD[1]].wheel) + ".intoto.json")).unlink()
    done = wheelfactory("index", "-o", str(dist), cwd=tmp_path)
    assert done.returncode == 7 and f"refused {GOOD[1]}: " in done.stdout and "--allow-unattested" in done.stdout
    done = wheelfactory("index", "-o", str(dist), "--allow-unattested", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--allow-unattested: 1 wheel(s) listed without a provenance record" in done.stderr


def test_export_refuses_a_mismatch_and_exits_7_after_exporting_the_rest(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    mismatched_dist(dist)
    done = wheelfactory("export", "-o", str(dist), "--hf-layout", str(tmp_path / "hub"), "--skip-abi-check",
                        cwd=tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    assert all(f"refused {vid}: " in done.stdout for vid in (MOVED, RECORD, LABEL, HASHES))
    assert sorted(p.name for p in (tmp_path / "hub" / "build").iterdir()) == GOOD


def test_export_of_a_wheel_whose_provenance_names_other_bytes_is_not_exit_0(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    entries = make_dist(dist)
    record = dist / (str(entries[GOOD[0]].wheel) + ".intoto.json")
    record.write_text(record.read_text().replace(str(entries[GOOD[0]].sha256), "0" * 64))
    done = wheelfactory("export", "-o", str(dist), "--hf-layout", str(tmp_path / "hub"), "--skip-abi-check",
                        cwd=tmp_path)
    assert done.returncode == 7 and f"refused {GOOD[0]}: " in done.stdout and "names another sha256" in done.stdout


def test_merge_refuses_a_mismatch_and_exits_7_after_merging_the_rest(tmp_path: Path) -> None:
    part = tmp_path / "part"
    for vid, entry in mismatched_dist(part).items():
        (part / str(entry.log)).write_text(f"{vid}\n")
    done = wheelfactory("merge", str(part), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    assert all(f"refused {vid} from {part}: " in done.stdout for vid in (MOVED, RECORD, LABEL, HASHES))
    assert sorted(manifest.read(tmp_path / "out")) == GOOD


def test_export_with_nothing_to_export_exits_non_zero(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Every variant of the dist failed: `export` writes nothing and says so with exit 7, not
    "0 variant(s)" and success."""
    from tests.publish.dist_fakes import WHEELS, make_dist
    from wheelfactory.cli.main import main

    only = sorted(WHEELS)[0]
    (tmp_path / "dist").mkdir()
    make_dist(tmp_path / "dist", variants=[only], failed=only)
    with pytest.raises(SystemExit) as exited:
        main(["export", "-o", str(tmp_path / "dist"), "--hf-layout", str(tmp_path / "hf")])
    assert exited.value.code == 7
    assert "nothing was exported" in capfd.readouterr().err
