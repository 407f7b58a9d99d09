"""A Hugging Face kernel-builder project (tests/fixtures/kb_relu: build.toml, a CPU and a CUDA unit
of one op, a Metal unit, its own tests/) built in Docker from the unedited tree, for real:

- the conforming route: Debian bullseye (GCC 10), torch 2.5 and 2.6, CPU: two wheels whose op
  matches the reference (the project's tests ran against each installed wheel), exported into the
  Hub layout with every library passing kernel-abi-check, and loaded by the real `kernels` package
  (``get_local_kernel``) in a venv with torch 2.6;
- CUDA 13.2 (torch 2.15, on the bookworm base the CUDA tier shares): the library holds exactly the
  unit's ``cuda-capabilities`` (8.0, 9.0), not the matrix's arch_list; its export is refused with
  the checker's finding (bookworm's libstdc++ needs GLIBC 2.32).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from importlib.metadata import version
from pathlib import Path

import pytest
from tests.docker.docker_helpers import LEAN, make_shared, manifest, prepared_torch_env
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE, pip_install

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]
MODULE_TORCHES = frozenset({("2.5", "3.9"), ("2.6", "3.9")})  # bullseye's Python: this module's alone

CACHE = TEST_CACHE
PROJECT = REPO / "tests" / "fixtures" / "kb_relu"
CPU_VARIANTS = ("torch25-cxx98-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux")
CUDA_VARIANT = "torch215-cxx11-cu132-x86_64-linux"


def run(command: list[str], *, ok: bool = True, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False, **kwargs)  # type: ignore[call-overload]
    if ok:
        assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result  # type: ignore[no-any-return]


CONFORMING = SharedBuild("docker-kb-conforming", PROJECT, """[matrix]
torch = ["2.5", "2.6"]
backends = ["cpu"]
python = ["abi3"]
cxx11_abi = false   # PyPI's builds of 2.5 and 2.6 (the PyTorch index is unreachable here)
""", build_table=f"""[build]
engine = "docker"
debian_base = "bullseye"   # GCC 10, glibc 2.31: libraries within manylinux_2_28, as the Hub requires
torch_index = "pypi"
wheelhouse = "{CACHE / 'wheelhouse'}"
compile_cache_dir = "{CACHE / 'sccache'}"
""")
KB_CUDA = SharedBuild("docker-kb-cuda", PROJECT, """[matrix]
torch = ["2.15"]
backends = ["cu132"]
python = ["abi3"]

[cuda]
arch_list = "12.0"   # the unit's cuda-capabilities (8.0, 9.0) replace it
""")


@pytest.fixture(scope="module")
def conforming_build() -> Path:
    return make_shared(CONFORMING)


@pytest.fixture(scope="module")
def cuda_build(offline_build_tables: str) -> Path:
    return make_shared(KB_CUDA, offline_build_tables)


def wheel_of(workdir: Path, variant: str) -> tuple[Path, dict[str, object], str]:
    entry = manifest(workdir / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    return workdir / "dist" / str(entry["wheel"]), entry, (workdir / "dist" / str(entry["log"])).read_text()


def test_cpu_wheels_build_for_two_torch_releases_and_pass_the_projects_tests(conforming_build: Path) -> None:
    namespaces = set()
    for variant in CPU_VARIANTS:
        wheel, entry, log = wheel_of(conforming_build, variant)
        label = variant.split("-")[0].replace("torch2", "torch2.")
        assert wheel.name.startswith(f"kb_relu-1+cpu{label}cxx98-cp39-abi3-manylinux"), wheel.name
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            record = json.loads(archive.read("kb_relu/_build.json"))
            ops_py = archive.read("kb_relu/_ops.py").decode()
            metadata = HeaderParser().parsestr(archive.read(next(n for n in names if n.endswith("METADATA"))).decode())
        namespace = str(record["namespace"])
        namespaces.add(namespace)
        # the extension is named by its unique op namespace, and _ops.py imports it as kernel-builder's does
        assert f"kb_relu/{namespace}.abi3.so" in names and f"from . import {namespace}" in ops_py
        torch = str(entry["torch_version"]).rsplit(".", 1)[0]
        assert metadata.get_all("Requires-Dist") == [f"torch<{torch[:2]}{int(torch[2:]) + 1},>={torch}"]
        assert f"smoke: 1 op(s) serving CPU under {namespace}: relu_scale (CPU)" in log
        assert "3 passed" in log  # the project's own tests/, against the installed wheel
    assert len(namespaces) == 2


def test_the_plan_prunes_what_build_toml_rules_out(conforming_build: Path) -> None:
    result = run([sys.executable, "-m", "wheelfactory", "plan", "--format", "json"], cwd=conforming_build)
    plan = json.loads(result.stdout)
    assert [v["id"] for v in plan["variants"]] == list(CPU_VARIANTS)
    reasons = [p["reason"] for p in plan["pruned"]]
    assert any("declares metal" in r for r in reasons), reasons


@pytest.fixture(scope="module")
def loader(docker_build: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The real `kernels` package in a venv of its own, and torch 2.6 for this interpreter: the
    prepared environment the sample's Docker build made for it (on PYTHONPATH, as build containers
    use it), else installed into the venv. Sharing that environment saves ~5 GB of disk (a CUDA
    torch and its nvidia-* wheels) while this module's other torches are on disk too."""
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    prepared = prepared_torch_env(CACHE / "wheelhouse", "2.6.0", f"{tag}-{tag}")
    venv = CACHE / "venvs" / "kb-loader"
    # which torch the venv was made for: one made to borrow an environment since collected lacks torch
    made_for = str(prepared) if prepared else "torch==2.6.0"
    marker = venv / ".complete"
    if not marker.exists() or marker.read_text() != made_for:
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(venv)])
        # the kernels release this suite is tested with (its loader's signature changes between releases)
        torch = [] if prepared else ["torch==2.6.0"]
        pip_install(venv / "bin" / "python", "-q", *torch, f"kernels=={version('kernels')}")
        marker.write_text(made_for)
    yield venv / "bin" / "python", ({"PYTHONPATH": str(prepared)} if prepared else {})
    if LEAN:
        shutil.rmtree(venv, ignore_errors=True)


