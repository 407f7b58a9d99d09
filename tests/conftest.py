"""Options shared by every test tier. Opt-in tiers are declared here, at the root, so their
flags work from any command line (pytest reads options only from conftests it loads first)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testkit import REPO
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.expand import Plan, expand
from wheelfactory.plan.matrix import Matrix, parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument

# Where the run's time goes, per test, fixture and build phase (benchmarks/ci_time.py reads it).
pytest_plugins = ("timing_plugin",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-cuda-compile", action="store_true", default=False,
                     help="compile the fusedops .cu sources with nvcc (object files only; minutes)")
    parser.addoption("--run-emulated", action="store_true", default=False,
                     help="build aarch64 variants in Docker under QEMU user emulation (tests/docker/"
                          "test_docker_aarch64.py; ~30 min here)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda_compile: compiles CUDA sources with nvcc; needs --run-cuda-compile")
    config.addinivalue_line("markers", "emulated: builds another arch under QEMU user emulation; needs --run-emulated")
    config.addinivalue_line("markers", "last: runs after every other test of its lane (.ci/run makes the arm64 base "
                                       "it needs in the background meanwhile)")
    config.addinivalue_line("markers", f"lane(name): the Docker lane a module or test runs in (one of {', '.join(LANES)}; "
                                       f"tests/docker/ without one: {DEFAULT_DOCKER_LANE})")


# The suite runs in pytest-xdist workers (pyproject.toml's addopts). A lane is a chain of tests one
# worker runs in order: the Docker tier is two lanes whose modules share images, torches and their
# prepared environments within a lane (and free them when done: WHEELFACTORY_TEST_LEAN), the
# longest first; a slow module runs whole on one worker (its module and session fixtures made once),
# then the fast tests go one by one to whichever worker is free. With -n0 the same order runs in
# one process.
LANES = ("docker-sample", "docker-projects")
DEFAULT_DOCKER_LANE = "docker-sample"
DOCKER_TIER = "docker"  # tests/docker/


def lane_of(item: pytest.Item) -> str:
    """The xdist group ``item`` runs in: its lane, else its module."""
    marker = item.get_closest_marker("lane")
    if marker is not None:
        name = str(marker.args[0])
        if name not in LANES:
            raise pytest.UsageError(f"{item.nodeid}: lane {name!r} is not one of {', '.join(LANES)}")
        return name
    if DOCKER_TIER in item.path.relative_to(item.session.path).parts[:2]:
        return DEFAULT_DOCKER_LANE
    return item.nodeid.split("::")[0]


def _schedule(items: list[pytest.Item]) -> list[pytest.Item]:
    """The lanes first (each in its own order, its `last` tests at its end), then the slow modules,
    then the rest; stable otherwise (a conftest's order within a tier stays)."""
    first_seen: dict[str, int] = {}
    slow: set[str] = set()
    for index, item in enumerate(items):
        group = lane_of(item)
        first_seen.setdefault(group, index)
        if "slow" in item.keywords:
            slow.add(group)

    def rank(indexed: tuple[int, pytest.Item]) -> tuple[int, int, bool, int]:
        index, item = indexed
        group = lane_of(item)
        tier = LANES.index(group) if group in LANES else len(LANES) + (group not in slow)
        return tier, first_seen[group], "last" in item.keywords, index

    return [item for _, item in sorted(enumerate(items), key=rank)]


# marker -> (its option, the skip reason without it)
OPT_IN_TIERS = {"cuda_compile": ("--run-cuda-compile", "CUDA compile tier: pass --run-cuda-compile"),
                "emulated": ("--run-emulated", "aarch64 emulation tier: pass --run-emulated")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = _schedule(items)
    slow = {lane_of(item) for item in items if "slow" in item.keywords}
    for item in items:  # read by xdist's loadgroup scheduling (its hook runs after this one)
        if lane_of(item) in slow or lane_of(item) in LANES:  # a fast test goes to whichever worker is free
            item.add_marker(pytest.mark.xdist_group(lane_of(item)))
    for marker, (option, reason) in OPT_IN_TIERS.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)

@pytest.fixture(scope="session")
def table() -> CompatTable:
    return load_table()


@pytest.fixture
def parse(table: CompatTable) -> Callable[[str], Matrix]:
    def run(text: str) -> Matrix:
        return parse_matrix(TomlDocument.from_text(text, "matrix.toml"), table, base_dir=REPO)
    return run


@pytest.fixture
def plan_of(parse: Callable[[str], Matrix], table: CompatTable) -> Callable[[str], Plan]:
    def run(text: str) -> Plan:
        return expand(parse(text), table)
    return run
