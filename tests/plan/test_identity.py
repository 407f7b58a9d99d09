from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wheelfactory.plan.identity import Backend, InvalidBackend, InvalidVariantId, Variant, VariantId
from wheelfactory.plan.indexes import IndexRef


@pytest.mark.parametrize("text, kind, version, tag", [
    ("cpu", "cpu", None, "cpu"),
    ("cu124", "cuda", "12.4", "cu124"),
    ("cu130", "cuda", "13.0", "cu130"),
    ("cu118", "cuda", "11.8", "cu118"),
    ("rocm6.2", "rocm", "6.2", "rocm62"),
    ("rocm6.2.4", "rocm", "6.2.4", "rocm62"),
    ("CU128", "cuda", "12.8", "cu128"),
])
def test_backend_parse(text: str, kind: str, version: str | None, tag: str) -> None:
    backend = Backend.parse(text)
    assert (backend.kind, backend.version, backend.tag) == (kind, version, tag)


@pytest.mark.parametrize("text", ["gpu", "cuda12", "cu", "rocm", "rocm62", "cu12.4", ""])
def test_backend_parse_rejects(text: str) -> None:
    with pytest.raises(InvalidBackend, match="unknown backend"):
        Backend.parse(text)


def test_backend_build_name_round_trips() -> None:
    for name in ("cpu", "cu124", "rocm6.2.4", "rocm7.1"):
        assert Backend.parse(name).build_name == name


@pytest.mark.parametrize("text", [
    "torch214-cxx11-cu130-x86_64-linux",
    "torch26-cxx98-cpu-x86_64-linux",
    "torch26-cxx98-cu124-x86_64-linux",
    "torch213-cxx11-rocm72-x86_64-linux",
    "torch29-cxx11-cu128-aarch64-linux",
    "torch-stable-abi210-cu130-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux-cp311",
])
def test_variant_id_round_trip(text: str) -> None:
    assert str(VariantId.parse(text)) == text


def test_variant_id_fields() -> None:
    key = VariantId.parse("torch26-cxx98-cu124-x86_64-linux")
    assert key == VariantId("2.6", Backend("cuda", "12.4"), False)
    stable = VariantId.parse("torch-stable-abi210-cpu-aarch64-linux")
    assert stable.stable_abi and stable.torch == "2.10" and stable.arch == "aarch64"


@pytest.mark.parametrize("text", ["torch214-cxx12-cu130-x86_64-linux", "torch214-cxx11-cu130-x86_64",
                                  "torch214-cxx11-gpu-x86_64-linux", "", "torch2-cxx11-cpu-x86_64-linux"])
def test_variant_id_rejects(text: str) -> None:
    with pytest.raises(InvalidVariantId, match="not a variant id"):
        VariantId.parse(text)


backends = st.one_of(
    st.just(Backend("cpu")),
    st.builds(lambda a, b: Backend("cuda", f"{a}.{b}"), st.integers(10, 13), st.integers(0, 9)),
    st.builds(lambda a, b: Backend("rocm", f"{a}.{b}"), st.integers(5, 7), st.integers(0, 9)),
)
keys = st.builds(
    VariantId,
    torch=st.builds(lambda a, b: f"{a}.{b}", st.integers(2, 9), st.integers(0, 30)),
    backend=backends,
    cxx11_abi=st.booleans(),
    arch=st.sampled_from(["x86_64", "aarch64"]),
    python=st.one_of(st.just("abi3"), st.builds(lambda m: f"3.{m}", st.integers(9, 14))),
    stable_abi=st.just(False),
)


@given(keys)
def test_variant_id_round_trip_property(key: VariantId) -> None:
    assert VariantId.parse(str(key)) == key


def _variant(key: str, toolkit: str | None, torch_version: str) -> Variant:
    return Variant(key=VariantId.parse(key), torch_version=torch_version, toolkit=toolkit, arch_list=(),
                   torch_index=IndexRef("pypi"), torch_on_pypi=True, wheel_platform="manylinux_2_28")


def test_local_version_labels() -> None:
    assert _variant("torch214-cxx11-cu130-x86_64-linux", "13.0", "2.14.1").local_version == "cu130torch2.14"
    assert _variant("torch26-cxx98-cpu-x86_64-linux", None, "2.6.0").local_version == "cputorch2.6cxx98"
    assert _variant("torch26-cxx98-cpu-x86_64-linux", None, "2.6.0").torch_requirement == "torch==2.6.0"
