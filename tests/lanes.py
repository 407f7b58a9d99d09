"""How the suite is spread over pytest-xdist workers (a pytest plugin, loaded by tests/conftest.py).

A *group* is a chain of tests one worker runs in order: a Docker lane (``LANES``, modules that
share images, torches and prepared environments, and free them when done), a slow module (its
module and session fixtures made once), or a single fast test (to whichever worker is free). The
groups go out in the order collection gives them (``schedule``): the lanes first, the longest
first, then the slow modules, then the fast tests, so that both workers start on the longest
chains and the short ones fill the gaps.

Each worker computes the groups while collecting (markers are only there) and writes them to a
file the controller named (``pytest_configure_node``); the controller's scheduler reads it when
it first splits the collection. (pytest-xdist's own ``--dist loadgroup`` marks a group by
rewriting a test's node id, which pytest 9.2 no longer lets a plugin do: every test went to any
worker.) Without xdist, or with ``-n0``, the same order runs in one process.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

LANES = ("docker-sample", "docker-projects")  # the longest first: it starts first
DEFAULT_DOCKER_LANE = "docker-sample"  # a module marked docker without a lane marker
DOCKER_TIER = "docker"
GROUPS_KEY = "wheelfactory_groups"  # the file, in each worker's workerinput


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"lane(name): the Docker lane a module runs in (one of {', '.join(LANES)}; "
                                       f"a docker-marked module without one: {DEFAULT_DOCKER_LANE})")
    if not hasattr(config, "workerinput"):
        config.stash[_GROUPS_FILE] = Path(tempfile.mkdtemp(prefix="wheelfactory-lanes-")) / "groups.json"


_GROUPS_FILE = pytest.StashKey[Path]()


def lane_of(item: pytest.Item) -> str:
    """The group ``item`` runs in when it runs in a chain: its lane, else its module."""
    marker = item.get_closest_marker("lane")
    if marker is not None:
        name = str(marker.args[0])
        if name not in LANES:
            raise pytest.UsageError(f"{item.nodeid}: lane {name!r} is not one of {', '.join(LANES)}")
        return name
    if DOCKER_TIER in item.keywords:  # the tier is the marker, whatever folder the module is in
        return DEFAULT_DOCKER_LANE
    return item.nodeid.split("::")[0]


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> group, for the tests that run in a chain (a lane or a slow module)."""
    slow = {lane_of(item) for item in items if "slow" in item.keywords}
    return {item.nodeid: lane_of(item) for item in items if lane_of(item) in slow or lane_of(item) in LANES}


def schedule(items: list[pytest.Item]) -> list[pytest.Item]:
    """The lanes (each in its own order, its `last` tests at its end), then the slow modules, then
    the rest; stable otherwise (a conftest's order within a tier stays)."""
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


@pytest.hookimpl(trylast=True)  # after the other plugins' own reordering (tests/docker_tier.py)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = schedule(items)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and GROUPS_KEY in workerinput:
        target = Path(workerinput[GROUPS_KEY])
        staged = target.with_name(f".{target.name}.{os.getpid()}")
        staged.write_text(json.dumps(groups(items)))
        os.replace(staged, target)  # every worker writes the same map: the last rename wins whole


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[GROUPS_KEY] = str(node.config.stash[_GROUPS_FILE])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling:
    return LaneScheduling(config, log)


class LaneScheduling(LoadScopeScheduling):
    """Whole groups to a worker, in collection order (--no-loadscope-reorder keeps it)."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._file = config.stash[_GROUPS_FILE]
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # read once every worker has collected: when scheduling starts
            self._groups = json.loads(self._file.read_text()) if self._file.is_file() else {}
        return self._groups.get(nodeid, nodeid)
