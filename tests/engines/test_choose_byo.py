"""abi3 for a bring-your-own project (one that builds abi3 itself): planned by the docker engine like
any matrix, and the host engine's one variant is abi3 when the matrix asks for it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.engines.choose import EngineRequest, choose_engine, host_abi3
from wheelfactory.engines.host_probe import HostEnvironment
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.matrix import Matrix

HOST = HostEnvironment(python="3.11", executable="/opt/py/bin/python", arch="x86_64", torch="2.13.0+cpu",
                       cuda=None, hip=None, cxx11_abi=True)


def matrix_text(python: str) -> str:
    return f'[project]\npath = "tests/fixtures/byo_abi3"\nimport_name = "abi3_ext"\n' \
           f'[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = {python}\n'


@pytest.fixture
def request_for(parse: Callable[[str], Matrix], table: CompatTable, tmp_path: Path) -> Callable[..., EngineRequest]:
    def make(python: str, **changes: object) -> EngineRequest:
        fields: dict[str, object] = {"matrix": parse(matrix_text(python)), "table": table, "out": tmp_path / "dist",
                                     "python": HOST.executable, "generated_packaging": False, **changes}
        return EngineRequest(**fields)  # type: ignore[arg-type]
    return make


@pytest.mark.parametrize("python, generated, abi3", [
    ('["abi3"]', False, True),
    ('["3.11"]', False, False),
    ('["abi3", "3.11"]', False, False),  # the host's own Python is listed: build for it
    ('["abi3", "3.12"]', False, True),
    ('["3.11"]', True, True),  # a factory-native project is always abi3
])
def test_host_abi3(request_for: Callable[..., EngineRequest], python: str, generated: bool, abi3: bool) -> None:
    assert host_abi3(request_for(python, generated_packaging=generated), HOST) is abi3


def test_the_host_builds_a_byo_abi3_variant(request_for: Callable[..., EngineRequest]) -> None:
    chosen = choose_engine(request_for('["abi3"]', choice="host"), probe_host=lambda _: HOST)
    assert [v.id for v in chosen.variants] == ["torch213-cxx11-cpu-x86_64-linux"]
    chosen = choose_engine(request_for('["3.11"]', choice="host"), probe_host=lambda _: HOST)
    assert [v.id for v in chosen.variants] == ["torch213-cxx11-cpu-x86_64-linux-cp311"]


def test_docker_plans_byo_abi3_variants(request_for: Callable[..., EngineRequest]) -> None:
    chosen = choose_engine(request_for('["abi3"]', choice="docker"), connect=lambda: object())
    assert [v.id for v in chosen.variants] == ["torch213-cxx11-cpu-x86_64-linux"]
    assert chosen.variants[0].key.python == "abi3"
