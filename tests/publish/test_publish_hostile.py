"""`wheelfactory publish` to a directory where a hostile user or a hurried one left something odd
(issue 36, item 3): a link, a FIFO or a folder where the publish lock belongs, a dry run that must
write nothing anywhere, a file:// URL with percent-encoding, the same target named twice. Each is
one line and the right exit code, never a traceback, a hang or a write through a link."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.testkit import run_cli

VARIANTS = ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux")
LOCK = ".wheelfactory-publish.lock"


def release(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    make_dist(dist, version="0.1.0", variants=VARIANTS)
    return dist


def files_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.lstat().st_size for p in root.rglob("*")} if root.exists() else {}


def publish(dist: Path, *targets: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Through the real CLI in a child process: a FIFO that hangs the publish fails the timeout."""
    command = [sys.executable, "-m", "wheelfactory", "publish", "-o", str(dist)]
    for target in targets:
        command += ["--to", target]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("planted", ["link", "fifo", "directory"])
def test_an_odd_lock_file_is_one_line_and_nothing_is_written_through_it(tmp_path: Path, planted: str) -> None:
    dist, site = release(tmp_path), tmp_path / "site"
    site.mkdir()
    named = tmp_path / "elsewhere" / "created-by-the-lock.txt"
    named.parent.mkdir()
    if planted == "link":
        os.symlink(named, site / LOCK)
    elif planted == "fifo":
        os.mkfifo(site / LOCK)
    else:
        (site / LOCK).mkdir()
    result = publish(dist, str(site), cwd=tmp_path)
    assert result.returncode == 7, result.stdout + result.stderr
    said = result.stderr.strip().splitlines()
    assert len(said) == 1 and LOCK in said[0] and "remove it" in said[0], said
    assert "Traceback" not in result.stdout + result.stderr
    assert not named.exists(), "the lock was created through the link"
    assert sorted(p.name for p in site.iterdir()) == [LOCK]  # nothing published past it


def test_a_dry_run_writes_nothing_anywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist, site = release(tmp_path), tmp_path / "site"
    before = files_under(dist)
    assert run_cli("publish", "-o", str(dist), "--to", str(site), "--dry-run") == 0
    assert "would write" in capsys.readouterr().out
    assert not site.exists(), "a dry run made the target (or its lock)"
    assert files_under(dist) == before, "a dry run wrote into dist"


def test_a_file_url_is_percent_decoded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = release(tmp_path)
    assert run_cli("publish", "-o", str(dist), "--to", (tmp_path / "my site").as_uri()) == 0
    assert (tmp_path / "my site" / "index.html").is_file()
    assert not (tmp_path / "my%20site").exists()


