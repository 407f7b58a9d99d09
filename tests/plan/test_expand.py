from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.plan.expand import Plan, parse_shard

ISSUE_MATRIX = """
[matrix]
torch = [">=2.5,<2.8"]
backends = ["cpu", "cuda"]
cxx11_abi = "both"
"""


def ids(plan: Plan) -> set[str]:
    return {v.id for v in plan.variants}


def test_issue_acceptance_matrix(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(ISSUE_MATRIX)
    found = ids(plan)
    assert not any(i.startswith("torch27-cxx98") for i in found)
    assert {"torch25-cxx98-cu124-x86_64-linux", "torch26-cxx98-cu124-x86_64-linux",
            "torch27-cxx11-cu128-x86_64-linux"} <= found
    assert "torch26-cxx11-cu126-x86_64-linux" in found and "torch26-cxx98-cu126-x86_64-linux" not in found
    assert plan.pruned and all(p.reason for p in plan.pruned)
    reasons = {(p.torch, p.backend, p.cxx11_abi): p.reason for p in plan.pruned}
    assert reasons[("2.7", "cpu", False)].startswith("torch 2.7 ships no pre-cxx11 wheels")
    assert "exists only with the pre-cxx11 ABI" in reasons[("2.6", "cu124", True)]


def test_variant_facts(plan_of: Callable[[str], Plan]) -> None:
    by_id = {v.id: v for v in plan_of(ISSUE_MATRIX).variants}
    v = by_id["torch26-cxx98-cu124-x86_64-linux"]
    assert v.local_version == "cu124torch2.6cxx98"
    assert v.torch_requirement == "torch==2.6.0"
    assert v.torch_on_pypi and str(v.torch_index) == "pypi"
    assert v.arch_list == ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")
    cu128 = by_id["torch27-cxx11-cu128-x86_64-linux"]
    assert "12.0" in cu128.arch_list and str(cu128.torch_index) == "pytorch/cu128"


def test_pinned_backend_missing_from_a_release_is_pruned(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.6", "2.13"]\nbackends = ["cu130"]\n')
    assert ids(plan) == {"torch213-cxx11-cu130-x86_64-linux"}
    assert any(p.torch == "2.6" and p.reason.startswith("CUDA 13.0 has no torch 2.6 build") for p in plan.pruned)


def test_rocm_pin_matches_patch_release(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.6"]\nbackends = ["rocm6.2"]\ncxx11_abi = false\n')
    (variant,) = plan.variants
    assert variant.id == "torch26-cxx98-rocm62-x86_64-linux" and variant.toolkit == "6.2.4"
    assert "gfx90a" in variant.arch_list


def test_toolkit_filter_and_arch_override(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of("""
[matrix]
torch = ["2.6", "2.7"]
backends = ["cuda"]
[cuda]
toolkits = [">=12.4"]
arch_list = "8.0;9.0;12.0+PTX"
""")
    by_id = {v.id: v for v in plan.variants}
    assert "torch26-cxx98-cu118-x86_64-linux" not in by_id
    assert any("not selected by [cuda].toolkits" in p.reason for p in plan.pruned)
    assert by_id["torch27-cxx11-cu128-x86_64-linux"].arch_list == ("8.0", "9.0", "12.0+PTX")
    cu124 = by_id["torch26-cxx98-cu124-x86_64-linux"]
    assert cu124.arch_list == ("8.0", "9.0") and "dropped 12.0+PTX" in cu124.notes[0]


def test_toolkits_default_keeps_pypi_builds(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = [">=2.9"]\nbackends = ["cuda"]\n[cuda]\ntoolkits = "default"\n')
    assert {v.backend.build_name for v in plan.variants} == {"cu128", "cu130", "cu132"}
    assert all(v.torch_on_pypi for v in plan.variants)


def test_python_and_arch_pruning(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.8", "2.9"]\nbackends = ["cpu", "cu128"]\npython = ["3.9"]\n'
                   'arch = ["x86_64", "aarch64"]\n')
    assert "torch28-cxx11-cpu-aarch64-linux-cp39" in ids(plan)
    assert not any(i.startswith("torch29") for i in ids(plan))
    assert any("torch 2.9 ships no wheels for Python 3.9" in p.reason for p in plan.pruned)


def test_exclude_and_include(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of("""
[matrix]
torch = ["2.6", "2.13"]
backends = ["cpu", "cuda"]

[[exclude]]
backend = "cu118"

[[exclude]]
torch = "2.13"
backend = "cuda"

[[include]]
torch = "2.13"
backend = "cu130"
extra_cflags = ["-DFAST"]

[[include]]
torch = "2.6"
backend = "cpu"
cxx11_abi = false
env = { FOO = "1" }
""")
    by_id = {v.id: v for v in plan.variants}
    assert "torch26-cxx98-cu118-x86_64-linux" not in by_id
    assert "torch213-cxx11-cu126-x86_64-linux" not in by_id
    assert by_id["torch213-cxx11-cu130-x86_64-linux"].settings.extra_cflags == ("-DFAST",)
    assert dict(by_id["torch26-cxx98-cpu-x86_64-linux"].settings.env) == {"FOO": "1"}
    excluded = [p for p in plan.pruned if p.reason.startswith("excluded by [[exclude]] #1 (matrix.toml:6)")]
    assert excluded


def test_include_of_impossible_combination_is_an_error(plan_of: Callable[[str], Plan]) -> None:
    with pytest.raises(ConfigError, match=r"\[\[include\]\] #1 .*ships no pre-cxx11 wheels"):
        plan_of('[[include]]\ntorch = "2.13"\nbackend = "cpu"\ncxx11_abi = false\n')
    with pytest.raises(ConfigError, match="torch 2.13 has no cu124 build"):
        plan_of('[[include]]\ntorch = "2.13"\nbackend = "cu124"\n')


def test_torch_patch_pin(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.5.0"]\ncxx11_abi = false\n')
    assert [v.torch_version for v in plan.variants] == ["2.5.0"]


def test_plan_is_deterministic_and_sorted(plan_of: Callable[[str], Plan]) -> None:
    first = plan_of(ISSUE_MATRIX)
    assert first == plan_of(ISSUE_MATRIX)
    torches = [v.key.torch for v in first.variants]
    assert torches == sorted(torches, key=lambda t: tuple(int(x) for x in t.split(".")))


@pytest.mark.parametrize("count", [1, 2, 3, 5, 40])
def test_shards_are_disjoint_and_cover_the_plan(plan_of: Callable[[str], Plan], count: int) -> None:
    plan = plan_of(ISSUE_MATRIX)
    shards = [ids(plan.shard(i, count)) for i in range(1, count + 1)]
    assert set().union(*shards) == ids(plan)
    assert sum(len(s) for s in shards) == len(plan.variants)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("text", ["3/2", "0/3", "1/0", "a/b", "1", "1/2/3", "-1/2"])
def test_bad_shards(text: str) -> None:
    with pytest.raises(UsageError, match="shard"):
        parse_shard(text)


def test_json_contract(plan_of: Callable[[str], Plan]) -> None:
    data = json.loads(json.dumps(plan_of(ISSUE_MATRIX).as_dict()))
    assert set(data) == {"variants", "pruned"}
    for v in data["variants"]:
        assert {"id", "torch", "backend", "toolkit", "cxx11_abi", "python", "arch", "local_version"} <= set(v)
    assert data["pruned"] and all(p["reason"] for p in data["pruned"])
