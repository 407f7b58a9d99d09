"""CI stays fast and says where its time goes (CONTRIBUTING.md, "Time"): `.ci/run` times each of
its phases and prints them, with the tests' time by module and by phase and the slowest tests,
however the run ends; tests/timing_plugin.py records what benchmarks/ci_time.py tabulates, in
pytest-xdist workers too; and no two shared builds compile the same variant."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.shared_builds import SharedBuild
from tests.testkit import REPO

CI_RUN = REPO / ".ci" / "run"
PHASES = ["venv", "apt", "engine", "docs", "pytest"]


def test_ci_run_times_its_phases_and_reports_them_at_exit() -> None:
    text = CI_RUN.read_text()
    assert re.findall(r"^phase (\w+)$", text, re.MULTILINE) == PHASES
    assert text.index("trap report EXIT") < text.index("phase venv")  # a failure in any phase still reports
    assert re.search(r"trap '[^']*; report' EXIT", text)  # and so does the trap that replaces it later
    # README's command 2 is what the pytest phase runs
    readme = (REPO / "README.md").read_text()
    command = readme.split("2. Run the tests", 1)[1].split("```bash", 1)[1].split("```", 1)[0].strip()
    assert [line for line in text.split("phase pytest\n", 1)[1].splitlines() if not line.startswith("#")][0] == command


def test_the_report_comes_however_the_run_ends(tmp_path: Path) -> None:
    script = 'set -euo pipefail; start=$(date +%s); . .ci/phases.sh; trap report EXIT; phase venv; phase apt; exit 3'
    env = {**os.environ, "CI_PHASES": str(tmp_path / "phases"), "WHEELFACTORY_TEST_TIMES": str(tmp_path / "none.json")}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 3, done.stderr
    assert [line.split()[0] for line in (tmp_path / "phases").read_text().splitlines()] == ["venv", "apt"]
    assert "## .ci/run by phase" in done.stdout and re.search(r"^total\s+\d+\s+100 %$", done.stdout, re.MULTILINE)
    assert "pytest did not run to its end" in done.stdout and "ci: finished in" in done.stdout


SUITE = '''
import json, time
from pathlib import Path
import pytest

def write_dist(root, phases):
    dist = root / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    entry = {"status": "built", "seconds": sum(phases.values()), "phases": phases, "key": "k" * 64}
    (dist / "manifest.json").write_text(json.dumps({"variants": {"v1": entry}}))

@pytest.fixture(scope="module")
def shared_build(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    time.sleep(1.0)
    write_dist(work, {"wheelhouse": 0.2, "environment": 0.3, "compile": 0.5})
    return work

def test_uses_the_build(shared_build):
    assert (shared_build / "dist" / "manifest.json").is_file()

@pytest.mark.slow
def test_builds_its_own(tmp_path):
    time.sleep(0.5)
    write_dist(tmp_path / "mine", {"compile": 0.4, "smoke": 0.1})

def test_fast():
    pass
'''


def test_the_plugin_records_fixtures_and_builds_in_workers_and_ci_time_tabulates_them(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("def pytest_configure(config):\n"
                                       "    config.addinivalue_line('markers', 'slow: slow')\n")
    (suite / "test_sample.py").write_text(textwrap.dedent(SUITE))
    times = tmp_path / "times.json"
    env = {**os.environ, "WHEELFACTORY_TEST_TIMES": str(times),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.timing_plugin", "-n", "2", "-p",
                           "no:cacheprovider", str(suite)], cwd=suite, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(times.read_text())
    tests = {t["nodeid"].split("::")[1]: t for t in record["tests"]}
    assert set(tests) == {"test_uses_the_build", "test_builds_its_own", "test_fast"}
    assert all(t["worker"].startswith("gw") for t in tests.values())  # measured in the workers
    (fixture,) = tests["test_uses_the_build"]["fixtures"]
    assert fixture["name"] == "shared_build" and fixture["kind"] == "build" and fixture["seconds"] >= 1.0
    assert [b["phases"] for b in tests["test_builds_its_own"]["builds"]] == [{"compile": 0.4, "smoke": 0.1}]

    # the fixture's second is its build's phases; the test body's half second its own build and the rest
    phases = {t.nodeid.split("::")[1]: t.phases for t in ci_time().from_times(record)[0]}
    shared = phases["test_uses_the_build"]
    assert (shared["wheel sets"], shared["environments"], shared["compiles"]) == (0.2, 0.3, 0.5)
    own = phases["test_builds_its_own"]
    assert (own["compiles"], own["checks"]) == (0.4, 0.1) and own["tests"] >= 0

    report = subprocess.run([sys.executable, str(REPO / "benchmarks" / "ci_time.py"), str(times)],
                            capture_output=True, text=True, timeout=120, check=True).stdout
    assert "## Test time by module" in report and "## Test time by phase" in report
    assert "## The 15 slowest tests" in report and "busy per worker: gw" in report
    # the same variant and key built into two dists: a build the second test could have shared
    twice = report.split("## Built more than once", 1)[1].split("##", 1)[0]
    assert "v1" in twice and "test_uses_the_build" in twice and "test_builds_its_own" in twice
    module_row = next(line for line in report.splitlines() if "test_sample.py" in line and "::" not in line)
    assert module_row.split()[1] == "3"  # its three tests


def ci_time():  # type: ignore[no-untyped-def]
    """benchmarks/ci_time.py as a module (benchmarks/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_time", REPO / "benchmarks" / "ci_time.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ci_time", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def declared_builds() -> list[tuple[Path, SharedBuild]]:
    """Every SharedBuild a test module declares at its top level, with the module's path."""
    import importlib

    found = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if "fixtures" in path.relative_to(REPO).parts or "SharedBuild(" not in path.read_text():
            continue
        # by its package name, as pytest imports it: one module object whoever asks
        module = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
        found += [(path, value) for value in vars(module).values() if isinstance(value, SharedBuild)]
    return found


def test_no_two_shared_builds_build_the_same_variant() -> None:
    """A module that needs a variant another module builds reads that build (its fixture, or the
    session's docker_build) instead of compiling it again: the planner says what each declared
    build makes, and no (engine, project, variant) is made by two of them."""
    builds = declared_builds()
    names = [build.name for _, build in builds]
    assert len(builds) >= 15 and len(set(names)) == len(names), names  # each writes its own directory
    made: dict[tuple[str, str, str], str] = {}
    twice = []
    for path, build in builds:
        for variant in build.planned():
            if variant in made and made[variant] != build.name:
                twice.append(f"{variant[2]} of {variant[1]} ({variant[0]}): {made[variant]} and {build.name} "
                             f"({path.relative_to(REPO)})")
            made.setdefault(variant, build.name)
    assert not twice, "built twice; share the first build's fixture instead:\n" + "\n".join(twice)


def test_a_build_that_tests_only_read_is_a_declared_shared_build() -> None:
    """Persistent builds go through make_shared(SharedBuild): a direct build_matrix() call in a test
    module would be a build the check above cannot see. (A test that changes something builds its
    own copy in tmp_path with `build()`.)"""
    import ast

    callers = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if "fixtures" in path.relative_to(REPO).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "build_matrix":
                callers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert callers == ["tests/docker/docker_helpers.py:" + str(_make_shared_line())], callers


def _make_shared_line() -> int:
    text = (REPO / "tests" / "docker" / "docker_helpers.py").read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("def make_shared("))
    return next(i + 1 for i, line in enumerate(text) if i > start and "build_matrix(" in line)
