"""Version-like identities: parse/format round-trips and the CUDA arch serving rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wheelfactory._runtime._arch import CudaArch
from wheelfactory._runtime._errors import InvalidArch, InvalidVersion
from wheelfactory._runtime._versions import MajorMinor, format_device_tag, parse_device_tag


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.13", MajorMinor(2, 13)),
        ("2.13.0+cpu", MajorMinor(2, 13)),
        ("2.14.0a0+git1234abc", MajorMinor(2, 14)),
        ("2.15.0.dev20260901+cu130", MajorMinor(2, 15)),
        ("6.2.41133-dd7f95766", MajorMinor(6, 2)),
        ("13.0", MajorMinor(13, 0)),
    ],
)
def test_major_minor_parses_real_version_strings(text: str, expected: MajorMinor) -> None:
    assert MajorMinor.parse(text) == expected


@pytest.mark.parametrize("text", ["", "2", "abc", "two.three", None])
def test_major_minor_rejects_garbage_quoting_it(text: object) -> None:
    with pytest.raises(InvalidVersion, match=repr(text).replace("(", r"\(").replace(")", r"\)")):
        MajorMinor.parse(text)  # type: ignore[arg-type]


@given(st.integers(0, 500), st.integers(0, 500))
def test_major_minor_round_trips_and_orders_like_versions(major: int, minor: int) -> None:
    version = MajorMinor(major, minor)
    assert MajorMinor.parse(str(version)) == version
    assert (version < MajorMinor(major, minor + 1)) and (version < MajorMinor(major + 1, 0))


@given(
    st.sampled_from(["cpu", "cuda", "rocm"]),
    st.integers(1, 40),
    st.integers(0, 9),
)
def test_device_tag_round_trips(backend: str, major: int, minor: int) -> None:
    toolkit = None if backend == "cpu" else MajorMinor(major, minor)
    assert parse_device_tag(format_device_tag(backend, toolkit)) == (backend, toolkit)


@pytest.mark.parametrize(
    ("backend", "toolkit", "tag"),
    [
        ("cpu", None, "cpu"),
        ("cuda", MajorMinor(13, 0), "cu130"),
        ("cuda", MajorMinor(11, 8), "cu118"),
        ("rocm", MajorMinor(6, 2), "rocm62"),
    ],
)
def test_device_tag_examples(backend: str, toolkit: MajorMinor | None, tag: str) -> None:
    assert format_device_tag(backend, toolkit) == tag


@pytest.mark.parametrize(
    ("backend", "toolkit"),
    [("cpu", MajorMinor(13, 0)), ("cuda", None), ("tpu", None), ("cuda", MajorMinor(12, 10))],
)
def test_device_tag_refuses_impossible_combinations(backend: str, toolkit: MajorMinor | None) -> None:
    with pytest.raises(InvalidVersion):
        format_device_tag(backend, toolkit)


@pytest.mark.parametrize("text", ["cu", "cuda130", "rocm", "gpu", "CPU"])
def test_device_tag_parse_rejects_quoting_input(text: str) -> None:
    with pytest.raises(InvalidVersion, match=repr(text)):
        parse_device_tag(text)


arch_strings = st.builds(
    lambda major, minor, suffix, ptx: f"{major}.{minor}{suffix}{'+PTX' if ptx else ''}",
    st.integers(1, 20),
    st.integers(0, 9),
    st.sampled_from(["", "a", "f"]),
    st.booleans(),
)


@given(arch_strings)
def test_cuda_arch_round_trips(text: str) -> None:
    assert str(CudaArch.parse(text)) == text


@pytest.mark.parametrize("text", ["9", "sm_90", "9.0b", "9.0+ptx", "+PTX", ""])
def test_cuda_arch_rejects_quoting_input(text: str) -> None:
    with pytest.raises(InvalidArch, match=repr(text).replace("+", r"\+")):
        CudaArch.parse(text)


@pytest.mark.parametrize(
    ("arch", "gpu", "serves"),
    [
        # SASS: same major, minor <= the GPU's
        ("8.0", "8.0", True),
        ("8.0", "8.6", True),
        ("8.0", "8.9", True),
        ("8.6", "8.0", False),
        ("8.0", "9.0", False),
        ("9.0", "8.0", False),
        ("12.0", "12.1", True),
        # +PTX: any newer GPU through the driver's JIT, never an older one
        ("9.0+PTX", "10.0", True),
        ("9.0+PTX", "12.0", True),
        ("9.0+PTX", "8.6", False),
        ("12.0+PTX", "12.0", True),
        # "a": that exact capability only, PTX included
        ("9.0a", "9.0", True),
        ("9.0a", "10.0", False),
        ("10.0a", "10.3", False),
        ("9.0a+PTX", "10.0", False),
        # "f": the family (same major, equal or newer minor)
        ("10.0f", "10.3", True),
        ("10.3f", "10.0", False),
        ("10.0f", "12.0", False),
    ],
)
def test_cuda_arch_serves(arch: str, gpu: str, serves: bool) -> None:
    assert CudaArch.parse(arch).serves(MajorMinor.parse(gpu)) is serves


def test_cuda_arch_gencode_flags() -> None:
    assert CudaArch.parse("9.0a").gencode_flags() == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert CudaArch.parse("12.0+PTX").gencode_flags() == [
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_120,code=compute_120",
    ]
