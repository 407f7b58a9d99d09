"""Output files named on the command line (`report --html/--svg`, `bake --file`, `ci github
--workflow`): an output that is one of the command's inputs, two outputs that are one file, a
target that is not a regular file, ``-`` for standard output, and failed writes. Each refusal or
failure is one line with the documented exit code (2: bad input, 9: the write failed), nothing
written outside the target and no temp file left (support/outputs.py, support/atomic.py)."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.cli.outputs_kit import VID, make_repo, run, snapshot, temp_files
from wheelfactory.support import atomic



def _has_dev_full() -> bool:
    try:
        return stat.S_ISCHR(os.stat("/dev/full").st_mode)
    except OSError:
        return False


needs_dev_full = pytest.mark.skipif(not _has_dev_full(), reason="no /dev/full here")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "repo")
    monkeypatch.chdir(root)
    return root


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("wheelfactory: ") and "Traceback" not in err, err
    return err.rstrip("\n")


# ------------------------------------------------------------------- an output that is an input

@pytest.mark.parametrize(("args", "line"), [
    (["report", "-o", "dist", "--html", "dist/manifest.json"],
     "wheelfactory: error: --html dist/manifest.json is the manifest this command reads: write the report "
     "elsewhere"),
    (["report", "-o", "dist", "--svg", "dist/manifest.json"],
     "wheelfactory: error: --svg dist/manifest.json is the manifest this command reads: write the report "
     "elsewhere"),
    (["report", "-o", "dist", "--html", f"dist/{VID}/build.log"],
     f"wheelfactory: error: --html dist/{VID}/build.log is the build log of {VID} this command reads: write "
     "the report elsewhere"),
    (["report", "-o", "dist", "--html", "matrix.toml"],
     "wheelfactory: error: --html matrix.toml is the matrix this command reads: write the report elsewhere"),
    (["report", "-o", "dist", "--compat", "compat.toml", "--svg", "./compat.toml"],
     "wheelfactory: error: --svg compat.toml is the compatibility table this command reads: write the "
     "report elsewhere"),
    (["report", "-o", "dist", "--html", "x.html", "--svg", "x.html"],
     "wheelfactory: error: --svg x.html is the file --html names too: give each output its own path"),
    (["bake", "--file", "matrix.toml"],
     "wheelfactory: error: --file matrix.toml is the matrix this command reads: write the bake file elsewhere"),
    (["bake", "-m", "matrix.toml", "--compat", "compat.toml", "--file", "compat.toml"],
     "wheelfactory: error: --file compat.toml is the compatibility table this command reads: write the bake "
     "file elsewhere"),
    (["ci", "github", "--workflow", "matrix.toml"],
     "wheelfactory: error: --workflow matrix.toml is the matrix this command reads: write the workflow "
     "elsewhere"),
    (["ci", "github", "--compat", "compat.toml", "--workflow", "compat.toml"],
     "wheelfactory: error: --workflow compat.toml is the compatibility table this command reads: write the "
     "workflow elsewhere"),
])
def test_an_output_that_is_an_input_is_refused(repo: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                               line: str) -> None:
    before = snapshot(repo)
    assert run(*args) == 2
    assert one_line(capsys) == line
    assert snapshot(repo) == before


def test_the_default_page_counts_as_an_output(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(repo)
    assert run("report", "-o", "dist", "--svg", "dist/report.html") == 2
    assert one_line(capsys).endswith("--svg dist/report.html is the file the default page names too: give each "
                                     "output its own path")
    assert snapshot(repo) == before


def test_links_to_an_input_are_the_input(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.link(repo / "matrix.toml", repo / "hard.toml")
    before = snapshot(repo)
    assert run("bake", "--file", "hard.toml") == 2  # a hard link: the same file by inode
    assert "--file hard.toml is the matrix this command reads" in one_line(capsys)
    assert run("ci", "github", "--workflow", "dist/../matrix.toml") == 2  # another spelling
    assert "is the matrix this command reads" in one_line(capsys)
    assert snapshot(repo) == before


# -------------------------------------------------------------- targets that are not regular files

@needs_dev_full
@pytest.mark.parametrize("args", [
    ["report", "-o", "dist", "--html", "/dev/full"],
    ["report", "-o", "dist", "--svg", "/dev/full"],
    ["bake", "--file", "/dev/full"],
    ["ci", "github", "--workflow", "/dev/full"],
])
def test_dev_full_is_refused_before_any_work(repo: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    def no_work(*_: object, **__: object) -> None:
        raise AssertionError("the command read its inputs before checking its output")

    monkeypatch.setattr("wheelfactory.plan.read.load_table", no_work)  # the one loader's
    monkeypatch.setattr("wheelfactory.runner.manifest.read", no_work)
    before = snapshot(repo)
    assert run(*args) == 2
    line = one_line(capsys)
    assert line == (f"wheelfactory: config error: cannot write {args[-2]} /dev/full: it exists and is a character "
                    "device, not a regular file; move it away or name another path")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # still the device node
    assert snapshot(repo) == before


@pytest.mark.parametrize("args", [
    ["report", "-o", "dist", "--html", "dist"],
    ["report", "-o", "dist", "--svg", "kernels"],
    ["bake", "--file", "dist"],
    ["ci", "github", "--workflow", "dist"],
])
def test_a_directory_is_refused(repo: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    before = snapshot(repo)
    assert run(*args) == 2
    assert f"{args[-2]} {args[-1]}: it is a directory; name a file for the " in one_line(capsys)
    assert snapshot(repo) == before


def test_a_fifo_is_refused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(repo / "pipe")
    for args in (["bake", "--file", "pipe"], ["ci", "github", "--workflow", "pipe"],
                 ["report", "-o", "dist", "--html", "pipe"]):
        assert run(*args) == 2
        assert "pipe: it exists and is a fifo, not a regular file" in one_line(capsys)
    assert stat.S_ISFIFO(os.lstat(repo / "pipe").st_mode)


@pytest.mark.parametrize("args", [
    ["report", "-o", "dist", "--html", "matrix.toml/report.html"],
    ["report", "-o", "dist", "--svg", "matrix.toml/deeper/grid.svg"],
    ["bake", "--file", "matrix.toml/bake.json"],
    ["ci", "github", "--workflow", "matrix.toml/w.yml"],
])
def test_a_path_under_a_file_is_one_line(repo: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    before = snapshot(repo)
    assert run(*args) == 2
    assert one_line(capsys).endswith(f"{repo / 'matrix.toml'} is not a directory; name a path inside a directory")
    assert snapshot(repo) == before


@pytest.mark.parametrize("args", [
    ["report", "-o", "dist", "--html"], ["report", "-o", "dist", "--svg"], ["bake", "--file"],
    ["ci", "github", "--workflow"],
])
def test_a_name_too_long_is_a_failed_write(repo: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    before = snapshot(repo)
    assert run(*args, "x" * 300) == 9
    assert one_line(capsys).endswith(f"{'x' * 300}: File name too long; name a shorter path")
    assert snapshot(repo) == before


# ---------------------------------------------------------------------------- - is standard output

def test_workflow_dash_is_stdout(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("ci", "github") == 0
    plain = capsys.readouterr().out
    assert run("ci", "github", "--workflow", "-") == 0
    dashed = capsys.readouterr()
    assert dashed.out == plain and plain.startswith("# Generated by `wheelfactory ci github`")
    assert not (repo / "-").exists()


def test_bake_dash_is_stdout_and_the_notes_go_to_stderr(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("bake", "--file", "-") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["group"]["default"]["targets"]  # stdout is exactly the file
    assert "note: " in out.err and not (repo / "-").exists()
    assert run("bake") == 0
    assert capsys.readouterr().out == out.out


def test_report_html_dash_is_stdout(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("report", "-o", "dist", "--html", "-") == 0
    out = capsys.readouterr()
    assert out.out.startswith("<!DOCTYPE html>") and out.out.rstrip().endswith("</html>")
    assert 'href="dist/manifest.json"' in out.out  # links relative to the working directory
    assert out.err.splitlines()[:2] == ["-", str(repo / "dist" / "report.svg")]
    assert (repo / "dist" / "report.svg").is_file() and not (repo / "dist" / "report.html").exists()
    assert not (repo / "-").exists()


def test_report_svg_dash_is_stdout(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("report", "-o", "dist", "--svg", "-") == 0
    out = capsys.readouterr()
    assert out.out.startswith("<svg ") and out.out.rstrip().endswith("</svg>")
    page = (repo / "dist" / "report.html").read_text()
    assert "grid as SVG" not in page  # the SVG went to stdout: the page does not link it
    assert out.err.splitlines()[:2] == [str(repo / "dist" / "report.html"), "-"]
    assert not (repo / "dist" / "report.svg").exists() and not (repo / "-").exists()


def test_report_both_dash_is_refused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(repo)
    assert run("report", "-o", "dist", "--html", "-", "--svg", "-") == 2
    assert one_line(capsys) == ("wheelfactory: error: --html - and --svg -: only one of them can go to standard "
                                "output")
    assert snapshot(repo) == before


# ------------------------------------------------------------------------------- failed writes

COMMANDS = {
    "report": (["report", "-o", "dist", "--html", "out/page.html"], "out/page.html"),
    "bake": (["bake", "--file", "out/bake.json"], "out/bake.json"),
    "ci": (["ci", "github", "--workflow", "out/wheels.yml"], "out/wheels.yml"),
}


@pytest.fixture(params=sorted(COMMANDS))
def command(request: pytest.FixtureRequest, repo: Path) -> Iterator[tuple[list[str], Path]]:
    args, target = COMMANDS[request.param]
    (repo / "out").mkdir()
    (repo / target).write_text("the old file\n")
    yield args, repo / target


def fail_with(code: int) -> object:
    def fail(*_: object, **__: object) -> None:
        raise OSError(code, os.strerror(code))
    return fail


@pytest.mark.parametrize(("code", "hint"), [(errno.ENOSPC, "No space left on device; free some space"),
                                            (errno.EROFS, "Read-only file system; ")])
def test_a_failed_rename_keeps_the_old_file(command: tuple[list[str], Path], repo: Path,
                                            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            code: int, hint: str) -> None:
    args, target = command
    monkeypatch.setattr(os, "replace", fail_with(code))
    assert run(*args) == 9
    line = one_line(capsys)
    assert line.startswith("wheelfactory: error: cannot write the ") and hint in line
    assert target.read_text() == "the old file\n" and temp_files(repo) == []


def test_no_temp_file_can_be_made(command: tuple[list[str], Path], repo: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    args, target = command
    monkeypatch.setattr(tempfile, "mkstemp", fail_with(errno.EROFS))  # a read-only output directory
    assert run(*args) == 9
    assert one_line(capsys).endswith("out is on a read-only filesystem: write somewhere else")
    assert target.read_text() == "the old file\n" and temp_files(repo) == []


def test_a_full_disk_mid_write_leaves_no_temp(command: tuple[list[str], Path], repo: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    args, target = command
    monkeypatch.setattr(atomic, "_sync_file", fail_with(errno.ENOSPC))  # the data reaches the disk at fsync
    assert run(*args) == 9
    assert "No space left on device" in one_line(capsys)
    assert target.read_text() == "the old file\n" and temp_files(repo) == []


def test_a_cleanup_that_fails_too_is_still_one_line(command: tuple[list[str], Path], repo: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The temp file cannot be removed either (the directory went read-only mid-write): the error is
    the write's, one line, not a traceback from the cleanup."""
    args, target = command
    monkeypatch.setattr(os, "replace", fail_with(errno.ENOSPC))
    real_unlink = Path.unlink
    left: list[Path] = []

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(atomic.TEMP_SUFFIX):
            left.append(self)
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    assert run(*args) == 9
    assert "No space left on device" in one_line(capsys)
    assert target.read_text() == "the old file\n" and left


