"""Every subcommand's output where it cannot be written: standard output on a full device
(/dev/full), a pipe its reader closed (`| head -c0`), and a locale that cannot encode the names
printed (LC_ALL=C without UTF-8 mode). Each ends with one line (or, for a closed pipe, quietly, as
Unix tools do) and its exit code, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest
from tests.testkit import REPO
from wheelfactory.cli.main import CLOSED_PIPE_EXIT, cli
from wheelfactory.errors import WriteFailed


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        found += leaf_commands(command, (*prefix, name)) if isinstance(command, click.Group) else [(*prefix, name)]
    return found


COMMANDS = leaf_commands(cli)
MATRIX = str(REPO / "matrix.toml")
# What prints: each command's help, and the plan in each format (the largest output there is).
INVOCATIONS = [[*command, "--help"] for command in COMMANDS] + [
    ["plan", "-m", MATRIX], ["plan", "-m", MATRIX, "--format", "json"], ["plan", "-m", MATRIX, "--format", "github"],
    ["plan", "-m", MATRIX, "--explain"], ["--help"], ["--version"],
]


# The C locale as a minimal container has it: no UTF-8 mode, and no coercion to C.UTF-8 (which
# Python does by itself otherwise): standard output is ASCII, and a non-ASCII name on the command
# line arrives as surrogate escapes.
C_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}


def run(args: list[str], stdout: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit code, standard error) of ``wheelfactory ARGS`` with standard output ``full``, ``closed``
    (a pipe whose reader is gone before the first write) or ``capture``."""
    command = [sys.executable, "-m", "wheelfactory", *args]
    environ = {**os.environ, **(env or {})}
    if stdout == "full":
        with open("/dev/full", "w") as full:
            done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, env=environ, timeout=120, check=False)
        return done.returncode, done.stderr.decode(errors="replace")
    if stdout == "closed":
        read, write = os.pipe()
        os.close(read)
        try:
            done = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, env=environ, timeout=120, check=False)
        finally:
            os.close(write)
        return done.returncode, done.stderr.decode(errors="replace")
    done = subprocess.run(command, capture_output=True, env=environ, timeout=120, check=False)
    return done.returncode, done.stderr.decode(errors="replace") + done.stdout.decode(errors="replace")


def test_every_subcommand_is_tried() -> None:
    assert len(COMMANDS) >= 16 and ("plan",) in COMMANDS and ("compat", "refresh") in COMMANDS


@pytest.mark.slow
def test_a_full_standard_output_is_one_line_and_exit_9() -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: (args, *run(args, "full")), INVOCATIONS))
    for args, code, err in results:
        assert "Traceback" not in err, (args, err)
        assert code == WriteFailed.exit_code, (args, code, err)
        assert err.strip() == "wheelfactory: error: cannot write standard output: No space left on device", (args, err)


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly_as_unix_tools_do() -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: (args, *run(args, "closed")), INVOCATIONS))
    for args, code, err in results:
        assert code == CLOSED_PIPE_EXIT and err == "", (args, code, err)


@pytest.mark.slow
def test_a_locale_that_cannot_encode_a_name_prints_it_escaped(tmp_path: Path) -> None:
    """LC_ALL=C with UTF-8 mode off: standard output is ASCII, and an output path holds a non-ASCII
    name; the message prints it escaped instead of failing to."""
    out = tmp_path / "dïst"
    ascii_only = C_LOCALE
    code, said = run(["index", "-o", str(out)], "capture", ascii_only)
    assert "Traceback" not in said and code == 2, said
    assert "d\\xefst" in said or "d\\udcc3\\udcafst" in said, said
    for args in (["plan", "-m", MATRIX], ["new", "--help"]):
        code, said = run(args, "capture", ascii_only)
        assert code == 0 and "Traceback" not in said, (args, said)


def test_an_output_directory_under_a_regular_file_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    """`build -o FILE/sub`: one line naming the file, exit 2 (bad input), no traceback, and no
    engine chosen or image made first."""
    (tmp_path / "regular").write_text("a file\n")
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "-o", str(tmp_path / "regular" / "sub"),
                             "--matrix", str(REPO / "matrix.toml"), "--engine", "host"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"wheelfactory: error: -o {tmp_path / 'regular' / 'sub'}: {tmp_path / 'regular'} is not a directory; "
        "name a path inside a directory"]
    assert "Traceback" not in result.stdout + result.stderr and "engine" not in result.stdout


@pytest.mark.slow
def test_every_subcommand_run_for_real_never_prints_a_traceback(tmp_path: Path) -> None:
    """Not only --help: each subcommand doing its work (on a small dist with an index), and with a
    300-character argument where it takes a path or URL, under a full standard output, a closed
    pipe and the C locale. Exit codes vary with the case; a traceback is never the answer."""
    from tests.publish.dist_fakes import make_dist
    dist, long = tmp_path / "dïst", "x" * 300  # a non-ASCII name: surrogate escapes under the C locale
    dist.mkdir()
    make_dist(dist)
    subprocess.run([sys.executable, "-m", "wheelfactory", "index", "-o", str(dist)], capture_output=True, timeout=300,
                   check=True)
    real = [["index", "-o", str(dist)], ["report", "-o", str(dist), "-m", MATRIX],
            ["export", "-o", str(dist), "--hf-layout", str(tmp_path / "hf"), "--skip-abi-check"],
            ["which", "--index", str(dist)], ["publish", "-o", str(dist), "--to", str(tmp_path / "site"), "--dry-run"],
            ["bake", "-m", MATRIX, "--file", "-"], ["ci", "github", "-m", MATRIX, "--workflow", "-"],
            ["gc", "--dry-run"], ["new", long], ["plan", "-m", long], ["index", "-o", long], ["which", "--index", long],
            ["publish", "-o", str(dist), "--to", long, "--dry-run"],
            ["report", "-o", str(dist), "-m", MATRIX, "--html", f"{long}/x.html"],
            ["report", "-o", str(dist), "-m", MATRIX, "--html", "-"]]
    cases = [(args, mode) for args in real for mode in ("full", "closed", "c-locale")]

    def one(case: tuple[list[str], str]) -> tuple[list[str], str, int, str]:
        args, mode = case
        if mode == "c-locale":
            return (args, mode, *run(args, "capture", C_LOCALE))
        return (args, mode, *run(args, mode))

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, cases))
    assert len(results) == 45
    tracebacks = [(args[:2], mode, said[-300:]) for args, mode, _, said in results if "Traceback" in said]
    assert tracebacks == []
