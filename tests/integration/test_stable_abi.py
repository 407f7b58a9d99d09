"""One stable-ABI wheel, built once with the host engine against torch 2.13 (TORCH_TARGET_VERSION
2.10), loads prebuilt on torch 2.13 and on torch 2.14 and passes the op checks on both."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.testkit import REPO

VARIANT = "torch-stable-abi210-cpu-x86_64-linux"
# In the Docker lane of the CUDA torches, after the last of them is freed (test_docker_real_projects):
# its torch 2.14 venv (a CUDA build, ~5.5 GB) and theirs (~9 GB) are never on the disk together.
pytestmark = [pytest.mark.slow, pytest.mark.lane("docker-projects")]
# torch 2.14's venv (~5.5 GB) goes after this module, the last of its lane that loads on it
MODULE_VENVS = ("2.14.1",)

OPS_CHECK = r"""
import json, torch, fusedops
from fusedops import _reference as ref
torch.manual_seed(0)
for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
    for rows, d in ((1, 1), (7, 33), (64, 257)):
        x = torch.randn(rows, 2 * d, dtype=dtype)
        out = fusedops.silu_and_mul(x); e = torch.empty_like(out); ref.silu_and_mul(e, x)
        torch.testing.assert_close(out, e, rtol=tol, atol=tol)
        for approx in ("none", "tanh"):
            out = fusedops.gelu_and_mul(x, approx); ref.gelu_and_mul(e, x, approx)
            torch.testing.assert_close(out, e, rtol=tol, atol=tol)
        y, w, r = torch.randn(rows, d, dtype=dtype), torch.randn(d, dtype=dtype), torch.randn(rows, d, dtype=dtype)
        o = fusedops.rms_norm(y, w, 1e-6); eo = torch.empty_like(y); ref.rms_norm(eo, y, w, 1e-6)
        torch.testing.assert_close(o, eo, rtol=tol, atol=tol)
        y2, r2 = y.clone(), r.clone()
        fusedops.fused_add_rms_norm(y, r, w, 1e-6); ref.fused_add_rms_norm(y2, r2, w, 1e-6)
        torch.testing.assert_close(r, r2, rtol=tol, atol=tol); torch.testing.assert_close(y, y2, rtol=tol, atol=tol)
info = fusedops.backend_info()
print(json.dumps({"torch": torch.__version__, "mode": info["mode"], "variant": info["variant"]}))
"""


@pytest.fixture(scope="module")
def stable_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("stable")
    (work / "matrix.toml").write_text(f'[project]\npath = "{REPO / "kernels" / "fusedops"}"\n[matrix]\n'
                                      'torch = ["2.13", "2.14"]\nbackends = ["cpu"]\nstable_abi = "2.10"\n'
                                      '[build]\nengine = "host"\n')
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build"], cwd=work, capture_output=True, text=True,
                            timeout=1800, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    entry = json.loads((work / "dist" / "manifest.json").read_text())["variants"][VARIANT]
    return work / "dist" / entry["wheel"]


def test_the_wheel_is_built_from_the_stable_sources_for_the_target(stable_wheel: Path) -> None:
    assert "+cputorch2.10stableabi-cp39-abi3-manylinux_" in stable_wheel.name
    with zipfile.ZipFile(stable_wheel) as archive:
        record = json.loads(archive.read("fusedops/_build.json"))
        library = archive.read("fusedops/_C.abi3.so")
    assert record["stable_abi"] is True and record["torch"] == "2.10" and record["built_with_torch"] == "2.13.0"
    needed = undefined_symbols(library)
    assert any(s.startswith("aoti_torch_") for s in needed)  # torch's C shim ...
    cxx_api = [s for s in needed if s.startswith(("_ZN2at", "_ZN3c10", "_ZN5torch"))]
    assert not cxx_api, cxx_api[:5]  # ... and none of libtorch's C++ API, which changes every release


def undefined_symbols(library: bytes) -> list[str]:
    import io

    from elftools.elf.elffile import ELFFile

    dynsym = ELFFile(io.BytesIO(library)).get_section_by_name(".dynsym")
    return [s.name for s in dynsym.iter_symbols() if s["st_shndx"] == "SHN_UNDEF" and s.name]


@pytest.mark.parametrize("torch_version", ["2.13.0", "2.14.1"])
def test_one_wheel_loads_prebuilt_and_passes_the_ops_on_two_torch_releases(
        stable_wheel: Path, torch_version: str, fresh_install: Callable[[str, Path], Path],
        venv_for: Callable[[str], Path]) -> None:
    site = fresh_install(torch_version, stable_wheel)
    result = subprocess.run([str(venv_for(torch_version) / "bin" / "python"), "-c", OPS_CHECK], cwd=site,
                            capture_output=True, text=True, timeout=600, check=False,
                            env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(site)})
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["torch"].startswith(torch_version) and loaded["mode"] == "prebuilt" and loaded["variant"] == VARIANT


def test_a_stable_source_that_calls_aten_is_refused_before_the_wheel_lands(tmp_path: Path) -> None:
    """A copy of the sample whose stable source calls at::Tensor::numel (declared by hand, as a
    slip would bring it in): the build compiles, then verification refuses the wheel, naming the
    C++ function, before the smoke test ever loads it; nothing lands in dist/."""
    project = tmp_path / "fusedops"
    shutil.copytree(REPO / "kernels" / "fusedops", project, ignore=shutil.ignore_patterns("__pycache__"))
    ops = project / "csrc" / "stable" / "ops.cpp"
    text = ops.read_text()
    rows = "int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? 1 : t.numel() / t.size(t.dim() - 1); }"
    assert text.count(rows) == 1 and text.count("namespace {") >= 1
    text = text.replace("namespace {", "namespace at { class Tensor { public: int64_t numel() const; }; }\n\n"
                                       "namespace {", 1)
    ops.write_text(text.replace(rows, "int64_t rows_of(const Tensor& t) { return t.dim() == 0 ? 1 : "
                                      "reinterpret_cast<const at::Tensor*>(&t)->numel() / t.size(t.dim() - 1); }"))
    (tmp_path / "matrix.toml").write_text(f'[project]\npath = "{project}"\n[matrix]\ntorch = ["2.13"]\n'
                                          'backends = ["cpu"]\nstable_abi = "2.10"\n[build]\nengine = "host"\n')
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "build"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=1800, check=False)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    said = result.stdout + result.stderr
    assert "imports at::Tensor::numel() const (_ZNK2at6Tensor5numelEv), which is not in torch's stable ABI" in said
    assert not list((tmp_path / "dist").glob("*/*.whl"))
