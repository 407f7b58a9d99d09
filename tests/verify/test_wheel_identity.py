"""factory/wheelfactory/verify/wheel_identity.py: a wheel is refused for each identity fact that
names another variant than its manifest entry's (file name tags, local label, build record, RECORD);
a good wheel has no problem, whatever one fact is mutated (hypothesis)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.testkit import make_wheel
from wheelfactory.images.emulation import elf_header
from wheelfactory.plan.identity import Variant, VariantId
from wheelfactory.verify.wheel_identity import elf_machine_problems, wheel_identity_problems

VID = "torch213-cxx11-cu130-x86_64-linux"
KEY = VariantId.parse(VID)
RECORD = {"namespace": "_tiny_cuda_0123abcd", "arch_list": ["9.0"], "variant": VID, "torch": "2.13",
          "built_with_torch": "2.13.0", "backend": "cuda", "toolkit": "13.0", "cxx11_abi": True, "python": "abi3",
          "arch": "x86_64", "stable_abi": False}


X86_64_SO = elf_header("x86_64", 3) + bytes(44)


def good(directory: Path, *, version: str = "0.1.0+cu130torch2.13", tag: str = "cp39-abi3-manylinux_2_28_x86_64",
         record: dict[str, object] | None = None, files: dict[str, str | bytes] | None = None) -> Path:
    return make_wheel(directory, "tiny", version, tag=tag, files={"tiny/_C.abi3.so": X86_64_SO, **(files or {})},
                      build_record=RECORD if record is None else record)


def problems(wheel: Path) -> list[str]:
    return wheel_identity_problems(wheel, KEY, "2.13.0", "13.0")


def test_a_good_wheel_has_no_problem(tmp_path: Path) -> None:
    assert problems(good(tmp_path)) == []
    # a VCS version before the label, and a record-less (bring-your-own) wheel, are fine too
    assert problems(good(tmp_path / "vcs", version="0.3.2.dev2+gb4153aeb6.cu130torch2.13")) == []
    assert problems(make_wheel(tmp_path / "byo", "tiny", "0.1.0+cu130torch2.13")) == []


def test_local_label_moved_to_the_variant_id() -> None:
    assert KEY.local_label == "cu130torch2.13"
    assert VariantId.parse("torch26-cxx98-cpu-x86_64-linux").local_label == "cputorch2.6cxx98"
    assert VariantId.parse("torch-stable-abi210-cu130-x86_64-linux").local_label == "cu130torch2.10stableabi"
    assert Variant.local_version.fget is not None  # still there, delegating (plan tests pin its values)


@pytest.mark.parametrize(("kind", "change", "expected"), [
    ("variant id", {"record": {**RECORD, "variant": "torch214-cxx11-cu130-x86_64-linux"}}, "variant is"),
    ("build record torch", {"record": {**RECORD, "torch": "2.6"}}, "torch is '2.6'"),
    ("build record abi", {"record": {**RECORD, "cxx11_abi": False}}, "cxx11_abi is False"),
    ("build record toolkit", {"record": {**RECORD, "toolkit": "12.8"}}, "toolkit is '12.8'"),
    ("local label", {"version": "0.1.0+cu130torch2.14"}, "local version label 'cu130torch2.14'"),
    ("no local label", {"version": "0.1.0"}, "local version label '(none)'"),
    ("platform tag", {"tag": "cp39-abi3-manylinux_2_28_aarch64"}, "platform tag manylinux_2_28_aarch64"),
    ("python tag", {"tag": "cp311-cp311-manylinux_2_28_x86_64"}, "python tag cp311-cp311 is not cp3X-abi3"),
])
def test_each_identity_mismatch_is_a_problem(tmp_path: Path, kind: str, change: dict[str, object],
                                             expected: str) -> None:
    found = problems(good(tmp_path, **change))  # type: ignore[arg-type]
    assert len(found) == 1 and expected in found[0], (kind, found)


def test_a_per_cpython_variant_needs_its_own_tag(tmp_path: Path) -> None:
    key = VariantId.parse("torch213-cxx11-cpu-x86_64-linux-cp311")
    record = {"variant": str(key), "python": "3.11"}
    ok = make_wheel(tmp_path / "a", "tiny", "0.1.0+cputorch2.13", tag="cp311-cp311-manylinux_2_28_x86_64",
                    build_record=record)
    assert wheel_identity_problems(ok, key, "2.13.0", None) == []
    abi3 = make_wheel(tmp_path / "b", "tiny", "0.1.0+cputorch2.13", build_record=record)
    assert "is not cp311-cp311" in wheel_identity_problems(abi3, key, "2.13.0", None)[0]


def rewrite_member(wheel: Path, member: str, data: bytes | None) -> None:
    """Replace (None: drop) one member, leaving RECORD as it was."""
    with zipfile.ZipFile(wheel) as archive:
        contents = {n: archive.read(n) for n in archive.namelist()}
    if data is None:
        contents.pop(member)
    else:
        contents[member] = data
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, payload in contents.items():
            archive.writestr(name, payload)


@pytest.mark.parametrize(("member", "data", "expected"), [
    ("tiny/_C.abi3.so", X86_64_SO + b"planted", "tiny/_C.abi3.so does not match its"),
    ("tiny/evil.py", b"import os\n", "tiny/evil.py is not in"),
    ("tiny/_C.abi3.so", None, "lists tiny/_C.abi3.so, which the wheel does not hold"),
])
def test_a_record_that_does_not_match_the_members_is_a_problem(tmp_path: Path, member: str, data: bytes | None,
                                                              expected: str) -> None:
    wheel = good(tmp_path)
    rewrite_member(wheel, member, data)
    found = problems(wheel)
    assert len(found) == 1 and expected in found[0], found


def test_a_library_for_another_machine_than_the_variants_is_a_problem(tmp_path: Path) -> None:
    """A wheel named x86_64 holding an AArch64 library (what a cross build that went wrong, or an
    engine that built with the wrong image, gives) is refused, as is a .so that is no ELF at all."""
    wheel = good(tmp_path, files={"tiny/_C.abi3.so": elf_header("aarch64", 3) + bytes(44)})
    assert problems(wheel) == ["tiny/_C.abi3.so is an ELF file for aarch64, not for x86_64"]
    assert elf_machine_problems({"a.so": elf_header("aarch64", 3)}, "aarch64") == []
    assert elf_machine_problems({"pkg.libs/libz-1a2b.so.1": b"GROUP ( libz.so )"}, "aarch64") == [
        "pkg.libs/libz-1a2b.so.1 is named as a shared library and is not an ELF file"]
    thirty_two = b"\x7fELF\x01\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + (0x28).to_bytes(2, "little")
    assert elf_machine_problems({"a.so": thirty_two}, "aarch64") == ["a.so is an ELF file for machine 0x28 (32-bit), "
                                                                     "not for aarch64"]


def test_an_empty_record_and_a_damaged_zip_are_problems(tmp_path: Path) -> None:
    empty = make_wheel(tmp_path / "a", "tiny", "0.1.0+cu130torch2.13", record="")
    assert any("is not in tiny-0.1.0+cu130torch2.13.dist-info/RECORD" in p for p in problems(empty))
    broken = tmp_path / "tiny-0.1.0+cu130torch2.13-cp39-abi3-manylinux_2_28_x86_64.whl"
    broken.write_bytes(b"not a zip")
    assert any("is not a readable wheel" in p for p in problems(broken))


# One identity fact of a good wheel mutated: always refused; unmutated: always accepted.
MUTATIONS = st.one_of(
    st.tuples(st.just("record"), st.sampled_from(["variant", "torch", "backend", "toolkit", "cxx11_abi", "python",
                                                  "arch", "stable_abi", "built_with_torch"])),
    st.tuples(st.just("label"), st.sampled_from(["cu128torch2.13", "cu130torch2.14", "cputorch2.13",
                                                 "cu130torch2.13cxx98", "cu130torch2.13stableabi", ""])),
    st.tuples(st.just("tag"), st.sampled_from(["cp39-abi3-manylinux_2_28_aarch64", "cp311-cp311-manylinux_2_28_x86_64",
                                               "py3-none-any", "cp39-abi3-linux_aarch64", "cp39-none-linux_x86_64"])),
    st.tuples(st.just("member"), st.sampled_from(["edit", "add", "drop"])),
    st.none(),
)
OTHER = {"variant": "torch213-cxx11-cu128-x86_64-linux", "torch": "2.14", "backend": "rocm", "toolkit": "12.8",
         "cxx11_abi": False, "python": "3.11", "arch": "aarch64", "stable_abi": True, "built_with_torch": "2.14.0"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=MUTATIONS)
def test_one_mutated_identity_fact_is_refused_and_a_good_wheel_accepted(tmp_path_factory: pytest.TempPathFactory,
                                                                      mutation: tuple[str, str] | None) -> None:
    directory = tmp_path_factory.mktemp("w")
    kind, what = mutation or ("", "")
    if kind == "record":
        wheel = good(directory, record={**RECORD, what: OTHER[what]})
    elif kind == "label":
        wheel = good(directory, version="0.1.0" + (f"+{what}" if what else ""))
    elif kind == "tag":
        wheel = good(directory, tag=what)
    else:
        wheel = good(directory)
        if kind == "member":
            rewrite_member(wheel, *{"edit": ("tiny/__init__.py", b"X = 1\n"), "add": ("tiny/more.py", b""),
                                    "drop": ("tiny/__init__.py", None)}[what])
    found = problems(wheel)
    assert bool(found) == (mutation is not None), (mutation, found)
