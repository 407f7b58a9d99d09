"""Choosing among the parts of a split CUDA build ([cuda] split_archs) by the GPU: `which --gpu`
(select.py's own rule, runtime/_fit.gpu_part_serves) picks the part whose code runs on each GPU
named, the closest SASS first and the PTX part for a GPU newer than every SASS, and says why; a
GPU no part serves is told what arch list would. The environment's torch is faked (a CUDA 13.0
torch 2.13); the rule is the one select.py runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wheelfactory._runtime._fit import gpu_part_serves
from wheelfactory.publish import select

PARTS = ("sm80", "sm90", "sm120", "ptx120")
ENV = {"torch": "2.13", "torch_version": "2.13.0", "backend": "cuda", "toolkit": "13.0", "cxx11_abi": True,
       "python": "3.11", "arch": "x86_64", "gpus": []}


def listing(tmp_path: Path) -> Path:
    variants = []
    for part in PARTS:
        vid = f"torch213-cxx11-cu130-{part}-x86_64-linux"
        variants.append({"id": vid, "project": "fusedops", "version": f"0.1.0+cu130torch2.13{part}", "torch": "2.13",
                         "backend": "cuda", "toolkit": "13.0", "cxx11_abi": True, "python": "abi3", "arch": "x86_64",
                         "stable_abi": False, "gpu": part, "index": f"{vid}/simple/"})
    (tmp_path / "index.json").write_text(json.dumps({"variants": variants}))
    return tmp_path


@pytest.mark.parametrize(("gpus", "picked", "why"), [
    (["9.0"], "sm90", ["sm_90 -> sm_90 wheel: its own SASS"]),
    (["8.6"], "sm80", ["sm_86 -> sm_80 wheel: same major, lower minor SASS runs"]),
    (["13.0"], "ptx120", ["sm_130 -> compute_120 PTX wheel: newer than the PTX's arch, the driver compiles the PTX "
                          "on first load"]),
    (["12.1"], "sm120", ["sm_121 -> sm_120 wheel: same major, lower minor SASS runs"]),
    (["12.0", "13.0"], "ptx120", None),  # a cluster of two kinds: the one wheel that runs on both
])
def test_the_gpu_picks_the_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                gpus: list[str], picked: str, why: list[str] | None) -> None:
    monkeypatch.setattr(select, "detect", lambda: dict(ENV))
    args = ["--index", str(listing(tmp_path))] + [arg for gpu in gpus for arg in ("--gpu", gpu)]
    assert select.main(args) == 0
    out = capsys.readouterr().out
    assert f"-> torch213-cxx11-cu130-{picked}-x86_64-linux" in out, out
    for line in why or []:
        assert f"# {line}\n" in out, out
    decision = json.loads(_json(args, monkeypatch, capsys))
    assert decision["variant"]["gpu"] == picked and len(decision["why"]) == len(gpus)


def _json(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    assert select.main([*args, "--json"]) == 0
    return capsys.readouterr().out


def test_a_gpu_no_part_serves_is_told_the_arch_list_that_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(select, "detect", lambda: dict(ENV))
    assert select.main(["--index", str(listing(tmp_path)), "--gpu", "7.5"]) == select.EXIT_NO_MATCH
    err = capsys.readouterr().err
    assert "its sm80 SASS does not run on sm_75" in err
    assert "No part of this split build (ptx120, sm80, sm90, sm120) runs on sm_75: an arch_list with 7.5" in err


def test_without_a_gpu_seen_the_choice_asks_for_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(select, "detect", lambda: dict(ENV))
    assert select.main(["--index", str(listing(tmp_path))]) == select.EXIT_NO_MATCH
    err = capsys.readouterr().err
    assert "splits its CUDA builds by GPU architecture (ptx120, sm80, sm90, sm120) and no GPU is seen here" in err
    assert "name the GPU to install for with --gpu, e.g. --gpu 9.0" in err


@pytest.mark.parametrize("bad", ["9", "sm_90", "9.0.1", "x"])
def test_a_gpu_that_is_not_a_capability_is_one_line(tmp_path: Path, bad: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        select.main(["--index", str(tmp_path), "--gpu", bad])
    assert stop.value.code == select.EXIT_BAD_INDEX
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(("part", "capability", "serves"), [
    ("sm80", (8, 0), True), ("sm80", (8, 9), True), ("sm80", (9, 0), False), ("sm80", (7, 5), False),
    ("sm90a", (9, 0), True), ("sm90a", (9, 1), False), ("ptx120", (12, 0), True), ("ptx120", (13, 0), True),
    ("ptx120", (10, 0), False), ("other", (9, 0), False),
])
def test_which_part_serves_which_gpu(part: str, capability: tuple[int, int], serves: bool) -> None:
    assert (gpu_part_serves(part, capability) is not None) is serves
