"""Options shared by every test tier. Opt-in tiers are declared here, at the root, so their
flags work from any command line (pytest reads options only from conftests it loads first)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.testkit import REPO
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.expand import Plan, expand
from wheelfactory.plan.matrix import Matrix, parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument

# Where the run's time goes, per test, fixture and build phase (benchmarks/ci_time.py reads it), and
# how the tests are spread over the pytest-xdist workers (the Docker lanes).
pytest_plugins = ("tests.timing_plugin", "tests.lanes", "tests.docker_tier")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-cuda-compile", action="store_true", default=False,
                     help="compile the fusedops .cu sources with nvcc (object files only; minutes)")
    parser.addoption("--run-emulated", action="store_true", default=False,
                     help="build aarch64 variants in Docker under QEMU user emulation (tests/docker/"
                          "test_docker_aarch64.py; ~30 min here)")
    parser.addoption("--run-release-gate", action="store_true", default=False,
                     help="the stable-ABI gate over torch 2.10, 2.12 and the newest (tests/docker/"
                          "test_docker_newest_torch.py; two CUDA torches of ~3 GB each to download)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda_compile: compiles CUDA sources with nvcc; needs --run-cuda-compile")
    config.addinivalue_line("markers", "emulated: builds another arch under QEMU user emulation; needs --run-emulated")
    config.addinivalue_line("markers", "release_gate: the stable-ABI gate over three torch releases; needs "
                                       "--run-release-gate")
    config.addinivalue_line("markers", "last: runs after every other test of its lane (.ci/run makes the arm64 base "
                                       "it needs in the background meanwhile)")


# marker -> (its option, the skip reason without it)
OPT_IN_TIERS = {"cuda_compile": ("--run-cuda-compile", "CUDA compile tier: pass --run-cuda-compile"),
                "emulated": ("--run-emulated", "aarch64 emulation tier: pass --run-emulated"),
                "release_gate": ("--run-release-gate", "the three-release stable-ABI gate: pass --run-release-gate")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
