"""The project's own tests ([test]) against a finished wheel, whichever engine runs them: what an
engine runs (``project_test_shell`` in a copy of the test sources), how its output is read
(``project_test_verdict``) and what the manifest keeps of a run (``run_project_tests``: the
command, the verdict, its counts, an excerpt when it failed)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from wheelfactory.errors import Findings, VariantBuildError
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.stage import Stage
from wheelfactory.project.wheel_checks import copy_test_sources
from wheelfactory.support.timeline import Timeline, note
from wheelfactory.verify.diagnose import NO_GPU

# Runs the project's tests ([test]) against the wheel in a clean environment (torch, the wheel and
# the tests' requirements); returns (passed, output).
TestRun = Callable[[ProjectTests, Path], tuple[bool, str]]

EXCERPT_LINES = 30
# The engines run ``COMMAND; echo "TESTS_EXIT $?"``: the status comes back with the output, so a
# failing test run is a verdict, not an error of the runner.
TESTS_EXIT = "wheelfactory-tests-exit"
# The test output goes to a log, not a terminal: wide enough that pytest's summary lines keep the
# assertion messages (it cuts them to the width, 80 columns without a terminal).
TEST_TERMINAL = {"COLUMNS": "400"}
# What the offline Hub loader says of a test that needs a kernel this build did not make
# (project/hub_offline_plugin.py), as pytest's -rs summary lists it.
NOT_RUN = "not run: needs the Hub kernel"
# pytest's (and unittest's) closing counts: "36 passed, 17 skipped, 21 warnings in 120.10s".
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected)\b")
_PLURAL = {"error": "errors", "warning": "warnings"}
# a terminal's colours and styles (a project's pytest configuration may force them on)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def stage_test_sources(stage: Stage, tests: ProjectTests, dest: Path, log: Path) -> None:
    """Copy the test sources into ``dest`` (the project's own package left out) and say in the log
    what runs; what an engine does before running ``project_test_shell`` there."""
    hidden = copy_test_sources(stage.checks, tests, dest)
    shown = f"; hidden from them: {', '.join(hidden)}" if hidden else ""
    note(log, f"the project's tests ({tests.declared_in} [test]): {tests.command}{shown}")


def project_test_shell(tests: ProjectTests, project: str) -> str:
    """The ``sh -c`` script an engine runs in ``project`` (the sources' copy, as the runner sees
    it); ``project_test_verdict`` reads its output."""
    return f'{tests.render(project)} 2>&1; echo "{TESTS_EXIT} $?"'


def project_test_verdict(output: str) -> tuple[bool, str]:
    """(passed, the command's own output) from what ``project_test_shell`` printed."""
    body, _, status = output.rstrip().rpartition(TESTS_EXIT)
    return status.strip() == "0", body


def run_project_tests(
    stage: Stage,
    tests: ProjectTests,
    wheel: Path,
    log: Path,
    run_tests: TestRun,
    timeline: Timeline,
    error: type[VariantBuildError],
) -> dict[str, object]:
    """Run the project's tests; the manifest's record of the run. A failure fails the variant
    with an excerpt of the output (pytest's summary when there is one), the record carried."""
    start = time.monotonic()
    with timeline.phase("tests"):
        passed, output = run_tests(tests, wheel)
    excerpt = "" if passed else failure_excerpt(plain_text(output))
    record: dict[str, object] = {
        "command": tests.command,
        "declared_in": tests.declared_in,
        "passed": passed,
        "seconds": round(time.monotonic() - start, 1),
        "excerpt": excerpt or None,
        "not_run": not_run(output) or None,
        "counts": test_counts(output) or None,
    }
    if passed:
        return record
    first = next(
        (line for line in excerpt.splitlines() if line.startswith(("FAILED", "ERROR"))),
        excerpt.splitlines()[-1] if excerpt else "no output",
    )
    needs_gpu = any(sign in output for sign in NO_GPU)
    raise error(
        f"{stage.variant.id}: the project's tests failed ({tests.command}): {first}"
        + (
            "; they ask for a GPU, which the build machine has not: leave these variants out of the "
            'tests with matrix.toml [test] skip (e.g. skip = ["*"] where every test needs one)'
            if needs_gpu
            else ""
        ),
        found=Findings(tests=record),
    )


def plain_text(output: str) -> str:
    """``output`` without terminal escape sequences (colours)."""
    return _ANSI.sub("", output)


def test_counts(output: str) -> dict[str, int]:
    """The counts of the last line of ``output`` that reports tests passed, failed or in error
    (pytest's summary line, colours and ``=`` rules stripped); {} when none does."""
    for line in reversed(plain_text(output).splitlines()):
        found = _COUNT.findall(line)
        if any(kind in ("passed", "failed", "error", "errors") for _, kind in found):
            return {_PLURAL.get(kind, kind): int(count) for count, kind in found}
    return {}


def not_run(output: str) -> list[str]:
    """The tests reported as not run, one line each (pytest's "SKIPPED [n] where: reason")."""
    return [
        line.strip()
        for line in output.splitlines()
        if line.startswith("SKIPPED") and NOT_RUN in line
    ]


def failure_excerpt(output: str) -> str:
    """What a reader needs from a failed test run: pytest's short summary when present, else the
    last lines."""
    lines = output.rstrip().splitlines()
    for index, line in enumerate(lines):
        if "short test summary info" in line:
            return "\n".join(lines[index + 1 :][:EXCERPT_LINES])
    return "\n".join(lines[-EXCERPT_LINES:])
