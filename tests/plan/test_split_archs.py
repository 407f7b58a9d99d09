"""[cuda] split_archs: a CUDA variant planned as one variant per SASS arch plus one PTX variant,
each with its own id, local label, shipped arch list and PEP 825 properties; `--only` selects a
part; CPU and ROCm variants are left whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.plan.expand import Plan, select
from wheelfactory.plan.identity import GpuSlice, InvalidVariantId, VariantId, split_arch_list
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.publish.variant_metadata import label_for, properties_for

SPLIT = """
[matrix]
torch = ["2.13"]
backends = ["cpu", "cu130"]
[cuda]
arch_list = "8.0;9.0;12.0+PTX"
split_archs = true
"""


def test_a_split_build_plans_one_variant_per_sass_arch_and_one_for_the_ptx(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(SPLIT)
    assert [v.id for v in plan.variants] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu130-sm80-x86_64-linux",
        "torch213-cxx11-cu130-sm90-x86_64-linux",
        "torch213-cxx11-cu130-sm120-x86_64-linux",
        "torch213-cxx11-cu130-ptx120-x86_64-linux",
    ]
    parts = {v.key.gpu: v for v in plan.variants if v.key.gpu}
    for part in parts.values():  # each compiles the whole list, once for all (the compile cache)
        assert part.arch_list == ("8.0", "9.0", "12.0+PTX")
        assert part.split_from == "torch213-cxx11-cu130-x86_64-linux"
    assert parts["sm90"].shipped_arch_list == ("9.0",) and parts["sm90"].local_version == "cu130torch2.13sm90"
    assert parts["ptx120"].shipped_arch_list == ("12.0+PTX-only",)
    assert plan.variants[0].split_from == "" and plan.variants[0].shipped_arch_list == ()
    assert [v.id for v in select(plan, ["*-sm90-*"])] == ["torch213-cxx11-cu130-sm90-x86_64-linux"]
    data = plan.as_dict()["variants"][2]
    assert (data["gpu"], data["shipped_arch_list"], data["arch_list"]) == ("sm90", "9.0", "8.0;9.0;12.0+PTX")


def test_without_split_archs_the_variant_stays_whole(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of(SPLIT.replace("split_archs = true", "split_archs = false"))
    assert "torch213-cxx11-cu130-x86_64-linux" in {v.id for v in plan.variants}
    assert all(not v.key.gpu for v in plan.variants)


def test_split_and_stable_abi_combine(plan_of: Callable[[str], Plan]) -> None:
    plan = plan_of('[matrix]\ntorch = ["2.13"]\nbackends = ["cu130"]\nstable_abi = "2.10"\n'
                   '[cuda]\narch_list = "9.0;10.0"\nsplit_archs = true\n')
    assert [v.id for v in plan.variants] == ["torch-stable-abi210-cu130-sm90-x86_64-linux",
                                             "torch-stable-abi210-cu130-sm100-x86_64-linux"]  # no +PTX: no PTX part


@pytest.mark.parametrize(("archs", "tags"), [
    (("8.0", "9.0", "12.0+PTX"), ["sm80", "sm90", "sm120", "ptx120"]),
    (("8.0+PTX", "9.0a", "10.0+PTX"), ["sm80", "sm90a", "sm100", "ptx100"]),  # only the highest arch's PTX
    (("12.0", "8.6"), ["sm86", "sm120"]),
])
def test_split_arch_list(archs: tuple[str, ...], tags: list[str]) -> None:
    assert [part.tag for part in split_arch_list(archs)] == tags


@pytest.mark.parametrize("text", ["torch213-cxx11-cu130-sm90-x86_64-linux",
                                  "torch213-cxx11-cu130-ptx120-x86_64-linux",
                                  "torch-stable-abi210-cu130-sm90a-aarch64-linux",
                                  "torch213-cxx11-cu130-sm80-x86_64-linux-cp311"])
def test_split_ids_round_trip(text: str) -> None:
    assert str(VariantId.parse(text)) == text


def test_a_gpu_part_follows_cuda_only() -> None:
    with pytest.raises(InvalidVariantId, match="CUDA backend only"):
        VariantId.parse("torch213-cxx11-cpu-sm90-x86_64-linux")


def test_gpu_slice_names() -> None:
    sass, ptx = GpuSlice.parse("sm90a"), GpuSlice.parse("ptx120")
    assert (sass.arch, sass.ptx, sass.sm_arch, sass.arch_list_entry) == ("9.0a", False, "90a_real", "9.0a")
    assert (ptx.arch, ptx.ptx, ptx.sm_arch, ptx.arch_list_entry) == ("12.0", True, "120_virtual", "12.0+PTX-only")


def test_each_part_has_its_own_label_and_one_sm_arch_value() -> None:
    def wheel(vid: str) -> IndexedWheel:
        return IndexedWheel(VariantId.parse(vid), "tiny", "0.1.0", "tiny.whl", "0" * 64, Path("tiny.whl"), "2.13.0",
                            "13.0", None, core_metadata_sha256=None, size=1)

    sm90, ptx = wheel("torch213-cxx11-cu130-sm90-x86_64-linux"), wheel("torch213-cxx11-cu130-ptx120-x86_64-linux")
    assert label_for(sm90) == "torch213_cxx11_cu130_sm90" and label_for(ptx) == "torch213_cxx11_cu130_ptx120"
    # the part's arch, whatever the record lists (a bring-your-own wheel has no record)
    assert properties_for(sm90, ["8.0", "9.0", "12.0+PTX"])["nvidia"]["sm_arch"] == ["90_real"]
    assert properties_for(ptx)["nvidia"]["sm_arch"] == ["120_virtual"]


@pytest.mark.parametrize(("torch", "backend", "flags", "added"), [
    ("2.13", "cu130", (), ("--compress-mode=size",)),
    ("2.13", "cu130", ("-O3", "--compress-mode=speed"), ()),  # the project's own choice stands
    ("2.13", "cu130", ("-compress-mode=none",), ()),
    ("2.9", "cu128", (), ()),  # CUDA 12.8's minor-version compatibility reaches older drivers
    ("2.13", "cpu", (), ()),
])
def test_nvcc_compresses_for_size_from_cuda_13(plan_of: Callable[[str], Plan], torch: str, backend: str,
                                               flags: tuple[str, ...], added: tuple[str, ...]) -> None:
    (variant,) = plan_of(f'[matrix]\ntorch = ["{torch}"]\nbackends = ["{backend}"]\n').variants
    assert variant.nvcc_defaults(flags) == added
