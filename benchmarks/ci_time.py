"""Where a CI run's time went: the phases of `.ci/run` itself (venv, apt, engine, docs, pytest), the
test time by module and by phase (set-up, images, wheel sets, environments, compiles, checks,
tests), the slowest tests, and the total.

    python benchmarks/ci_time.py [TIMES.json | --junit JUNIT.xml] [--ci-phases FILE] [--top N]

TIMES.json is what tests/timing_plugin.py writes at the end of every pytest session (default:
<test cache>/test-times.json): each test's set-up, call and tear-down, each slow fixture's set-up
and the factory's own phases of every build a fixture or a test made (read from its manifest).
A run without the plugin can still be read from pytest's ``--junitxml`` (modules and tests only:
junit has no phases). ``--ci-phases`` reads the ``name seconds`` lines `.ci/run` writes.

How phases are counted: a fixture's set-up is split by the phases of the builds it made, scaled to
its own seconds when variants built side by side (their phases then add up to more than the wall
time it took); what is left of it is "set-up". A test body's time is "tests", less the builds it
made itself. With pytest-xdist the module and phase sums are busy seconds summed over the workers,
which is more than the wall time the run took (printed beside them).
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: the tests package
from tests.repo_paths import TEST_CACHE  # noqa: E402 (pytest-free: the tests' cache folder)

PHASES = ("set-up", "images", "wheel sets", "environments", "compiles", "checks", "tests")
# The factory's build phases (support/timeline.py names them) -> the report's phases.
BUILD_PHASES = {"image": "images", "wheelhouse": "wheel sets", "environment": "environments",
                "stage": "compiles", "container": "compiles", "compile": "compiles", "repair": "compiles",
                "verify": "checks", "audit": "checks", "smoke": "checks", "tests": "checks", "publish": "checks"}
FIXTURE_KINDS = {"image": "images", "environment": "environments", "set-up": "set-up", "build": "set-up"}


@dataclass
class Test:
    nodeid: str
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    worker: str = ""
    builds: list[dict[str, object]] = field(default_factory=list)  # what its fixtures and body built

    @property
    def module(self) -> str:
        return self.nodeid.split("::")[0]


def split_builds(seconds: float, builds: list[dict[str, object]]) -> dict[str, float]:
    """``seconds`` of wall time that made ``builds``, by report phase; the part no phase names is
    left out (the caller counts it where the time was spent)."""
    summed: dict[str, float] = defaultdict(float)
    for build in builds:
        for name, value in dict(build.get("phases") or {}).items():  # type: ignore[call-overload]
            summed[BUILD_PHASES.get(name, "compiles")] += float(value)
    total = sum(summed.values())
    scale = min(1.0, seconds / total) if total else 0.0
    return {phase: value * scale for phase, value in summed.items()}


def from_times(data: dict[str, object]) -> tuple[list[Test], float]:
    tests = []
    for raw in data["tests"]:  # type: ignore[attr-defined]
        phases: dict[str, float] = defaultdict(float)
        setup_left = float(raw["setup"])
        for fixture in raw["fixtures"]:
            seconds = min(float(fixture["seconds"]), setup_left)
            split = split_builds(seconds, fixture["builds"])
            for phase, value in split.items():
                phases[phase] += value
            phases[FIXTURE_KINDS.get(fixture["kind"], "set-up")] += seconds - sum(split.values())
            setup_left -= seconds
        phases["set-up"] += setup_left + float(raw["teardown"])
        split = split_builds(float(raw["call"]), raw["builds"])
        for phase, value in split.items():
            phases[phase] += value
        phases["tests"] += float(raw["call"]) - sum(split.values())
        total = float(raw["setup"]) + float(raw["call"]) + float(raw["teardown"])
        builds = [*(b for f in raw["fixtures"] for b in f["builds"]), *raw["builds"]]
        tests.append(Test(raw["nodeid"], total, dict(phases), raw.get("worker", ""), builds))
    return tests, float(data["finished"]) - float(data["started"])  # type: ignore[arg-type]


def module_of_classname(classname: str) -> str:
    """junit's ``tests.docker.test_docker_build[.TestClass]`` -> ``tests/docker/test_docker_build.py``."""
    parts = classname.split(".")
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def from_junit(path: Path) -> tuple[list[Test], float]:
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = []
    for case in root.iter("testcase"):
        nodeid = f"{module_of_classname(case.get('classname', ''))}::{case.get('name')}"
        tests.append(Test(nodeid, float(case.get("time", 0))))
    return tests, sum(float(suite.get("time", 0)) for suite in suites)


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [header, *rows]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def report(tests: list[Test], wall: float, ci_phases: list[tuple[str, float]], top: int) -> str:
    out = []
    if ci_phases:
        total = sum(s for _, s in ci_phases)
        out += ["## .ci/run by phase", table([(name, f"{s:.0f}", f"{100 * s / max(total, 1):.0f} %") for name, s in ci_phases]
                                             + [("total", f"{total:.0f}", "100 %")], ("phase", "s", "share")), ""]
    if not tests:
        return "\n".join(out).rstrip()
    busy = sum(t.seconds for t in tests)
    by_module: dict[str, list[Test]] = defaultdict(list)
    for test in tests:
        by_module[test.module].append(test)
    has_phases = any(t.phases for t in tests)
    rows = []
    for module, members in sorted(by_module.items(), key=lambda kv: -sum(t.seconds for t in kv[1]))[:top]:
        seconds = sum(t.seconds for t in members)
        row = [module, str(len(members)), f"{seconds:.0f}", f"{100 * seconds / busy:.1f} %" if busy else "-"]
        if has_phases:
            row += [f"{sum(t.phases.get(p, 0.0) for t in members):.0f}" for p in PHASES]
        rows.append(tuple(row))
    header = ("module", "tests", "s", "share", *(PHASES if has_phases else ()))
    out += [f"## Test time by module (the {min(top, len(by_module))} slowest of {len(by_module)})", table(rows, header), ""]
    if has_phases:
        sums = {p: sum(t.phases.get(p, 0.0) for t in tests) for p in PHASES}
        out += ["## Test time by phase", table([(p, f"{s:.0f}", f"{100 * s / busy:.1f} %" if busy else "-")
                                                for p, s in sums.items()], ("phase", "s", "share")), ""]
    twice = built_twice(tests)
    if twice:
        out += ["## Built more than once (the same variant and cache key: a build a test could have shared)",
                table(twice, ("variant", "key", "built by")), ""]
    slowest = sorted(tests, key=lambda t: -t.seconds)[:15]
    out += ["## The 15 slowest tests (set-up + call + tear-down)",
            table([(t.nodeid, f"{t.seconds:.1f}") for t in slowest], ("test", "s")), ""]
    workers = sorted({t.worker for t in tests if t.worker})
    if workers:
        out.append("busy per worker: " + ", ".join(
            f"{w} {minutes(sum(t.seconds for t in tests if t.worker == w))}" for w in workers))
    out.append(f"tests: {len(tests)}; test time {minutes(busy)}; pytest wall {minutes(wall)}")
    if ci_phases:
        out.append(f"total: {minutes(sum(s for _, s in ci_phases))}")
    return "\n".join(out)


