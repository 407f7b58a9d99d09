"""Where a test run's time goes, written down as the run goes (a pytest plugin, loaded by
tests/conftest.py): each test's set-up, call and tear-down seconds, each slow fixture's set-up, and
for every build a fixture or a test body made, the factory's own phases from its manifest (image,
wheelhouse, environment, compile, ... with their seconds). At the end of the session one JSON file
(``WHEELFACTORY_TEST_TIMES``, default ``<test cache>/test-times.json``); ``benchmarks/ci_time.py``
turns it into tables, by module and by phase.

Works under pytest-xdist: a worker attaches what it measured to the test's report (its
``user_properties``, which travel with reports), and only the controller writes the file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.repo_paths import TEST_CACHE

TIMES_FILE = Path(os.environ.get("WHEELFACTORY_TEST_TIMES", TEST_CACHE / "test-times.json"))
FORMAT = 1
SLOW_FIXTURE_S = 0.5  # a faster fixture's set-up is left in its test's set-up time
FIXTURE = "wheelfactory-fixture"  # user_properties names
BUILDS = "wheelfactory-builds"


def builds_in(root: Path, since: float, patterns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The variants built (or failed) into the dists under ``root`` whose manifest was written
    after ``since`` (wall clock): their seconds and phases, as the manifest records them."""
    found = []
    for pattern in patterns:
        for manifest in root.glob(pattern):
            try:
                if manifest.stat().st_mtime < since - 1:
                    continue
                variants = json.loads(manifest.read_text())["variants"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            for variant, entry in variants.items() if isinstance(variants, dict) else ():
                if isinstance(entry, dict) and entry.get("status") in ("built", "failed") and entry.get("phases"):
                    found.append({"variant": variant, "status": entry["status"], "seconds": entry.get("seconds"),
                                  "phases": entry["phases"], "dist": str(manifest.parent), "key": entry.get("key")})
    return found


def kind_of(value: object, since: float) -> tuple[str, list[dict[str, Any]]]:
    """What a fixture's set-up made, by what it returned: builds (a work directory or dist with a
    fresh manifest), an image, an environment (a venv), or plain set-up."""
    if isinstance(value, Path) and value.is_dir():
        builds = builds_in(value, since, ("manifest.json", "dist/manifest.json"))
        if builds:
            return "build", builds
        if (value / "pyvenv.cfg").is_file():
            return "environment", []
    if type(value).__name__ in ("BaseImage", "ImageRef"):
        return "image", []
    return "set-up", []


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    began, wall = time.monotonic(), time.time()
    result = yield
    seconds = time.monotonic() - began
    item = getattr(request, "_pyfuncitem", None)
    if seconds >= SLOW_FIXTURE_S and item is not None:
        kind, builds = kind_of(result, wall)
        item.user_properties.append((FIXTURE, {"name": fixturedef.argname, "scope": fixturedef.scope,
                                               "seconds": round(seconds, 2), "kind": kind, "builds": builds}))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    wall = time.time()
    try:
        return (yield)
    finally:
        tmp = getattr(item, "funcargs", {}).get("tmp_path")
        if isinstance(tmp, Path) and "slow" in item.keywords:
            builds = builds_in(tmp, wall, ("*/manifest.json", "*/*/manifest.json", "manifest.json"))
            if builds:
                item.user_properties.append((BUILDS, builds))


class TimesRecorder:
    """On the controller (or a run without workers): every report, then the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = time.time()
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(report.nodeid, {"nodeid": report.nodeid, "setup": 0.0, "call": 0.0,
                                                     "teardown": 0.0, "outcome": "passed", "fixtures": [],
                                                     "builds": []})
        test[report.when] = round(report.duration, 3)
        if report.when == "call" or report.outcome != "passed":
            test["outcome"] = "error" if report.failed and report.when != "call" else report.outcome
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
        if worker:
            test["worker"] = worker
        test["markers"] = sorted(m for m in ("slow", "docker") if m in report.keywords)
        if report.when == "teardown":  # the last report carries everything the test recorded
            for name, value in report.user_properties:
                if name == FIXTURE:
                    test["fixtures"].append(value)
                elif name == BUILDS:
                    test["builds"].extend(value)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        record = {"format": FORMAT, "started": self.started, "finished": time.time(),
                  "workers": getattr(session.config.option, "numprocesses", None) or 0,
                  "tests": list(self.tests.values())}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps(record, indent=1))
            os.replace(partial, self.path)
        except OSError as exc:  # the run's result is what counts: say so, go on
            print(f"\nwheelfactory timings: could not write {self.path}: {exc}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker sends its reports to the controller
        config.pluginmanager.register(TimesRecorder(TIMES_FILE), "wheelfactory-times-recorder")