def test_the_same_directory_named_twice_is_one_target(tmp_path: Path) -> None:
    dist, site = release(tmp_path), tmp_path / "site"
    result = publish(dist, str(site), str(site / ".." / "site"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "named twice" in result.stdout + result.stderr
    assert (site / "index.html").is_file()


def test_a_wheel_deleted_from_the_target_stops_the_next_release(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """0.1.0 published, one of its wheels deleted from the directory, 0.2.0 published: the pages
    would go on linking the deleted wheel, so nothing is written and the wheel is named (exit 7)."""
    site = tmp_path / "site"
    first, second = tmp_path / "first", tmp_path / "second"
    make_dist(first, version="0.1.0", variants=VARIANTS)
    make_dist(second, version="0.2.0", variants=VARIANTS)
    assert run_cli("publish", "-o", str(first), "--to", str(site)) == 0
    deleted = next(site.rglob("tiny-0.1.0*.whl"))
    deleted.unlink()
    before = files_under(site)
    assert run_cli("publish", "-o", str(second), "--to", str(site)) == 7
    said = capsys.readouterr().err
    assert "no longer there" in said and deleted.name in said, said
    assert files_under(site) == before


def one_line_refusal(result: subprocess.CompletedProcess[str], *named: str) -> str:
    """The publish failed with exit 7 and one line (no traceback) naming each of ``named``."""
    output = result.stdout + result.stderr
    assert result.returncode == 7 and "Traceback" not in output, output
    said = result.stderr.strip().splitlines()
    assert len(said) == 1 and all(name in said[0] for name in named), said
    return said[0]


@pytest.mark.parametrize("under", ["regular file", "procfs"])
def test_a_target_that_cannot_be_a_directory_is_one_line(tmp_path: Path, under: str) -> None:
    dist = release(tmp_path)
    if under == "regular file":
        (tmp_path / "notes.txt").write_text("a file, not a folder\n")
        site = tmp_path / "notes.txt" / "site"
    else:
        site = Path("/proc/self/wheelfactory-site")
    one_line_refusal(publish(dist, str(site), cwd=tmp_path), "cannot make the target directory")


@pytest.mark.parametrize("planted", ["file where a folder belongs", "folder link out", "page link out",
                                     "fifo where a page belongs", "device where a page belongs"])
def test_what_is_planted_in_the_target_is_refused_by_name_and_nothing_leaves_it(tmp_path: Path,
                                                                                 planted: str) -> None:
    """A first publish, then something odd planted in the target under a path the next publish
    writes: one line naming it, no write through a link, no wait on a FIFO."""
    dist, site, outside = release(tmp_path), tmp_path / "site", tmp_path / "outside"
    outside.mkdir()
    assert publish(dist, str(site), cwd=tmp_path).returncode == 0
    variant = site / VARIANTS[0]
    page = variant / "simple" / "tiny" / "index.html"
    if planted == "file where a folder belongs":
        shutil.rmtree(variant / "simple")
        (variant / "simple").write_text("not a folder\n")
        named = variant / "simple"
    elif planted == "folder link out":
        shutil.rmtree(variant)
        os.symlink(outside, variant)
        named = variant
    elif planted == "page link out":
        page.unlink()
        os.symlink(outside / "page.html", page)
        named = page
    elif planted == "fifo where a page belongs":
        page.unlink()
        os.mkfifo(page)
        named = page
    else:
        page.unlink()
        os.symlink("/dev/zero", page)  # a link to a device: refused as a link, never read
        named = page
    result = publish(dist, str(site), cwd=tmp_path)
    one_line_refusal(result, str(named), "move it away")
    assert list(outside.iterdir()) == [], "a publish wrote through a link out of its target"


def test_a_lone_surrogate_in_the_targets_listing_is_one_line(tmp_path: Path) -> None:
    """index.json may hold "\\udcff", which JSON parses to no character: carried into the next
    release's pages it failed their encoding (a UnicodeEncodeError traceback)."""
    site = tmp_path / "site"
    first, second = tmp_path / "first", tmp_path / "second"
    make_dist(first, version="0.1.0", variants=VARIANTS)
    make_dist(second, version="0.2.0", variants=VARIANTS)
    assert publish(first, str(site), cwd=tmp_path).returncode == 0
    listing = json.loads((site / "index.json").read_text())
    listing["variants"][0]["requires_python"] = ">=3.9\udcff"
    (site / "index.json").write_text(json.dumps(listing))
    before = files_under(site)
    one_line_refusal(publish(second, str(site), cwd=tmp_path), f"{site}/index.json", "\\udcff")
    assert files_under(site) == before


def test_out_of_space_names_the_file_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """A real full disk: a small tmpfs (root mounts it, as CI runs) and a wheel larger than it."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root and mounts a tmpfs: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        dist = tmp_path / "dist"
        make_dist(dist, version="0.1.0", variants=VARIANTS, payload=os.urandom(1 << 19))
        site = small / "site"
        said = one_line_refusal(publish(dist, str(site), cwd=tmp_path), "no space left on the device")
        assert re.search(rf"{re.escape(str(site))}/\S+\.whl: ", said), said  # the wheel it could not write
        assert not [p for p in site.rglob("*") if ".wf-partial-" in p.name], "a partial file was left"
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
