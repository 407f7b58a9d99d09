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
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.testkit import REPO, TEST_CACHE

# In the Docker lane of the CUDA torches, after the last of them is freed (test_docker_real_projects):
# its torch 2.14 venv (a CUDA build, ~5.5 GB) and theirs (~9 GB) are never on the disk together.
pytestmark = [pytest.mark.slow, pytest.mark.lane("docker-projects")]


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
    assert f"smoke: 1 op(s) serving CPU under {namespace}: relu_scale (CPU)" in log
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


# --------------------------------------------------------------------------------------------
# [torch] stable-abi: tests/fixtures/kb_stable targets torch 2.10 with the stable API only
# --------------------------------------------------------------------------------------------

STABLE_VARIANT = "torch-stable-abi210-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def stable_wheel() -> Path:
    workdir = TEST_CACHE / "host-kernel-builder-stable"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "matrix.toml").write_text(f'[project]\npath = "{REPO / "tests" / "fixtures" / "kb_stable"}"\n\n'
                                         '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = ["abi3"]\n\n'
                                         '[build]\nengine = "host"\n')
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build"], cwd=workdir, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    entries = json.loads((workdir / "dist" / "manifest.json").read_text())["variants"]
    assert list(entries) == [STABLE_VARIANT]  # build.toml's stable-abi made the matrix's variant a stable one
    log = (workdir / "dist" / entries[STABLE_VARIANT]["log"]).read_text()
    assert "1 passed" in log  # the project's tests/
    return workdir / "dist" / entries[STABLE_VARIANT]["wheel"]


def test_the_stable_build_uses_only_torchs_c_shim(stable_wheel: Path) -> None:
    import io

    from elftools.elf.elffile import ELFFile

    assert "+cputorch2.10stableabi-cp39-abi3-manylinux" in stable_wheel.name
    with zipfile.ZipFile(stable_wheel) as archive:
        record = json.loads(archive.read("kb_stable/_build.json"))
        library = archive.read(f"kb_stable/{record['namespace']}.abi3.so")
    assert record["stable_abi"] is True and record["torch"] == "2.10" and record["built_with_torch"] == "2.13.0"
    dynsym = ELFFile(io.BytesIO(library)).get_section_by_name(".dynsym")
    undefined = [s.name for s in dynsym.iter_symbols() if s["st_shndx"] == "SHN_UNDEF" and s.name]
    assert any(s.startswith(("aoti_torch_", "torch_")) for s in undefined), undefined[:10]
    cxx_api = [s for s in undefined if s.startswith(("_ZN2at", "_ZN3c10", "_ZN5torch"))]
    assert not cxx_api, cxx_api[:5]


def test_the_stable_wheel_runs_on_a_newer_torch(stable_wheel: Path, fresh_install: Callable[[str, Path], Path],
                                                venv_for: Callable[[str], Path]) -> None:
    site = fresh_install("2.14.1", stable_wheel)
    code = ("import torch, kb_stable\nx = torch.randn(5)\n"
            "torch.testing.assert_close(kb_stable.scale_copy(x, 2.0), x * 2)\nprint(torch.__version__)")
    result = subprocess.run([str(venv_for("2.14.1") / "bin" / "python"), "-c", code], cwd=site, capture_output=True,
                            text=True, timeout=600, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin",
                                                         "HOME": str(site)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().startswith("2.14.1")
