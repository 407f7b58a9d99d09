from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory._runtime._fit import same_cuda_group
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.identity import Backend

BUNDLED = REPO / "factory" / "wheelfactory" / "data" / "compat.toml"


def cuda_compatible(table: CompatTable, system: str, torch_cuda: str) -> bool:
    """The runtime's rule (``_fit.same_cuda_group``) over the table's CUDA minor-version groups."""
    return same_cuda_group((group for _, group in table.cuda_groups), system, torch_cuda)


def test_bundled_table_covers_2_4_to_2_15() -> None:
    table = load_table()
    assert [r.minor for r in table.releases] == [f"2.{m}" for m in range(4, 16)]
    for release in table.releases:
        assert release.source, f"torch {release.minor} has no source"
        assert release.build_version.startswith(release.minor + ".")


def test_abi_facts() -> None:
    table = load_table()
    r26 = table.release("2.6")
    assert r26 is not None
    assert r26.has_build(Backend("cuda", "12.4"), False) and not r26.has_build(Backend("cuda", "12.4"), True)
    assert r26.has_build(Backend("cuda", "12.6"), True) and not r26.has_build(Backend("cuda", "12.6"), False)
    assert not r26.pypi_cxx11_abi
    r27 = table.release("2.7")
    assert r27 is not None and r27.cxx98 is None and r27.pypi_cxx11_abi


def test_indexes() -> None:
    table = load_table()
    r26 = table.release("2.6")
    assert r26 is not None
    # By alias (plan/indexes.py resolves them from the user's configuration), never a host name.
    assert str(table.torch_index(r26, Backend("cuda", "12.4"), False)) == "pypi"
    assert str(table.torch_index(r26, Backend("cuda", "11.8"), False)) == "pytorch/cu118"
    assert str(table.torch_index(r26, Backend("cpu"), True)) == "pytorch/cpu-cxx11-abi"
    assert table.torch_index_path(r26, Backend("cuda", "12.4"), False) == "cu124"  # PyPI's build too


def test_cuda_arch_lists_and_groups() -> None:
    table = load_table()
    assert table.cuda_toolkit("13.0").arch_list[-1] == "12.0+PTX"
    assert "7.0" not in table.cuda_toolkit("13.0").arch_list  # CUDA 13 dropped sm_70
    assert not table.cuda_toolkit("12.4").can_compile("12.0")
    assert table.cuda_toolkit("12.8").can_compile("12.0")
    assert cuda_compatible(table, "12.4", "12.6") and cuda_compatible(table, "12.9", "12.1")
    assert not cuda_compatible(table, "11.8", "12.1")
    assert not cuda_compatible(table, "12.7", "12.6")  # there is no 12.7


def test_adding_a_release_is_one_table(tmp_path: Path) -> None:
    text = BUNDLED.read_text() + """
[torch."2.16"]
build_version = "2.16.0"
python = ["3.10", "3.11", "3.12", "3.13", "3.14"]
cuda = ["13.0", "13.2"]
rocm = ["7.2"]
pypi_default = "cu130"
wheel_platform = "manylinux_2_28"
aarch64 = ["cpu"]
abi.cxx11 = { builds = "all" }
source = "test"
"""
    path = tmp_path / "compat.toml"
    path.write_text(text)
    table = load_table(path)
    assert table.releases[-1].minor == "2.16"


@pytest.mark.parametrize("snippet, message", [
    ('[torch."2.16"]\nbuild_version = "2.16.0"\ncuda = ["12.7"]\npypi_default = "cpu"\n'
     'abi.cxx11 = { builds = "all" }\n', 'CUDA 12.7 has no [cuda."12.7"] entry'),
    ('[torch."2.16"]\nbuild_version = "2.16.0"\npypi_default = "cu130"\nabi.cxx11 = { builds = "all" }\n',
     "'cu130' is not one of its builds"),
    ('[torch."2.16"]\nbuild_version = "2.17.0"\nabi.cxx11 = { builds = "all" }\n', "must be a 2.16.x release"),
    ('[torch."2.16"]\nbuild_version = "2.16.0"\nbuild_versoin = "x"\n', "did you mean 'build_version'"),
    ('[torch."2.16"]\nbuild_version = "2.16.0"\n', "names no ABI"),
    ('[torch."2.16"]\nbuild_version = "2.16.0"\naarch64 = ["cpu"]\npypi_aarch64 = "cu130"\n'
     'abi.cxx11 = { builds = "all" }\n', "'cu130' is not one of its aarch64 builds (cpu)"),
])
def test_table_errors_name_file_and_key(tmp_path: Path, snippet: str, message: str) -> None:
    path = tmp_path / "compat.toml"
    path.write_text(BUNDLED.read_text() + "\n" + snippet)
    with pytest.raises(ConfigError) as info:
        load_table(path)
    assert message in str(info.value)
    assert f'{path}:' in str(info.value) and 'torch."2.16"' in str(info.value)
    assert info.value.line is not None and info.value.line > len(BUNDLED.read_text().splitlines())
