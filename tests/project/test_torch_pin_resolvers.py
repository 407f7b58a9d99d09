"""Real resolvers honour the torch pin (issue 14): a wheel built for torch 2.13, asked for together with
a bare ``torch``, keeps torch on 2.13; the same wheel unpinned lets the resolver take the newest torch.

The wheel is tiny and pure Python, made by ByoStage.finish (the bring-your-own path: the pin text comes
from plan/torch_pin.py through support/wheel_rewrite.py). Packages come from the index the host's pip
is configured with, less its constraints (testkit.pip_install, testkit.uv_pip; no index is named here).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version
from tests.testkit import make_wheel, pip_install, uv_pip
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.torch_pin import TorchRequirement
from wheelfactory.project.bring_your_own import ByoProject, ByoStage

PROBE = "wf-pin-probe==0.1.0+cputorch2.13"  # exact, local label included: no index can serve another


def probe_wheel(tmp_path: Path, plan_of: Callable[[str], Plan], torch_requirement: TorchRequirement) -> Path:
    """A find-links directory holding the torch 2.13 CPU variant's wheel of a project that requires no torch."""
    variant = plan_of('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n').variants[0]
    project = ByoProject(root=tmp_path, import_name="wf_pin_probe", env=(), cpu_env=(), cuda_env=())
    built = make_wheel(tmp_path / "built", "wf_pin_probe", "0.1.0", tag="py3-none-any")
    wheels = tmp_path / torch_requirement
    ByoStage(project, variant, torch_requirement=torch_requirement).finish(built, wheels)
    return wheels


def uv_compile(tmp_path: Path, wheels: Path, *requirements: str) -> subprocess.CompletedProcess[str]:
    """``uv pip compile`` of ``requirements`` for this interpreter, from ``wheels`` and the host's indexes."""
    return uv_pip("compile", "-", "--no-header", "--python", sys.executable, "--find-links", str(wheels),
                  input="\n".join(requirements) + "\n", cache=tmp_path / "uv-cache", check=False, timeout=300)


def resolved_torch(result: subprocess.CompletedProcess[str]) -> Version:
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"(?m)^torch==(\S+)$", result.stdout)
    assert found, result.stdout
    return Version(found.group(1))


def test_uv_keeps_torch_on_the_pinned_line(tmp_path: Path,
                                           plan_of: Callable[[str], Plan]) -> None:
    unpinned_wheels = probe_wheel(tmp_path, plan_of, "unpinned")
    unpinned = resolved_torch(uv_compile(tmp_path, unpinned_wheels, PROBE, "torch"))
    assert unpinned.release[:2] > (2, 13), (
        f"the host's index serves no torch newer than 2.13 ({unpinned}): nothing tells a pin from none")
    pinned_wheels = probe_wheel(tmp_path, plan_of, "pinned")
    pinned = resolved_torch(uv_compile(tmp_path, pinned_wheels, PROBE, "torch"))
    assert pinned.release[:2] == (2, 13), pinned
    # the wheel and another torch, asked for together: a resolver error, not a silent upgrade
    clash = uv_compile(tmp_path, pinned_wheels, PROBE, f"torch=={unpinned}")
    assert clash.returncode != 0 and "No solution found" in clash.stderr, clash.stderr[-3000:]


@pytest.mark.slow  # pip fetches the torch candidates' metadata: ~6 s
def test_pip_keeps_torch_on_the_pinned_line(tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    """pip, with the host's sources (not its torch cap, which alone could hold torch on 2.13):
    ``pip install <wheel> torch`` picks a 2.13 torch."""
    report = tmp_path / "report.json"
    pip_install(sys.executable, "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
                "--find-links", str(probe_wheel(tmp_path, plan_of, "pinned")), PROBE, "torch", timeout=600)
    chosen = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert Version(chosen["torch"]).release[:2] == (2, 13), chosen
