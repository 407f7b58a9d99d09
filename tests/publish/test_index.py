"""wheelfactory index: pages, hashes, what is left out, atomic generations, the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from tests.publish.dist_fakes import make_dist
from wheelfactory.publish.collect import collect
from wheelfactory.publish.generations import GENERATIONS, INDEX_LINK, KEEP_GENERATIONS, write_index
from wheelfactory.publish.pages import plan_index
from wheelfactory.runner import manifest


def index(dist: Path, base_url: str = "http://example.test:9") -> tuple[Path, bool]:
    from wheelfactory.publish.variant_metadata import variant_metadata

    wheels, skipped = collect(dist, manifest.read(dist))
    pages, links = variant_metadata(wheels, dist)
    return write_index(dist, plan_index(wheels, skipped, base_url=base_url, extra_pages=pages, extra_links=links))


def test_each_variant_gets_a_pep503_index_with_hashes(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    root = tmp_path / INDEX_LINK
    page = (root / "torch213-cxx11-cpu-x86_64-linux" / "simple" / "tiny" / "index.html").read_text()
    (href,) = re.findall(r'href="([^"]+)"', page)
    quoted, digest = href.split("#sha256=")
    filename = unquote(quoted)
    assert "%2B" in quoted and "+" not in quoted  # S3-style hosts read a raw + as a space
    served = root / "torch213-cxx11-cpu-x86_64-linux" / "simple" / "tiny" / filename
    assert hashlib.sha256(served.read_bytes()).hexdigest() == digest
    assert 'data-requires-python="&gt;=3.9"' in page  # PEP 503: the value is HTML-escaped
    assert 'href="tiny/"' in (root / "torch213-cxx11-cpu-x86_64-linux" / "simple" / "index.html").read_text()
    requirements = (root / "torch213-cxx11-cpu-x86_64-linux" / "requirements.txt").read_text()
    assert f"tiny==0.1.0+cputorch2.13 --hash=sha256:{digest}" in requirements


def test_find_links_pages_per_torch_and_backend_keep_the_abis_apart(tmp_path: Path) -> None:
    make_dist(tmp_path)
    index(tmp_path)
    pages = sorted(p.name for p in (tmp_path / INDEX_LINK / "whl").iterdir())
    assert pages == ["torch-2.13.0+cpu.html", "torch-2.13.0+cu130.html", "torch-2.6.0+cpu-cxx98.html"]
    text = (tmp_path / INDEX_LINK / "whl" / "torch-2.13.0+cu130.html").read_text()
    (href,) = re.findall(r'href="([^"]+)"', text)
    assert (tmp_path / INDEX_LINK / "whl" / unquote(href.split("#")[0])).resolve().is_file()


def test_failed_missing_and_tampered_wheels_are_never_listed(tmp_path: Path) -> None:
    entries = make_dist(tmp_path, failed="torch26-cxx98-cpu-x86_64-linux")
    tampered = tmp_path / str(entries["torch213-cxx11-cu130-x86_64-linux"].wheel)
    tampered.write_bytes(tampered.read_bytes() + b"x")
    index(tmp_path)
    listing = json.loads((tmp_path / INDEX_LINK / "index.json").read_text())
    assert [v["id"] for v in listing["variants"]] == ["torch213-cxx11-cpu-x86_64-linux"]
    reasons = {s["id"]: s["reason"] for s in listing["skipped"]}
    assert reasons["torch26-cxx98-cpu-x86_64-linux"] == "status failed: boom"
    assert "does not match the manifest's sha256" in reasons["torch213-cxx11-cu130-x86_64-linux"]
    top = (tmp_path / INDEX_LINK / "index.html").read_text()
    assert "pip install --index-url http://example.test:9/torch213-cxx11-cpu-x86_64-linux/simple tiny" in top
    assert not (tmp_path / INDEX_LINK / "torch26-cxx98-cpu-x86_64-linux").exists()
    assert "cxx98" not in (tmp_path / INDEX_LINK / "whl").iterdir().__next__().name


def test_regenerating_is_idempotent_and_swaps_whole_generations(tmp_path: Path) -> None:
    make_dist(tmp_path)
    first, changed = index(tmp_path)
    assert changed and (tmp_path / INDEX_LINK).is_symlink()
    again, changed = index(tmp_path)
    assert again == first and not changed  # same manifest, same index: nothing written
    generations = []
    for n in range(KEEP_GENERATIONS + 2):
        index(tmp_path, base_url=f"http://example.test:{n}")
        generations.append((tmp_path / INDEX_LINK).resolve())
    kept = sorted(p for p in (tmp_path / GENERATIONS).iterdir() if p.name.startswith("g"))
    assert kept == sorted(generations[-KEEP_GENERATIONS:])  # the current one and the one before it
    assert not list((tmp_path / GENERATIONS).glob(".tmp-*"))


@pytest.mark.parametrize("lost", ["index.html", "whl/torch-2.13.0+cpu.html", "a wheel"])
def test_a_generation_with_a_file_gone_is_written_again(tmp_path: Path, lost: str) -> None:
    """Same digest, but the generation no longer holds one of its files (removed by hand, or a
    copy of dist/ that left some out): `index` writes a new, complete one instead of keeping it."""
    make_dist(tmp_path)
    first, _ = index(tmp_path)
    if lost == "a wheel":
        gone = next(first.glob("*/simple/tiny/*.whl"))
    else:
        gone = first / lost
    rel = gone.relative_to(first)
    gone.unlink()
    again, changed = index(tmp_path)
    assert changed and again != first
    assert (again / rel).is_file()


def test_an_indexed_wheel_survives_a_rebuild_until_the_next_index(tmp_path: Path) -> None:
    entries = make_dist(tmp_path)
    index(tmp_path)
    wheel = tmp_path / str(entries["torch213-cxx11-cpu-x86_64-linux"].wheel)
    served = tmp_path / INDEX_LINK / "torch213-cxx11-cpu-x86_64-linux" / "simple" / "tiny" / wheel.name
    before = served.read_bytes()
    replacement = wheel.with_name(".new")
    replacement.write_bytes(b"rebuilt")
    os.replace(replacement, wheel)  # what a rebuild does
    assert served.read_bytes() == before  # the page's hash still describes the file it links


def test_a_hand_made_index_directory_is_not_replaced(tmp_path: Path) -> None:
    from wheelfactory.errors import WheelfactoryError

    make_dist(tmp_path)
    (tmp_path / INDEX_LINK).mkdir()
    with pytest.raises(WheelfactoryError, match="is not an index wheelfactory made"):
        index(tmp_path)


def test_cli_index_without_a_manifest_is_one_line_exit_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(tmp_path)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 2 and "run `wheelfactory build" in result.stderr and "Traceback" not in result.stderr


def test_cli_index_lists_and_reports(tmp_path: Path) -> None:
    make_dist(tmp_path, failed="torch26-cxx98-cpu-x86_64-linux")
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(tmp_path), "--base-url",
                             "http://h:1/"], capture_output=True, text=True, timeout=120, check=False,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    assert "torch213-cxx11-cpu-x86_64-linux: http://h:1/torch213-cxx11-cpu-x86_64-linux/simple/" in result.stdout
    assert "not listed torch26-cxx98-cpu-x86_64-linux: status failed: boom" in result.stdout


def test_the_workflows_attest_step_signs_exactly_the_wheels_the_index_publishes(tmp_path: Path) -> None:
    """`ci github --attest`: the index job's own "Write the index" script, run in bash on a dist
    with a failed and a tampered variant: the tampered one is refused and the job fails (exit 7)
    before anything is signed; with it restored, the signing step's subject-path matches every
    wheel the index serves (per-variant and variant-labelled) and nothing it kept out (the failed one)."""
    import glob

    from wheelfactory.ci.github import ATTEST, GithubOptions, _index_job

    job = _index_job(GithubOptions(matrix_file="matrix.toml", install=".", attest=True))
    assert job["permissions"] == {"contents": "read", "id-token": "write", "attestations": "write"}
    steps = {s.get("name"): s for s in job["steps"]}
    (signing,) = [s for s in job["steps"] if s.get("uses") == ATTEST]
    names = list(steps)
    assert names.index("Write the index") < names.index(signing["name"]) < names.index("Upload the index")
    entries = make_dist(tmp_path / "dist", failed="torch26-cxx98-cpu-x86_64-linux")
    tampered = tmp_path / "dist" / str(entries["torch213-cxx11-cu130-x86_64-linux"].wheel)
    original = tampered.read_bytes()
    tampered.write_bytes(original + b"x")
    script = steps["Write the index"]["run"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 7, done.stdout + done.stderr
    assert "refused torch213-cxx11-cu130-x86_64-linux" in done.stdout and not (tmp_path / "site").exists()
    tampered.write_bytes(original)
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    signed = {Path(p).relative_to(tmp_path / "site").as_posix()
              for p in glob.glob(str(tmp_path / signing["with"]["subject-path"]))}
    listing = json.loads((tmp_path / "site" / "index.json").read_text())
    variant_page = (tmp_path / "site" / "variants" / "simple" / "tiny" / "index.html").read_text()
    labelled = {f"variants/simple/tiny/{href.split('#')[0]}" for href in re.findall(r'href="([^"]+\.whl[^"]*)"',
                                                                                      variant_page)}
    assert [v["id"] for v in listing["variants"]] == ["torch213-cxx11-cpu-x86_64-linux",
                                                       "torch213-cxx11-cu130-x86_64-linux"]
    assert signed == {v["wheel"] for v in listing["variants"]} | labelled
    assert len(labelled) == 2 and all((tmp_path / "site" / p).is_file() for p in signed)


def test_a_killed_runs_swap_links_and_half_generations_are_swept(tmp_path: Path) -> None:
    """A SIGKILL between the swap link's creation and its rename (another pid's name), a half
    generation, and either as a symlink out of dist: the next index removes the names, never what
    a link points at."""
    make_dist(tmp_path)
    index(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (tmp_path / f".{INDEX_LINK}.99999.tmp").symlink_to(os.path.relpath(tmp_path / GENERATIONS, tmp_path))
    (tmp_path / f".{INDEX_LINK}.99998.tmp").symlink_to(outside)
    (tmp_path / GENERATIONS / ".tmp-g1").mkdir()
    (tmp_path / GENERATIONS / ".tmp-g2").symlink_to(outside)
    index(tmp_path, base_url="http://example.test:7")
    assert not list(tmp_path.glob(f".{INDEX_LINK}.*.tmp")) and not list((tmp_path / GENERATIONS).glob(".tmp-*"))
    assert (outside / "keep.txt").read_text() == "keep"
