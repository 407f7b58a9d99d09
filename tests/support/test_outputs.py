"""support/outputs.py: outputs named on the command line are checked against the command's inputs,
each other, and what already lies at their path, before any work."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError, UsageError, WriteFailed
from wheelfactory.support.outputs import check_outputs, is_stdout, same_file


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "matrix.toml").write_text("[project]\n")
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "manifest.json").write_text("{}")
    return tmp_path


def test_dash_is_stdout() -> None:
    assert is_stdout("-") and is_stdout(Path("-")) and not is_stdout(None) and not is_stdout(Path("./-x"))


def test_same_file_by_inode_or_by_resolved_path(files: Path) -> None:
    os.link(files / "matrix.toml", files / "hard.toml")
    (files / "soft.toml").symlink_to("matrix.toml")
    assert same_file(Path("hard.toml"), files / "matrix.toml")  # hard link: one inode
    assert same_file(Path("soft.toml"), Path("matrix.toml"))
    assert same_file(Path("dist/../new.txt"), files / "new.txt")  # neither exists: the resolved path
    assert not same_file(Path("new.txt"), Path("matrix.toml"))
    assert not same_file(Path("x" * 300), Path("matrix.toml"))  # a name too long compares, never raises


def test_an_output_that_is_an_input_is_refused(files: Path) -> None:
    inputs = {"the matrix": Path("matrix.toml"), "the manifest": files / "dist" / "manifest.json",
              "the compatibility table": None}
    with pytest.raises(UsageError) as caught:
        check_outputs({"--html": Path("dist/manifest.json")}, inputs, writes="the report")
    assert str(caught.value) == ("--html dist/manifest.json is the manifest this command reads: write the report "
                                 "elsewhere")
    with pytest.raises(UsageError, match="--file matrix.toml is the matrix this command reads"):
        check_outputs({"--file": Path("./matrix.toml")}, inputs, writes="the bake file")
    check_outputs({"--file": Path("bake.json"), "--other": None, "--svg": Path("-")}, inputs, writes="x")


def test_two_outputs_that_are_one_file_are_refused(files: Path) -> None:
    with pytest.raises(UsageError) as caught:
        check_outputs({"--html": Path("x"), "--svg": files / "x"}, {}, writes="the report")
    assert str(caught.value) == f"--svg {files / 'x'} is the file --html names too: give each output its own path"
    check_outputs({"--html": Path("-"), "--svg": Path("-")}, {}, writes="the report")  # stdout is the CLI's to refuse


def test_what_lies_at_the_path(files: Path) -> None:
    with pytest.raises(UsageError, match="--html dist: it is a directory; name a file for the report"):
        check_outputs({"--html": Path("dist")}, {}, writes="the report")
    os.mkfifo(files / "pipe")
    with pytest.raises(ConfigError, match="cannot write --file pipe: it exists and is a fifo"):
        check_outputs({"--file": Path("pipe")}, {}, writes="the bake file")
    with pytest.raises(UsageError) as caught:
        check_outputs({"--file": Path("matrix.toml/deeper/x.json")}, {}, writes="the bake file")
    assert str(caught.value) == (f"--file matrix.toml/deeper/x.json: {files / 'matrix.toml'} is not a directory; "
                                 "name a path inside a directory")
    with pytest.raises(WriteFailed, match="File name too long; name a shorter path"):
        check_outputs({"--file": Path("y" * 300)}, {}, writes="the bake file")
    check_outputs({"--file": Path("new/dir/x.json"), "--svg": Path("matrix.toml")}, {}, writes="x")  # fine
    assert sorted(p.name for p in files.iterdir()) == ["dist", "matrix.toml", "pipe"]  # nothing written


def test_dev_full_is_refused_and_left_alone() -> None:
    try:
        is_device = stat.S_ISCHR(os.stat("/dev/full").st_mode)
    except OSError:
        is_device = False
    if not is_device:
        pytest.skip("no /dev/full here")
    with pytest.raises(ConfigError, match="cannot write --html /dev/full: it exists and is a character device"):
        check_outputs({"--html": Path("/dev/full")}, {}, writes="the report")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
