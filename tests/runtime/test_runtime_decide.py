"""The pure prebuilt decision, fed fake environments (no GPU, no torch probing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.rt_fakes import fake_env
from wheelfactory._runtime._env import Environment
from wheelfactory._runtime._errors import RecordError
from wheelfactory._runtime._record import (
    BuildRecord,
    RecordUnavailable,
    decide_prebuilt,
    parse_build_record,
    read_build_record,
)

BASE_RECORD: dict[str, Any] = {
    "schema": 1,
    "name": "fusedops",
    "version": "0.1.0+cputorch2.13",
    "variant": "torch213-cxx11-cpu-x86_64-linux",
    "torch": "2.13.0",
    "backend": "cpu",
    "toolkit": None,
    "cxx11_abi": True,
    "python": "abi3",
    "arch": "x86_64",
    "arch_list": [],
    "namespace": "_fusedops_cpu_1a2b3c4d",
    "ops": ["silu_and_mul", "rms_norm"],
    "library": "_C.abi3.so",
    "stable_abi": False,
}
CUDA = {
    "backend": "cuda",
    "toolkit": "13.0",
    "variant": "torch213-cxx11-cu130-x86_64-linux",
    "arch_list": ["8.0", "9.0", "12.0+PTX"],
}
ROCM = {"backend": "rocm", "toolkit": "7.1", "variant": "torch213-cxx11-rocm71-x86_64-linux", "arch_list": []}


def record(**overrides: Any) -> BuildRecord:
    return parse_build_record({**BASE_RECORD, **overrides})


CASES = [
    # id, environment, record overrides, accepted, words the reason must contain
    ("exact match", fake_env(), {}, True, "torch213-cxx11-cpu-x86_64-linux matches"),
    (
        "torch minor mismatch",
        fake_env(torch="2.14.0+cpu"),
        {},
        False,
        "built for torch 2.13, this is torch 2.14",
    ),
    ("torch older", fake_env(torch="2.12.1"), {}, False, "built for torch 2.13, this is torch 2.12"),
    ("patch release differs: fine", fake_env(torch="2.13.1"), {}, True, "matches"),
    (
        "ABI mismatch",
        fake_env(),
        {"cxx11_abi": False},
        False,
        "built with the pre-cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=0), this torch uses the cxx11",
    ),
    (
        "ABI mismatch the other way",
        fake_env(abi=False),
        {},
        False,
        "built with the cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=1), this torch uses the pre-cxx11",
    ),
    ("arch mismatch", fake_env(), {"arch": "aarch64"}, False, "built for aarch64, this machine is x86_64"),
    ("arch alias", fake_env(machine="x86_64"), {"arch": "AMD64"}, True, "matches"),
    (
        "python mismatch, not abi3",
        fake_env(python="3.12"),
        {"python": "3.11"},
        False,
        "built for Python 3.11 (not abi3), this is Python 3.12",
    ),
    ("python match, not abi3", fake_env(python="3.11"), {"python": "3.11"}, True, "matches"),
    ("abi3 serves any python", fake_env(python="3.14"), {}, True, "matches"),
    ("cuda exact", fake_env(cuda="13.0", caps=("9.0",)), CUDA, True, "matches"),
    (
        "cuda major mismatch",
        fake_env(cuda="12.8"),
        CUDA,
        False,
        "built with CUDA 13.0, this torch uses CUDA 12.8 (major versions differ)",
    ),
    ("cuda minor newer in env: ok", fake_env(cuda="13.2"), CUDA, True, "CUDA 13.0 build runs on CUDA 13.2"),
    (
        "cuda minor older in env: reject",
        fake_env(cuda="13.0"),
        {**CUDA, "toolkit": "13.2"},
        False,
        "built with CUDA 13.2, newer than this torch's CUDA 13.0",
    ),
    (
        "cuda record, cpu torch",
        fake_env(),
        CUDA,
        False,
        "built for CUDA 13.0, this torch is a CPU-only build",
    ),
    ("cuda record, rocm torch", fake_env(hip="7.1.25424"), CUDA, False, "this torch is a ROCm 7.1 build"),
    ("rocm exact", fake_env(hip="7.1.25424-abc"), ROCM, True, "matches"),
    (
        "rocm minor differs",
        fake_env(hip="7.2.1"),
        ROCM,
        False,
        "built for ROCm 7.1, this torch uses ROCm 7.2",
    ),
    (
        "rocm record, cuda torch",
        fake_env(cuda="13.0"),
        ROCM,
        False,
        "built for ROCm 7.1, this torch is a CUDA 13.0 build",
    ),
    (
        "rocm gfx not served",
        fake_env(hip="7.1", gfx=("gfx942",)),
        {**ROCM, "arch_list": ["gfx90a"]},
        False,
        "no code for the GPU's gfx942",
    ),
    (
        "rocm gfx served",
        fake_env(hip="7.1", gfx=("gfx942",)),
        {**ROCM, "arch_list": ["gfx90a", "gfx942"]},
        True,
        "matches",
    ),
    (
        "gpu newer than arch_list (SASS only)",
        fake_env(cuda="13.0", caps=("12.0",)),
        {**CUDA, "arch_list": ["8.0", "9.0"]},
        False,
        "arch_list 8.0;9.0 has no kernel for the GPU's compute capability 12.0 (sm_120)",
    ),
    (
        "SASS serves same major, newer minor",
        fake_env(cuda="13.0", caps=("8.6",)),
        {**CUDA, "arch_list": ["8.0"]},
        True,
        "matches",
    ),
    (
        "SASS does not serve older minor",
        fake_env(cuda="13.0", caps=("8.0",)),
        {**CUDA, "arch_list": ["8.6"]},
        False,
        "compute capability 8.0",
    ),
    (
        "+PTX serves a newer GPU",
        fake_env(cuda="13.0", caps=("12.0",)),
        {**CUDA, "arch_list": ["9.0+PTX"]},
        True,
        "matches",
    ),
    (
        "9.0a serves only 9.0",
        fake_env(cuda="13.0", caps=("10.0",)),
        {**CUDA, "arch_list": ["9.0a"]},
        False,
        "compute capability 10.0",
    ),
    (
        "9.0a on a 9.0 GPU",
        fake_env(cuda="13.0", caps=("9.0",)),
        {**CUDA, "arch_list": ["9.0a"]},
        True,
        "matches",
    ),
    (
        "one of two GPUs unserved",
        fake_env(cuda="13.0", caps=("8.0", "12.0")),
        {**CUDA, "arch_list": ["8.0", "9.0"]},
        False,
        "compute capability 12.0",
    ),
    (
        "no GPU visible: arch list not judged",
        fake_env(cuda="13.0"),
        {**CUDA, "arch_list": ["9.0a"]},
        True,
        "matches",
    ),
    (
        "cpu record in a CUDA torch loads (CPU ops)",
        fake_env(cuda="13.0", caps=("9.0",)),
        {},
        True,
        "CPU-only build in a CUDA 13.0 build of torch",
    ),
    (
        "stable ABI on a newer torch",
        fake_env(torch="2.15.0"),
        {"stable_abi": True, "torch": "2.10.0"},
        True,
        "stable-ABI build for torch >= 2.10 serves torch 2.15",
    ),
    (
        "stable ABI on an older torch",
        fake_env(torch="2.9.1"),
        {"stable_abi": True, "torch": "2.10.0"},
        False,
        "stable-ABI build needs torch >= 2.10, this is torch 2.9",
    ),
    (
        "stable ABI ignores the C++ ABI flag",
        fake_env(torch="2.13.0", abi=True),
        {"stable_abi": True, "torch": "2.10.0", "cxx11_abi": False},
        True,
        "serves",
    ),
    (
        "several problems are all named",
        fake_env(torch="2.14.0", machine="aarch64"),
        {},
        False,
        "built for x86_64, this machine is aarch64; built for torch 2.13",
    ),
]


@pytest.mark.parametrize(
    ("env", "overrides", "accepted", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide_prebuilt(env: Environment, overrides: dict[str, Any], accepted: bool, words: str) -> None:
    decision = decide_prebuilt(env, record(**overrides))
    assert decision.candidate == "prebuilt"
    assert decision.accepted is accepted, decision.reason
    assert words in decision.reason
    assert str(decision).startswith("prebuilt: ")


def test_missing_record_is_a_rejection_with_its_reason() -> None:
    decision = decide_prebuilt(
        fake_env(), RecordUnavailable("no build record (_build.json): a source-only install")
    )
    assert not decision.accepted
    assert str(decision) == "prebuilt: no build record (_build.json): a source-only install"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("namespace"), "missing required key 'namespace'"),
        (lambda r: r.update(schema=2), "record schema 2"),
        (lambda r: r.update(backend="tpu"), "backend 'tpu'"),
        (lambda r: r.update(torch="latest"), "'latest'"),
        (lambda r: r.update(cxx11_abi="yes"), "'cxx11_abi' must be bool"),
        (lambda r: r.update(python="py3"), "'py3'"),
        (lambda r: r.update(library="../../usr/lib/libevil.so"), "must be a bare file name"),
        (lambda r: r.update(library="/tmp/x.so"), "must be a bare file name"),
        (lambda r: r.update(namespace="bad-name"), "is not an identifier"),
        (lambda r: r.update(ops="silu_and_mul"), "'ops' must be list"),
        (lambda r: r.update(backend="cuda", toolkit=None), "needs a toolkit"),
        (lambda r: r.update(backend="cuda", toolkit="13.0", arch_list=["sm_90"]), "'sm_90'"),
        (lambda r: r.update(backend="rocm", toolkit="7.1", arch_list=["mi300"]), "not gfx names"),
        (lambda r: r.update(stable_abi="no"), "'stable_abi' must be bool"),
    ],
)
def test_parse_build_record_rejects_bad_records(mutate: Any, message: str) -> None:
    data = json.loads(json.dumps(BASE_RECORD))
    mutate(data)
    with pytest.raises(
        RecordError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
    ):
        parse_build_record(data, "_build.json")


def test_unknown_keys_are_ignored() -> None:
    assert record(built_by="factory 9.9", extra={"a": 1}).namespace == "_fusedops_cpu_1a2b3c4d"


def test_read_build_record_problems_become_reasons(tmp_path: Path) -> None:
    assert "source-only install" in read_build_record(tmp_path).reason  # type: ignore[union-attr]
    (tmp_path / "_build.json").write_text("{not json", encoding="utf-8")
    assert "is corrupt" in read_build_record(tmp_path).reason  # type: ignore[union-attr]
    (tmp_path / "_build.json").write_text(json.dumps({**BASE_RECORD, "ops": None}), encoding="utf-8")
    assert "build record unusable" in read_build_record(tmp_path).reason  # type: ignore[union-attr]
    (tmp_path / "_build.json").write_text(json.dumps(BASE_RECORD), encoding="utf-8")
    missing = read_build_record(tmp_path)
    assert isinstance(missing, RecordUnavailable) and "_C.abi3.so, which is missing" in missing.reason
    (tmp_path / "_C.abi3.so").write_bytes(b"")
    assert isinstance(read_build_record(tmp_path), BuildRecord)


# A part of a split build ([cuda] split_archs): its record lists its own arch and every part.
PARTS = ["sm80", "sm90", "sm120", "ptx120"]


@pytest.mark.parametrize(("part", "arch", "cap", "accepted", "said"), [
    ("sm90", "9.0", "8.6", False, "arch_list 9.0 has no kernel for the GPU's compute capability 8.6 (sm_86); install "
     "torch213-cxx11-cu130-sm80-x86_64-linux, the part of this build for it (sm_86 -> sm_80 wheel: same major, lower "
     "minor SASS runs)"),
    ("sm80", "8.0", "13.0", False, "install torch213-cxx11-cu130-ptx120-x86_64-linux, the part of this build for it "
     "(sm_130 -> compute_120 PTX wheel: newer than the PTX's arch"),
    ("ptx120", "12.0+PTX-only", "9.0", False, "install torch213-cxx11-cu130-sm90-x86_64-linux"),
    ("sm90", "9.0", "7.5", False, "no part of this split build (sm80, sm90, sm120, ptx120) serves it: build one "
     "with 7.5 in [cuda] arch_list"),
    ("ptx120", "12.0+PTX-only", "13.0", True, "matches"),
    ("sm80", "8.0", "8.9", True, "matches"),
])
def test_a_part_on_a_gpu_it_cannot_serve_names_the_part_to_install(part: str, arch: str, cap: str, accepted: bool,
                                                                   said: str) -> None:
    data = {**BASE_RECORD, **CUDA, "variant": f"torch213-cxx11-cu130-{part}-x86_64-linux",
            "version": f"0.1.0+cu130torch2.13{part}", "arch_list": [arch], "parts": PARTS}
    decision = decide_prebuilt(fake_env(cuda="13.0", caps=(cap,)), parse_build_record(data))
    assert decision.accepted is accepted and said in decision.reason, decision.reason


def test_parts_must_be_part_names() -> None:
    with pytest.raises(RecordError, match="not GPU architecture parts"):
        parse_build_record({**BASE_RECORD, **CUDA, "arch_list": ["9.0"], "parts": ["sm90", "../x"]})
