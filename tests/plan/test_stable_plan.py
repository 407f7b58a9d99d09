"""[matrix] stable_abi: the planner collapses torch >= target into one variant per backend and arch."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.plan.expand import Plan
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.project.native import plan_stage

MATRIX = '[matrix]\ntorch = ["2.6", "2.12", "2.13", "2.14"]\nbackends = ["cpu", "cu130"]\nstable_abi = "2.10"\n'


def test_collapse(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(MATRIX)
    ids = [v.id for v in plan.variants]
    assert ids == ["torch26-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux",
                   "torch-stable-abi210-cpu-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux"]
    stable = plan.variants[2]
    assert stable.torch_version == "2.12.1"  # built against the oldest release it replaces
    assert stable.local_version == "cputorch2.10stableabi" and stable.key.stable_abi
    served = [p for p in plan.pruned if "served by the stable-ABI variant" in p.reason]
    assert {(p.torch, p.backend) for p in served} == {(t, b) for t in ("2.12", "2.13", "2.14") for b in ("cpu", "cu130")}


@pytest.mark.parametrize("value, message", [
    ('"2.9"', "is not a torch release the stable ABI can target"),
    ('"latest"', "is not a torch release the stable ABI can target"),
    ('"2.99"', "torch 2.99 is not in the compatibility table"),
    ("true", "must be a string"),
])
def test_bad_targets(parse: Callable[[str], object], value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(f"[matrix]\nstable_abi = {value}\n")


def test_stable_stage_compiles_the_stable_sources_for_the_target(plan_of: Callable[[str], Plan]) -> None:
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    by_id = {v.id: v for v in plan_of(MATRIX).variants}
    stage = plan_stage(kernel, by_id["torch-stable-abi210-cpu-x86_64-linux"])
    assert "csrc/stable/ops.cpp" in stage.setup_py and "csrc/cpu/activation.cpp" not in stage.setup_py
    assert "('TORCH_TARGET_VERSION', '0x020a000000000000')" in stage.setup_py
    assert str(stage.record.torch) == "2.10" and stage.record.built_with_torch == "2.12.1"
    assert stage.jit_spec["sources"] == {"cpu": [str(p) for p in kernel.sources_for("cpu")]}  # JIT: the ATen build
    with pytest.raises(ConfigError, match="declares none"):  # fusedops has no stable CUDA sources (yet)
        plan_stage(kernel, by_id["torch-stable-abi210-cu130-x86_64-linux"])


@pytest.mark.parametrize(("torch", "verify_on", "gate"), [
    ('["2.10", "2.12", "2.13", "2.15"]', None, ["2.13.0", "2.15.0"]),  # the middle and the newest besides the oldest
    ('["2.13", "2.15"]', None, ["2.15.0"]),
    ('["2.10", "2.12", "2.15"]', '["2.12", "latest"]', ["2.12.1", "2.15.0"]),
    ('["2.10", "2.12", "2.15"]', '["2.10"]', []),  # the build's own torch only
])
def test_the_gate_is_the_oldest_middle_and_newest_or_verify_on(plan_of: Callable[[str], Plan], torch: str,
                                                                 verify_on: str | None, gate: list[str]) -> None:
    text = f'[matrix]\ntorch = {torch}\nbackends = ["cpu"]\nstable_abi = "2.10"\n'
    if verify_on:
        text += f"[stable_abi]\nverify_on = {verify_on}\n"
    (variant,) = plan_of(text).variants
    assert [g.torch_version for g in variant.gate] == gate
    assert variant.as_dict()["verify_on"] == ([variant.torch_version, *gate] if gate else [])


def test_verify_on_a_release_the_variant_does_not_serve_is_a_config_error(plan_of: Callable[[str], Plan]) -> None:
    with pytest.raises(ConfigError, match=r"stable_abi.verify_on: names torch 2.11, which the stable-ABI variant"):
        plan_of('[matrix]\ntorch = ["2.10", "2.12"]\nbackends = ["cpu"]\nstable_abi = "2.10"\n'
                '[stable_abi]\nverify_on = ["2.11"]\n')
