"""A kernel-builder project (tests/fixtures/kb_relu) built unedited by the host engine: this
interpreter's torch, CPU. The per-unit flags and the CPU_KERNEL define are checked by the fixture's
own sources (an #error fires if a unit's flags are missing or reach the bindings); the smoke check
finds the op under the build's namespace; the project's tests/ pass against the installed wheel;
and the wheel loads in this process beside nothing else of its name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from testkit import REPO, TEST_CACHE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built() -> tuple[Path, dict[str, object], str]:
    workdir = TEST_CACHE / "host-kernel-builder"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "matrix.toml").write_text(f"""
[project]
path = "{REPO / 'tests' / 'fixtures' / 'kb_relu'}"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
python = ["abi3"]

[build]
engine = "host"
""")
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build"], cwd=workdir, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    (entry,) = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"].values()
    return workdir / "dist" / entry["wheel"], entry, (workdir / "dist" / entry["log"]).read_text()


def test_the_wheel_holds_the_extension_under_its_namespace(built: tuple[Path, dict[str, object], str]) -> None:
    wheel, entry, log = built
    assert wheel.name.startswith("kb_relu-1+cputorch2.13-cp39-abi3-manylinux_")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        record = json.loads(archive.read("kb_relu/_build.json"))
    namespace = record["namespace"]
    assert {f"kb_relu/{namespace}.abi3.so", "kb_relu/_ops.py", "kb_relu/__init__.py"} <= names
    assert not any(n.startswith(("relu_cpu/", "torch-ext/", "tests/")) for n in names), names
    assert f"smoke: 1 op(s) with a CPU kernel under {namespace}: relu_scale" in log
    assert "3 passed" in log  # tests/test_relu_scale.py, against the installed wheel


def test_the_op_runs_from_the_wheel(built: tuple[Path, dict[str, object], str], tmp_path: Path) -> None:
    wheel, _, _ = built
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    code = ("import torch, kb_relu\nx = torch.randn(3, 5)\n"
            "torch.testing.assert_close(kb_relu.relu_scale(x, 0.5), torch.relu(x) * 0.5)\n"
            "print(kb_relu.ops.relu_scale.default.name())")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().startswith("_kb_relu_") and result.stdout.strip().endswith("::relu_scale")
