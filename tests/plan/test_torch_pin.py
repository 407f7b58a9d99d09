"""[build] torch_requirement and the Requires-Dist on torch it gives each variant's wheel (plan/torch_pin.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from tests.testkit import docs_text, markdown_section
from wheelfactory.errors import ConfigError
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.torch_pin import TORCH_REQUIREMENTS, torch_requires_dist

MATRIX = '[matrix]\ntorch = ["2.6", "2.9", "2.12", "2.13"]\nbackends = ["cpu", "cu130"]\n'


def by_id(plan: Plan) -> dict[str, Variant]:
    return {v.id: v for v in plan.variants}


def test_a_per_torch_wheel_pins_its_release_line(plan_of: Callable[[str], Plan]) -> None:
    variants = by_id(plan_of(MATRIX))
    assert torch_requires_dist(variants["torch213-cxx11-cpu-x86_64-linux"]) == "torch>=2.13,<2.14"
    assert torch_requires_dist(variants["torch213-cxx11-cu130-x86_64-linux"]) == "torch>=2.13,<2.14"
    assert torch_requires_dist(variants["torch26-cxx98-cpu-x86_64-linux"]) == "torch>=2.6,<2.7"
    assert torch_requires_dist(variants["torch29-cxx11-cpu-x86_64-linux"]) == "torch>=2.9,<2.10"  # not <2.1


def test_the_pin_admits_every_build_of_the_line_and_no_other_release() -> None:
    pin = Requirement("torch>=2.13,<2.14").specifier
    for admitted in ("2.13.0", "2.13.0+cpu", "2.13.1+cu130", "2.13.2"):
        assert pin.contains(admitted), admitted  # the installer's default: pre-releases off
    for refused in ("2.12.1", "2.14.0", "2.14.0rc1", "2.14.0.dev20260901", "2.14.0a0+git1234", "2.13.0rc2",
                    "2.15.0"):
        assert not pin.contains(refused), refused
    assert not pin.contains("2.14.0rc1", prereleases=True)  # even a resolver that allows pre-releases


def test_a_stable_abi_wheel_requires_its_target_and_newer(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.12", "2.13", "2.14"]\nbackends = ["cpu"]\nstable_abi = "2.10"\n')
    stable = by_id(plan)["torch-stable-abi210-cpu-x86_64-linux"]
    assert stable.torch_version == "2.12.1"  # built against 2.12, serves every torch from the target on
    assert torch_requires_dist(stable) == "torch>=2.10"
    spec = Requirement(torch_requires_dist(stable)).specifier
    assert spec.contains("2.10.0") and spec.contains("2.15.0+cpu") and not spec.contains("2.9.1")


def test_unpinned_is_plain_torch(plan_of: Callable[[str], Plan]) -> None:
    for variant in plan_of(MATRIX + 'stable_abi = "2.10"\n').variants:
        assert torch_requires_dist(variant, "unpinned") == "torch"


def test_matrix_setting_defaults_to_pinned(parse: Callable[[str], Matrix]) -> None:
    assert TORCH_REQUIREMENTS == ("pinned", "unpinned")
    assert parse("").build.torch_requirement == "pinned"
    assert parse('[build]\ntorch_requirement = "unpinned"\n').build.torch_requirement == "unpinned"
    assert parse('[build]\ntorch_requirement = "pinned"\n').build.torch_requirement == "pinned"


@pytest.mark.parametrize("value, expected", [
    ('"pined"', ("matrix.toml:2: build.torch_requirement: must be 'pinned' or 'unpinned', not 'pined'; "
                 "did you mean 'pinned'?")),
    ('"exact"', "build.torch_requirement: must be 'pinned' or 'unpinned', not 'exact'"),
    ("true", "build.torch_requirement: must be a string"),
])
def test_bad_values_are_one_line_naming_the_key(parse: Callable[[str], Matrix], value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(f"[build]\ntorch_requirement = {value}\n")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_readme_documents_the_key_with_its_values_and_default() -> None:
    build_table = markdown_section(docs_text("reference/matrix.md"), "## [build]")
    row = next(line for line in build_table.splitlines() if line.startswith("| `torch_requirement` |"))
    assert all(f'`"{value}"`' in row for value in TORCH_REQUIREMENTS) and row.endswith('| `"pinned"` |')
    assert "`torch>=2.13,<2.14`" in row and "`torch>=2.10`" in row
    assert Version("2.13.0+cpu") in Requirement("torch>=2.13,<2.14").specifier  # the page's example