def test_a_missing_output_directory_is_made_or_named(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("report", "-o", "dist", "--html", "new/deeper/page.html") == 0
    assert (repo / "new/deeper/page.html").is_file() and (repo / "new/deeper/page.svg").is_file()
    assert run("ci", "github", "--workflow", "ci/new/wheels.yml") == 0
    assert (repo / "ci/new/wheels.yml").is_file()
    capsys.readouterr()
    assert run("bake", "--file", "no/such/bake.json") == 2  # bake makes no directory (as before)
    assert one_line(capsys).endswith(f"directory {Path('no/such')} does not exist")


def test_a_wheel_the_manifest_names_is_an_input_of_the_report(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from wheelfactory.runner import manifest

    wheel = f"{VID}/tiny-0.1.0-cp39-abi3-linux_x86_64.whl"
    (repo / "dist" / wheel).write_bytes(b"not really a zip")
    manifest.write(repo / "dist", {VID: manifest.Entry(
        status="built", wheel=wheel, sha256="0" * 64, seconds=1.0, key="k", log=f"{VID}/build.log", error=None,
        engine="docker", image=None, torch_version="2.13.0", toolkit=None)})
    before = snapshot(repo)
    assert run("report", "-o", "dist", "--svg", f"dist/{wheel}") == 2
    assert one_line(capsys) == (f"wheelfactory: error: --svg dist/{wheel} is the wheel of {VID} this command reads: "
                                "write the report elsewhere")
    assert snapshot(repo) == before


def test_check_reads_only_a_regular_text_file(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(repo / "pipe")  # reading it would wait forever for a writer
    assert run("ci", "github", "--check", "pipe") == 2
    assert one_line(capsys) == "wheelfactory: error: --check pipe: not a regular file; name the committed workflow"
    (repo / "binary.yml").write_bytes(b"\xff\xfe\x00garbage")
    assert run("ci", "github", "--check", "binary.yml") == 2
    assert one_line(capsys).startswith("wheelfactory: error: --check binary.yml: cannot be read ('utf-8' codec")