def test_the_hub_export_passes_kernel_abi_check_and_loads_with_kernels(
        conforming_build: Path, loader: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    layout = tmp_path / "hub"
    result = run([sys.executable, "-m", "wheelfactory", "export", "-o", str(conforming_build / "dist"),
                  "--hf-layout", str(layout)])
    assert sorted(p.name for p in (layout / "build").iterdir()) == sorted(CPU_VARIANTS), result.stdout
    for variant in CPU_VARIANTS:
        from kernel_abi_check import ObjectFile  # the Hub's checker, again, on what was written

        libraries = list((layout / "build" / variant / "kb_relu").glob("_kb_relu_*.abi3.so"))
        assert len(libraries) == 1
        assert not ObjectFile(str(libraries[0])).check_manylinux("manylinux_2_28")
        assert not ObjectFile(str(libraries[0])).check_python_abi("3.9")
    code = ("import json, torch; from pathlib import Path; from kernels import get_local_kernel\n"
            f"m = get_local_kernel(Path({str(layout)!r}), backend='cpu')\n"
            "x = torch.randn(4, 9)\n"
            "torch.testing.assert_close(m.relu_scale(x, 2.0), torch.relu(x) * 2.0)\n"
            "print(json.dumps({'module': m.__name__, 'file': m.__file__}))\n")
    python, torch_path = loader
    loaded = run([str(python), "-c", code], env={**os.environ, **torch_path, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    found = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert "torch26-cxx98-cpu-x86_64-linux" in found["file"], found


def test_cuda_wheel_holds_exactly_the_units_capabilities(cuda_build: Path) -> None:
    wheel, _, log = wheel_of(cuda_build, CUDA_VARIANT)
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(archive.read("kb_relu/_build.json"))
    assert record["arch_list"] == ["8.0", "9.0"]
    assert f"# cuobjdump kb_relu/{record['namespace']}.abi3.so: sm_80, sm_90 (asked: sm_80, sm_90)" in log
    assert f"smoke: 1 op(s) serving CUDA under {record['namespace']}: relu_scale (CUDA)" in log


def test_a_non_conforming_export_is_refused_with_the_checkers_finding(cuda_build: Path, tmp_path: Path) -> None:
    layout = tmp_path / "hub"
    result = run([sys.executable, "-m", "wheelfactory", "export", "-o", str(cuda_build / "dist"),
                  "--hf-layout", str(layout)], ok=False)
    assert result.returncode == 7, result.stdout + result.stderr
    text = " ".join((result.stdout + result.stderr).split())
    assert f"refused {CUDA_VARIANT}" in text and "GLIBC_2.3" in text, text
    assert not (layout / "build" / CUDA_VARIANT).exists()
