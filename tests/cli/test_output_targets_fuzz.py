"""Property-based: any output path through `report --html/--svg`, `bake --file` and `ci github
--workflow` gives a documented exit code, one stderr line when it fails (never a traceback), no
change to any file but the target, inputs intact, and no temp file left.

The paths generated: an input of the command (the matrix, the compatibility table, the manifest,
a build log, a hard link to the matrix), the same path for both report outputs, a path under a
regular file, /dev/full, ``-``, a name too long, a directory, an existing regular file that is no
input (replaced), and a fresh path, possibly in directories that do not exist yet.
Examples per run: 150 (times WHEELFACTORY_FUZZ_SCALE), and a sweep of every (command, kind) once.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from tests.cli.outputs_kit import VID, make_repo, snapshot, temp_files
from wheelfactory.cli.main import main

# No example database: the suite must not write .hypothesis/ into the checkout.
FUZZ = settings(deadline=None, database=None, derandomize=True,  # CI sees what a local run saw
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                phases=[Phase.explicit, Phase.generate, Phase.shrink])
EXIT_CODES = {0, 2, 9}  # README "Exit codes": done; bad input (ConfigError, UsageError); WriteFailed


def examples(count: int) -> int:
    """``count``, times WHEELFACTORY_FUZZ_SCALE for a longer hunt (default 1)."""
    return max(1, int(count * float(os.environ.get("WHEELFACTORY_FUZZ_SCALE", "1"))))


def _has_dev_full() -> bool:
    try:
        return stat.S_ISCHR(os.stat("/dev/full").st_mode)
    except OSError:
        return False


KINDS = ["input", "hard link", "under a file", "dash", "too long", "directory", "existing", "fresh", "fresh deep"]
if _has_dev_full():
    KINDS.append("device")
INPUTS = ["matrix.toml", "compat.toml", "dist/manifest.json", f"dist/{VID}/build.log"]
PLAN_INPUTS = INPUTS[:2]  # what bake and ci github read; the report also reads dist/
COMMANDS = ["report --html", "report --svg", "report both", "bake --file", "ci github --workflow"]
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=12).filter(
    lambda n: n not in (".", "..") and not n.startswith("-") and not n.endswith(".tmp"))


def inputs_of(command: str) -> list[str]:
    return INPUTS if command.startswith("report") else PLAN_INPUTS


@st.composite
def target(draw: st.DrawFn, command: str) -> tuple[str, str]:
    """(kind, path relative to the repository, or ``-``, or /dev/full)."""
    kind = draw(st.sampled_from(KINDS))
    name = draw(NAMES)
    path = {
        "input": draw(st.sampled_from(inputs_of(command))),
        "hard link": "hard.toml",
        "under a file": f"{draw(st.sampled_from(INPUTS))}/{name}",
        "dash": "-",
        "too long": name + "x" * 300,
        "directory": draw(st.sampled_from(["dist", f"dist/{VID}", "kernels", "."])),
        "existing": "old.txt",
        "fresh": f"out-{name}",
        "fresh deep": f"new/{name}/{name}.out",
        "device": "/dev/full",
    }[kind]
    return kind, path


def command_line(command: str, path: str, second: str) -> list[str]:
    common = ["--compat", "compat.toml"]  # the table is an input too
    if command == "report --html":
        return ["report", "-o", "dist", "-m", "matrix.toml", *common, "--html", path]
    if command == "report --svg":
        return ["report", "-o", "dist", "-m", "matrix.toml", *common, "--svg", path]
    if command == "report both":
        return ["report", "-o", "dist", "-m", "matrix.toml", *common, "--html", path, "--svg", second]
    if command == "bake --file":
        return ["bake", "-m", "matrix.toml", *common, "--file", path]
    return ["ci", "github", "-m", "matrix.toml", *common, "--workflow", path]


def expected(kind: str, command: str) -> int:
    if kind in ("input", "hard link", "under a file", "directory", "device"):
        return 2
    if kind == "too long":
        return 9
    if kind == "fresh deep" and command == "bake --file":
        return 2  # bake makes no directory: "directory ... does not exist"
    return 0


@settings(FUZZ, max_examples=examples(150))
@given(data=st.data(), command=st.sampled_from(COMMANDS), same=st.booleans())
def test_any_output_path_is_written_or_refused_in_one_line(tmp_path: Path, data: st.DataObject, command: str,
                                                          same: bool) -> None:
    first, second = data.draw(target(command), "first"), data.draw(target(command), "second")
    if command == "report both" and same and first[0] != "dash":
        second = first  # the same path twice
    code = check(tmp_path, command, first, second)
    event(f"{command} {first[0]}: exit {code}")  # --hypothesis-show-statistics: what was covered


SWEEP = {"input": "matrix.toml", "hard link": "hard.toml", "under a file": "compat.toml/x", "dash": "-",
         "too long": "y" * 300, "directory": "dist", "existing": "old.txt", "fresh": "out-a.b",
         "fresh deep": "new/a/b.out", "device": "/dev/full"}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_path_through_every_command(tmp_path: Path, command: str, kind: str) -> None:
    """The same property for each (command, kind) once, whatever the generator favours;
    `report both` pairs the path with a fresh one, and with itself."""
    check(tmp_path, command, (kind, SWEEP[kind]), ("fresh", "second.svg"))
    if command == "report both":
        check(tmp_path, command, (kind, SWEEP[kind]), (kind, SWEEP[kind]))


def check(tmp_path: Path, command: str, first: tuple[str, str], second: tuple[str, str]) -> int:
    """Run the command with the output path(s) in a fresh repository; assert the property; the exit code."""
    kind, path = first
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        repo = make_repo(Path(scratch) / "repo")
        os.link(repo / "matrix.toml", repo / "hard.toml")
        (repo / "old.txt").write_text("an old output\n")
        device = os.stat("/dev/full").st_mode if _has_dev_full() else None
        before = snapshot(repo)
        args = command_line(command, path, second[1])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(repo), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                pytest.raises(SystemExit) as exited:
            main(args)
        code = int(exited.value.code or 0)
        errors, after = err.getvalue(), snapshot(repo)
        assert code in EXIT_CODES, (args, code, errors)
        assert "Traceback" not in errors, errors
        if code:
            assert errors.count("\n") == 1 and errors.startswith("wheelfactory: "), (args, errors)
        if command != "report both":
            assert code == expected(kind, command), (args, code, errors)
        else:  # both written (or one to stdout) exactly when neither is refused nor both are one file
            clash = second[1] == path and (kind != "dash" or second[0] == "dash")
            fine = expected(kind, command) == 0 and expected(second[0], command) == 0 and not clash
            assert (code == 0) == fine, (args, code, errors)
        # Nothing but the targets changed; the inputs are intact.
        targets = {str(Path(p)) for p in (path, second[1] if command == "report both" else "-")}
        if command in ("report --html", "report --svg") and code == 0:
            # The default companion file of the report: dist/report.* or beside --html.
            targets |= {"dist/report.html", "dist/report.svg", str(Path(path).with_suffix(".svg"))}
        changed = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
        allowed = {name for name in changed if any(name == t or t.startswith(name + "/") for t in targets)}
        assert changed == allowed, (args, sorted(changed - allowed))
        for name in inputs_of(command):
            assert after[name] == before[name]
        assert temp_files(repo) == []
        assert device is None or os.stat("/dev/full").st_mode == device
        if code == 0 and kind == "dash" and command != "report both":
            text = out.getvalue()
            if command == "bake --file":
                json.loads(text)
            elif command == "ci github --workflow":
                assert text.startswith("# Generated by `wheelfactory ci github`")
            else:
                assert text.startswith("<!DOCTYPE html>" if command == "report --html" else "<svg ")
    return code
