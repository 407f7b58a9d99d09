"""Pure toolkit tables: nvcc vs torch's CUDA, arch selection, gencode flags, build tools."""

from __future__ import annotations

import pytest

from runtime._arch import CudaArch
from runtime._errors import InvalidArch, InvalidVersion
from runtime._toolkit import (
    check_build_tools,
    check_nvcc_version,
    gencode_flags,
    parse_arch_list,
    parse_nvcc_version,
    select_cuda_archs,
)
from runtime._versions import MajorMinor

V = MajorMinor.parse


@pytest.mark.parametrize(
    ("nvcc", "torch_cuda", "ok", "words"),
    [
        ("13.0", "13.0", True, "matches"),
        ("12.6", "12.6", True, "matches"),
        ("12.4", "12.6", True, "same minor-version group"),
        ("12.8", "12.6", True, "same minor-version group"),
        ("12.9", "12.0", True, "same minor-version group"),
        ("12.1", "12.9", True, "same minor-version group"),
        ("11.8", "11.0", True, "same minor-version group"),
        ("11.1", "11.7", True, "same minor-version group"),
        ("10.2", "10.0", True, "same minor-version group"),
        ("13.2", "13.0", True, "same minor-version group"),  # 13.x is one group
        ("13.0", "13.1", True, "same minor-version group"),
        ("12.8", "13.0", False, "major versions differ"),
        ("13.0", "12.8", False, "major versions differ"),
        ("11.8", "12.1", False, "major versions differ"),
        ("12.10", "12.6", False, "not in one compatibility group"),  # not in DeepSpeed's table
        ("14.1", "14.0", False, "not in one compatibility group"),  # unknown major: exact only
        ("14.0", "14.0", True, "matches"),
    ],
)
def test_check_nvcc_version(nvcc: str, torch_cuda: str, ok: bool, words: str) -> None:
    verdict = check_nvcc_version(V(nvcc), V(torch_cuda))
    assert verdict.ok is ok
    assert words in verdict.reason
    assert f"nvcc {nvcc}" in verdict.reason and torch_cuda in verdict.reason
    assert bool(verdict.fix) is not ok  # a refusal always says what to do


def test_parse_nvcc_version() -> None:
    text = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
        "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
    )
    assert parse_nvcc_version(text) == MajorMinor(13, 0)
    with pytest.raises(InvalidVersion, match=r"no 'release X\.Y'"):
        parse_nvcc_version("command not found")


def archs(text: str) -> tuple[CudaArch, ...]:
    return tuple(sorted({CudaArch.parse(a) for a in text.split(";")}))


@pytest.mark.parametrize(
    ("env_list", "caps", "record", "torch_cuda", "expected", "source"),
    [
        ("8.0;9.0+PTX", ("12.0",), ("7.5",), "13.0", "8.0;9.0+PTX", "TORCH_CUDA_ARCH_LIST"),
        ("8.0 9.0", (), (), "13.0", "8.0;9.0", "TORCH_CUDA_ARCH_LIST"),
        ("Ampere;Hopper+PTX", (), (), "12.8", "8.0;8.6;9.0+PTX", "TORCH_CUDA_ARCH_LIST"),
        ("native", ("9.0",), (), "13.0", "9.0", "the GPUs present"),
        (None, ("8.6", "9.0", "8.6"), ("7.5",), "13.0", "8.6;9.0", "the GPUs present"),
        (None, (), ("8.0", "12.0+PTX"), "13.0", "8.0;12.0+PTX", "the build record"),
        (None, (), (), "12.8", "7.0;7.5;8.0;8.6;9.0;10.0;12.0", "PyTorch's defaults for CUDA 12.8"),
        (None, (), (), "13.0", "7.5;8.0;8.6;9.0;10.0;12.0+PTX", "PyTorch's defaults for CUDA 13.0"),
        (None, (), (), "13.2", "7.5;8.0;8.6;9.0;10.0;12.0+PTX", "PyTorch's defaults for CUDA 13.2"),
        (None, (), (), "12.7", "5.0;6.0;7.0;7.5;8.0;8.6;9.0", "PyTorch's defaults for CUDA 12.7"),
        # CUDA 13 cannot compile sm_70 and older: dropped unless the user asked for them
        (None, (), ("7.0", "8.0"), "13.0", "8.0", "without archs CUDA 13 dropped"),
        (None, ("7.0", "9.0"), (), "13.0", "9.0", "without archs CUDA 13 dropped"),
    ],
)
def test_select_cuda_archs(
    env_list: str | None,
    caps: tuple[str, ...],
    record: tuple[str, ...],
    torch_cuda: str,
    expected: str,
    source: str,
) -> None:
    selection = select_cuda_archs(
        arch_list_env=env_list,
        gpu_capabilities=[V(c) for c in caps],
        record_archs=record,
        torch_cuda=V(torch_cuda),
    )
    assert selection.archs == archs(expected)
    assert source in selection.source


def test_invalid_arch_list_is_refused() -> None:
    with pytest.raises(InvalidArch, match=r"'9\.x'"):
        parse_arch_list("8.0;9.x")
    with pytest.raises(InvalidArch, match="empty"):
        parse_arch_list(" ; ")


def test_gencode_flags_are_sorted_and_unique() -> None:
    assert gencode_flags(archs("9.0a;8.0;12.0+PTX;8.0")) == [
        "-gencode=arch=compute_120,code=compute_120",
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]


@pytest.mark.parametrize(
    ("cxx", "ninja", "ok", "words"),
    [
        ("/usr/bin/c++", "/usr/bin/ninja", True, "c++ at /usr/bin/c++, ninja at /usr/bin/ninja"),
        (None, "/usr/bin/ninja", False, "no C++ compiler ('c++' is not on PATH"),
        ("/usr/bin/c++", None, False, "ninja is not on PATH"),
        (
            None,
            None,
            False,
            "no C++ compiler ('c++' is not on PATH; set CXX to choose one); ninja is not on PATH",
        ),
    ],
)
def test_check_build_tools(cxx: str | None, ninja: str | None, ok: bool, words: str) -> None:
    verdict = check_build_tools("c++", cxx, ninja)
    assert verdict.ok is ok and words in verdict.reason
    if not ok:
        assert "install" in verdict.fix
