"""docs/add-an-op.md, followed step by step on a fresh `wheelfactory new mykernels` project: each
`<!-- step: ... -->` comment names a file and what to do with the code block under it. The result
builds with the host engine (its own tests, the page's new one among them, pass in the build) and
the new op, called from the installed wheel, returns the reference op's result.

Slow tier: one C++ build (the host engine, this interpreter's torch 2.13 CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import ADD_AN_OP_PAGE as PAGE
from tests.testkit import add_an_op_steps as steps
from tests.testkit import follow_add_an_op, pip_install

pytestmark = pytest.mark.slow

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def test_the_page_has_every_step_a_new_op_needs() -> None:
    touched = {(m["action"], m["path"]) for m in steps()}
    for needed in ("kernel.toml", "csrc/mykernels.h", "csrc/registration.cpp", "csrc/cpu/relu_squared.cpp",
                   "csrc/cuda/relu_squared.cu", "python/mykernels/_reference.py", "python/mykernels/__init__.py",
                   "python/mykernels/_samples.py", "tests/test_relu_squared.py"):
        assert any(path == needed for _, path in touched), needed


def test_following_the_page_builds_an_op_that_returns_the_reference_result(tmp_path: Path) -> None:
    project = tmp_path / "mykernels"
    subprocess.run([sys.executable, "-m", "wheelfactory", "new", "mykernels", "--path", str(project)], check=True,
                   capture_output=True, timeout=120)
    follow_add_an_op(project)
    out = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "--engine", "host", "--only", VARIANT,
                            "-o", str(out)], cwd=project, capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-3000:]
    entry = json.loads((out / "manifest.json").read_text())["variants"][VARIANT]
    assert entry["tests"]["passed"] and entry["tests"]["counts"]["passed"] >= 2, entry["tests"]
    site = tmp_path / "site"
    pip_install(sys.executable, "-q", "--no-deps", "--target", str(site), str(out / entry["wheel"]), timeout=300)
    code = ("import json, torch, mykernels; from mykernels import _reference\n"
            "x = torch.tensor([-1.0, 3.0, 0.5])\n"
            "expected = torch.empty_like(x); _reference.relu_squared(expected, x)\n"
            "print(json.dumps({'got': mykernels.relu_squared(x).tolist(), 'expected': expected.tolist(),"
            " 'mode': mykernels.backend_info()['mode']}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(site), "MYKERNELS_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"got": [0.0, 9.0, 0.25], "expected": [0.0, 9.0, 0.25], "mode": "prebuilt"}, result
    assert "tensor([0., 9.])" in PAGE.read_text()  # what the page says the last command prints