def built_twice(tests: list[Test]) -> list[tuple[str, str, str]]:
    """(variant, key, the tests) of every build whose cache key was built ("built", not found
    cached) in more than one dist during the run."""
    where: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for test in tests:
        for build in test.builds:
            if build.get("status") == "built" and build.get("key"):
                where[(str(build["variant"]), str(build["key"]))].setdefault(str(build["dist"]), test.nodeid)
    return [(variant, key[:12], ", ".join(sorted(set(dists.values()))))
            for (variant, key), dists in sorted(where.items()) if len(dists) > 1]


def read_ci_phases(path: Path) -> list[tuple[str, float]]:
    phases = []
    for line in path.read_text().splitlines():
        name, _, seconds = line.rpartition(" ")
        if name:
            phases.append((name, float(seconds)))
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("times", nargs="?", type=Path, default=TEST_CACHE / "test-times.json",
                        help="what tests/timing_plugin.py wrote (default: %(default)s)")
    parser.add_argument("--junit", type=Path, help="read pytest's --junitxml file instead")
    parser.add_argument("--ci-phases", type=Path, help="the `name seconds` lines .ci/run wrote")
    parser.add_argument("--top", type=int, default=25, help="modules to list (default: %(default)s)")
    args = parser.parse_args(argv)
    source = args.junit or args.times
    try:
        ci_phases = read_ci_phases(args.ci_phases) if args.ci_phases else []
    except (OSError, ValueError) as exc:
        print(f"ci_time: cannot read {args.ci_phases}: {exc}", file=sys.stderr)
        return 2
    if ci_phases and not source.exists():  # the run ended before the tests did: its phases still count
        print(report([], 0.0, ci_phases, args.top))
        print(f"no test times: {source} was not written (pytest did not run to its end)")
        return 0
    try:
        tests, wall = from_junit(source) if args.junit else from_times(json.loads(source.read_text()))
    except (OSError, ValueError, KeyError, TypeError, ElementTree.ParseError) as exc:
        print(f"ci_time: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    print(report(tests, wall, ci_phases, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
