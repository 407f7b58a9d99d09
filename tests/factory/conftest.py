from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from factory.compat import CompatTable, load_table
from factory.matrix import Matrix, parse_matrix
from factory.plan import Plan, expand
from factory.tomlsource import TomlDocument

REPO = Path(__file__).resolve().parents[2]


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
