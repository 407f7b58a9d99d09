"""choose_engine without Docker or torch: a fake Docker connection and a fake host interpreter."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from wheelfactory.engines.choose import START_ENGINE, EngineRequest, choose_engine
from wheelfactory.engines.host import HostEngine
from wheelfactory.engines.host_probe import HostEnvironment
from wheelfactory.errors import DockerUnavailable, EnvironmentProblem
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.matrix import Matrix

MATRIX = """
[project]
path = "kernels/fusedops"
[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu"]
cxx11_abi = "both"
python = ["abi3"]
arch = ["x86_64"]
"""
HOST = HostEnvironment(python="3.11", executable="/opt/py/bin/python", arch="x86_64", torch="2.13.0+cpu",
                       cuda=None, hip=None, cxx11_abi=True)
OWN = "torch213-cxx11-cpu-x86_64-linux"
NO_ENGINE = "no Docker engine answers at unix:///nowhere.sock"


def no_docker() -> object:
    raise DockerUnavailable(NO_ENGINE)


def host_probe(python: str) -> HostEnvironment:
    return HOST


@pytest.fixture
def request_for(parse: Callable[[str], Matrix], table: CompatTable, tmp_path: Path) -> Callable[..., EngineRequest]:
    def make(**changes: object) -> EngineRequest:
        fields: dict[str, object] = {"matrix": parse(MATRIX), "table": table, "out": tmp_path / "dist",
                                     "python": "/opt/py/bin/python", **changes}
        return EngineRequest(**fields)  # type: ignore[arg-type]
    return make


def test_auto_without_docker_builds_the_hosts_variant_and_lists_the_rest(
        request_for: Callable[..., EngineRequest]) -> None:
    chosen = choose_engine(request_for(), connect=no_docker, probe_host=host_probe)
    assert isinstance(chosen.engine, HostEngine)
    assert [v.id for v in chosen.variants] == [OWN]
    assert sorted(n.variant.id for n in chosen.not_built) == ["torch26-cxx11-cpu-x86_64-linux",
                                                               "torch26-cxx98-cpu-x86_64-linux"]
    for item in chosen.not_built:
        assert NO_ENGINE in item.reason and OWN in item.reason
        assert START_ENGINE in item.action
    assert "not built here" in chosen.summary


def test_auto_without_docker_and_the_hosts_variant_not_selected_builds_nothing(
        request_for: Callable[..., EngineRequest]) -> None:
    chosen = choose_engine(request_for(only=("torch26-cxx98-*",)), connect=no_docker,
                           probe_host=host_probe)
    assert chosen.variants == ()
    assert [n.variant.id for n in chosen.not_built] == ["torch26-cxx98-cpu-x86_64-linux"]


def test_auto_without_docker_or_a_usable_host_lists_everything(request_for: Callable[..., EngineRequest]) -> None:
    def no_torch(python: str) -> HostEnvironment:
        raise EnvironmentProblem(f"{python} has no torch installed")

    chosen = choose_engine(request_for(), connect=no_docker, probe_host=no_torch)
    assert chosen.engine is None and chosen.variants == ()
    assert len(chosen.not_built) == 3
    assert all("has no torch installed" in n.reason and NO_ENGINE in n.reason for n in chosen.not_built)


def test_docker_asked_for_by_name_stays_an_error(request_for: Callable[..., EngineRequest]) -> None:
    with pytest.raises(DockerUnavailable, match="no Docker engine answers"):
        choose_engine(request_for(choice="docker"), connect=no_docker, probe_host=host_probe)


def test_host_by_name_never_asks_docker(request_for: Callable[..., EngineRequest]) -> None:
    def fail() -> object:
        raise AssertionError("--engine host must not connect to Docker")

    chosen = choose_engine(request_for(choice="host"), connect=fail, probe_host=host_probe)
    assert [v.id for v in chosen.variants] == [OWN] and chosen.not_built == ()


def test_the_request_is_frozen_and_keyword_only(request_for: Callable[..., EngineRequest]) -> None:
    request = request_for()
    with pytest.raises(AttributeError):
        request.choice = "docker"  # type: ignore[misc]
    with pytest.raises(TypeError):
        EngineRequest(request.matrix, request.table)  # type: ignore[misc]


def test_the_host_probe_runs_through_the_runner_it_is_given() -> None:
    """The host probe's last printed line is its answer; an interpreter without torch is one line."""
    from wheelfactory.engines.host_probe import probe

    facts = {"python": "3.11", "executable": "/opt/py/bin/python", "arch": "x86_64", "site_packages": [],
             "torch": "2.13.0+cpu", "cuda": None, "hip": None, "cxx11_abi": True, "compiler": "/usr/bin/c++",
             "missing_tools": []}
    seen: list[str] = []

    def interpreter(command: Sequence[str], **_: object) -> str:
        seen.append(command[0])
        return "a banner line\n" + json.dumps(facts) + "\n"

    assert probe("/opt/py/bin/python", runner=interpreter) == HOST and seen == ["/opt/py/bin/python"]
    facts["missing_tools"] = ["auditwheel", "patchelf"]
    assert probe("/opt/py/bin/python", runner=interpreter).missing_tools == ("auditwheel", "patchelf")
    facts["compiler"] = None
    with pytest.raises(EnvironmentProblem, match=r"needs a C\+\+ compiler"):
        probe("/opt/py/bin/python", runner=interpreter)
    facts["torch"] = None
    with pytest.raises(EnvironmentProblem, match="has no torch installed"):
        probe("/opt/py/bin/python", runner=interpreter)


def test_a_variant_whose_arch_does_not_run_here_is_not_built_with_the_fix(
        parse: Callable[[str], Matrix], table: CompatTable, tmp_path: Path) -> None:
    """Never built with the host's arch in its place: the aarch64 variants are listed as not built,
    with why (from images/emulation.arch_support) and the command that makes the arch run."""
    from wheelfactory.images.emulation import HOST_ARCH, ArchSupport

    matrix = parse(MATRIX.replace('arch = ["x86_64"]', 'arch = ["x86_64", "aarch64"]'))
    request = EngineRequest(matrix=matrix, table=table, out=tmp_path / "dist", python="/opt/py/bin/python",
                            choice="docker")

    def runs(arch: str) -> ArchSupport:
        if arch == "x86_64":
            return ArchSupport(arch, True, HOST_ARCH)
        return ArchSupport(arch, False, "aarch64 code needs QEMU user emulation and no binfmt_misc handler runs it",
                           "apt-get install -y qemu-user-static binfmt-support")

    chosen = choose_engine(request, connect=lambda: object(), runs_arch=runs)  # type: ignore[arg-type,return-value]
    assert [v.key.arch for v in chosen.variants] == ["x86_64"] * 3
    assert sorted(n.variant.id for n in chosen.not_built) == [
        "torch213-cxx11-cpu-aarch64-linux", "torch26-cxx11-cpu-aarch64-linux", "torch26-cxx98-cpu-aarch64-linux"]
    first = chosen.not_built[0]
    assert first.reason == f"{first.variant.id}: aarch64 code needs QEMU user emulation and no binfmt_misc handler runs it"
    assert first.action == ("as root, run `apt-get install -y qemu-user-static binfmt-support` (or `wheelfactory engine "
                            "start --emulate aarch64`), then rerun this command")
    assert chosen.summary.endswith("3 selected variant(s) not built: their arch does not run here")
