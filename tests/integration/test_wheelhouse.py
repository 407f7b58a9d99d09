"""The wheelhouse with real pip downloads (PyPI and this machine's local wheels)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.engines.wheelhouse import ContainerPython, Wheelhouse, request_for
from wheelfactory.errors import WheelhouseError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument


def variant(torch: str) -> Variant:
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text(f'[matrix]\ntorch = ["{torch}"]\n', "m.toml"), table,
                          base_dir=REPO)
    return next(v for v in expand(matrix, table).variants if v.key.cxx11_abi)


def test_request_is_pure_and_keyed() -> None:
    v = variant("2.13")
    torch_index = "http://127.0.0.1:8080/whl/cpu"  # what Indexes.torch_url gives for pytorch/cpu
    request = request_for(v, ContainerPython(), torch_index=torch_index)
    assert request.requirements[0] == "torch==2.13.0" and "build" in request.requirements
    assert request.extra_index_urls == (torch_index,)  # beside the host's pip index, never instead of it
    assert request.key == request_for(v, ContainerPython(), torch_index=torch_index).key
    assert request.key != request_for(v, ContainerPython(version="3.12"), torch_index=torch_index).key
    host = request_for(v, ContainerPython())  # "pypi": the index pip is configured with on the host
    assert host.extra_index_urls == () and host.key != request.key


def test_platforms_newest_first() -> None:
    tags = ContainerPython(glibc="2.31").platforms()
    assert tags[0] == "manylinux_2_31_x86_64" and "manylinux_2_17_x86_64" in tags
    assert tags[-2:] == ("manylinux2014_x86_64", "linux_x86_64")
    # an aarch64 variant's wheels are chosen for aarch64 (NVIDIA's are manylinux_2_27_aarch64)
    arm = ContainerPython(arch="aarch64", glibc="2.36").platforms()
    assert "manylinux_2_27_aarch64" in arm and all(tag.endswith("_aarch64") for tag in arm)


def test_download_once_then_reuse(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "wh")
    request = request_for(variant("2.13"), ContainerPython())  # the host's pip configuration
    first = house.ensure(request, log=tmp_path / "wh.log", python=sys.executable)
    names = [name for name, _ in first.wheels]
    assert first.downloaded
    assert any(n.startswith("torch-2.13.0") and "cp311" in n for n in names)
    assert any(n.startswith("ninja-") for n in names) and any(n.startswith("auditwheel-") for n in names)
    assert all(len(sha) == 64 for _, sha in first.wheels)
    again = house.ensure(request, python=sys.executable)
    assert not again.downloaded and again.path == first.path and again.wheels == first.wheels
    # The set links the shared store: no second copy of torch on disk.
    torch_name = next(n for n in names if n.startswith("torch-"))
    assert (first.path / torch_name).stat().st_ino == (house.store / torch_name).stat().st_ino
    # A set with a file missing is not complete: it is made again.
    (first.path / torch_name).unlink()
    repaired = house.ensure(request, python=sys.executable)
    assert repaired.downloaded and (repaired.path / torch_name).is_file()


def test_failed_download_publishes_nothing(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "wh")
    request = request_for(variant("2.13"), ContainerPython(),
                          extra=("wheelfactory-no-such-package-xyz==1.0",))
    with pytest.raises(WheelhouseError, match="failed"):
        house.ensure(request, python=sys.executable)
    assert not (house.sets / request.key).exists()
    assert not house.sets.exists() or not any(house.sets.iterdir())


@pytest.mark.parametrize("where", ["PIP_CONSTRAINT", "a pip configuration file"])
def test_the_hosts_constraints_do_not_decide_a_variants_wheel_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 where: str) -> None:
    """A constraints file capping torch below a variant's release (as this machine's pip
    configuration once did: torch<=2.14.1) is about the host's environment: the container's
    wheel set still gets the variant's torch, from the host's indexes."""
    from wheelfactory.engines.pip_config import download_environment

    cap = tmp_path / "constraints.txt"
    cap.write_text("torch<=2.12\n")
    if where == "PIP_CONSTRAINT":
        monkeypatch.setenv("PIP_CONSTRAINT", str(cap))
    else:
        config = tmp_path / "pip.conf"
        config.write_text(f"[global]\nconstraint = {cap}\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    download_environment.cache_clear()
    try:
        house = Wheelhouse(tmp_path / "wh")
        found = house.ensure(request_for(variant("2.13"), ContainerPython()), python=sys.executable)
    finally:
        download_environment.cache_clear()
    assert any(name.startswith("torch-2.13.0") for name, _ in found.wheels)
