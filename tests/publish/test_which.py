"""The selector's rules, on fake environments (the real one runs in the end-to-end test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheelfactory.publish import select
from wheelfactory.publish.select import choose, mismatches

ENV = {"torch": "2.13", "torch_version": "2.13.0", "backend": "cuda", "toolkit": "13.1", "cxx11_abi": True,
       "python": "3.11", "arch": "x86_64"}


def variant(vid: str, **kw: object) -> dict[str, object]:
    base = {"id": vid, "project": "tiny", "torch": "2.13", "backend": "cuda", "toolkit": "13.0", "cxx11_abi": True,
            "python": "abi3", "arch": "x86_64", "stable_abi": False, "index": f"{vid}/simple/"}
    return {**base, **kw}


def test_exact_toolkit_beats_an_older_compatible_one_and_both_beat_cpu() -> None:
    cpu = variant("cpu", backend="cpu", toolkit=None)
    best, others = choose(ENV, [variant("cu130"), variant("cu131", toolkit="13.1"), cpu])
    assert best is not None and best["id"] == "cu131" and not others


def test_a_cpu_build_serves_a_cuda_torch_when_no_cuda_build_fits() -> None:
    # what the runtime does too: the CPU ops load prebuilt, CUDA tensors use the reference ops
    best, others = choose(ENV, [variant("cu132", toolkit="13.2"), variant("cpu", backend="cpu", toolkit=None)])
    assert best is not None and best["id"] == "cpu" and [v["id"] for v, _ in others] == ["cu132"]


# The runtime's own words (runtime/_fit.py): select.py, `wheelfactory which` and the loader agree.
@pytest.mark.parametrize("changes, reason", [
    ({"torch": "2.12"}, "built for torch 2.12, this is torch 2.13"),
    ({"cxx11_abi": False}, "built with the pre-cxx11 ABI"),
    ({"toolkit": "13.2"}, "built with CUDA 13.2, newer than this torch's CUDA 13.1"),
    ({"toolkit": "12.8"}, "built with CUDA 12.8, this torch uses CUDA 13.1 (major versions differ)"),
    ({"arch": "aarch64"}, "built for aarch64, this machine is x86_64"),
    ({"backend": "rocm", "toolkit": "6.4"}, "built for ROCm 6.4, this torch is a CUDA 13.1 build"),
    ({"python": "3.12"}, "built for Python 3.12 (not abi3), this is Python 3.11"),
    ({"stable_abi": True, "torch": "2.14"}, "stable-ABI build needs torch >= 2.14"),
])
def test_each_mismatch_is_named(changes: dict[str, object], reason: str) -> None:
    why = mismatches(ENV, variant("v", **changes))
    assert any(reason in w for w in why), why


def test_a_stable_abi_build_serves_newer_torch_but_a_specific_one_is_preferred() -> None:
    stable = variant("stable", stable_abi=True, torch="2.10")
    assert choose(ENV, [stable])[0] == stable
    assert choose(ENV, [stable, variant("specific")])[0]["id"] == "specific"  # type: ignore[index]


@pytest.mark.parametrize("listed, advice", [
    ([variant("cu130", torch="2.12")], "Installing cu130 still works: its runtime JIT-compiles"),
    ([variant("arm", arch="aarch64")], "None of them installs here: they are built for another arch or Python "
                                      "than this x86_64 CPython 3.11."),
    ([variant("arm", arch="aarch64"), variant("cu130", torch="2.12")], "Installing cu130 still works"),
])
def test_no_fit_advises_only_a_wheel_that_installs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str],
                                                        listed: list[dict[str, object]], advice: str) -> None:
    """An aarch64 wheel is never offered to an x86-64 machine as 'still works': pip refuses its tag."""
    (tmp_path / "index.json").write_text(json.dumps({"variants": listed}))
    monkeypatch.setattr(select, "detect", lambda: ENV)
    assert select.main(["--index", str(tmp_path)]) == select.EXIT_NO_MATCH
    assert advice in capsys.readouterr().err
