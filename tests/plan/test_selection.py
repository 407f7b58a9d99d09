"""Which variants a build takes: --shard then --only, and what PyPI as the torch index can serve."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.testkit import REPO
from wheelfactory.cli.main import cli
from wheelfactory.engines.torch_builds import pypi_refusal
from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import Plan, select
from wheelfactory.plan.indexes import PYPI

RELEASE_MATRIX = '[matrix]\ntorch = [">=2.6"]\nbackends = ["cpu", "cuda"]\ncxx11_abi = "both"\n'


def test_shard_then_only(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(RELEASE_MATRIX)
    shard = select(plan, (), (2, 4))
    assert shard == plan.shard(2, 4).variants
    cpu = select(plan, ("*-cpu-*",), (2, 4))
    assert cpu and all(v in shard and v.key.backend.kind == "cpu" for v in cpu)
    # Together the shards' CPU picks are exactly the plan's CPU variants.
    every = [v for i in range(1, 5) for v in select(plan, ("*-cpu-*",), (i, 4))]
    assert sorted(v.id for v in every) == sorted(v.id for v in plan.variants if v.key.backend.kind == "cpu")


def test_only_is_checked_against_the_whole_plan(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(RELEASE_MATRIX)
    outside = plan.shard(1, 4).variants[0].id
    assert select(plan, (outside,), (2, 4)) == ()  # in the plan, not in this shard: nothing to build
    with pytest.raises(ConfigError, match=r"--only 'torch99-\*' matches no variant of the plan"):
        select(plan, ("torch99-*",), (2, 4))


def test_the_repo_matrix_is_the_release_matrix() -> None:
    """CPU and CUDA for every supported torch release; README's command builds two of them."""
    result = CliRunner().invoke(cli, ["plan", "-m", str(REPO / "matrix.toml"), "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    ids = {v["id"] for v in json.loads(result.output)["variants"]}
    assert {"torch26-cxx98-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux",
            "torch26-cxx98-cu124-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"} <= ids
    assert len(ids) >= 30


@pytest.mark.parametrize(("variant_id", "refused"), [
    ("torch26-cxx98-cpu-x86_64-linux", False),     # PyPI's 2.6 is cu124 cxx98: CPU ops compile against it
    ("torch26-cxx11-cpu-x86_64-linux", True),      # ... but it is the other ABI
    ("torch26-cxx98-cu124-x86_64-linux", False),   # exactly PyPI's build
    ("torch26-cxx98-cu118-x86_64-linux", True),    # another toolkit's build
    ("torch213-cxx11-cu130-x86_64-linux", False),
    ("torch213-cxx11-cu126-x86_64-linux", True),
    ("torch213-cxx11-cpu-x86_64-linux", False),
])
def test_pypi_serves_one_build_per_release(plan_of: Callable[[str], Plan], table: CompatTable,
                                           variant_id: str, refused: bool) -> None:
    variant = next(v for v in plan_of(RELEASE_MATRIX).variants if v.id == variant_id)
    release = table.release(variant.key.torch)
    assert release is not None
    reason = pypi_refusal(variant, release, PYPI)
    assert (reason is not None) == refused
    if reason:
        assert reason.startswith(variant_id) and "torch_index" in reason
    assert pypi_refusal(variant, release, "pytorch") is None  # PyTorch's per-build indexes serve all
    assert pypi_refusal(variant, release, "http://127.0.0.1:8080/whl") is None  # so does a URL of the user's


def test_build_rejects_a_shard_that_does_not_exist(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["build", "-m", str(REPO / "matrix.toml"), "-o", str(tmp_path),
                                      "--shard", "5/4", "--engine", "host"])
    assert isinstance(result.exception, UsageError) and "shard 5 of 4 does not exist" in str(result.exception)


@pytest.mark.parametrize(("variant_id", "refused"), [
    ("torch29-cxx11-cpu-aarch64-linux", False),     # PyPI's 2.9 for aarch64 is its CPU build
    ("torch29-cxx11-cu128-aarch64-linux", True),    # ... though its x86_64 wheel is cu128
    ("torch213-cxx11-cu130-aarch64-linux", False),  # 2.11 on: PyPI's aarch64 wheel is CUDA 13
    ("torch213-cxx11-cpu-aarch64-linux", False),
])
def test_pypi_serves_another_build_for_aarch64_than_for_x86_64(plan_of: Callable[[str], Plan], table: CompatTable,
                                                               variant_id: str, refused: bool) -> None:
    """Read from PyPI's aarch64 wheels' METADATA: 2.4-2.10 mark their nvidia-* requirements
    x86_64-only (a CPU build), 2.11-2.14 require cuda-toolkit 13.0, 2.15 13.2 (compat.toml's
    pypi_aarch64). A variant PyPI's aarch64 wheel is not is refused before anything downloads."""
    plan = plan_of('[matrix]\ntorch = ["2.9", "2.13"]\nbackends = ["cpu", "cuda"]\narch = ["aarch64"]\n')
    variant = next(v for v in plan.variants if v.id == variant_id)
    release = table.release(variant.key.torch)
    assert release is not None
    reason = pypi_refusal(variant, release, PYPI)
    assert (reason is not None) == refused
    if reason:
        assert f"PyPI's torch {release.build_version} for aarch64 is the cpu build" in reason
    assert variant.torch_on_pypi == (variant.key.backend.build_name == release.pypi_build("aarch64"))
    assert (release.pypi_build("aarch64"), release.pypi_build("x86_64")) == (
        {"2.9": ("cpu", "cu128"), "2.13": ("cu130", "cu130")}[variant.key.torch])
