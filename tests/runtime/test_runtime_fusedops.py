"""The real fusedops package on top of the runtime: its public API and `python -m fusedops report`.

No compile here (the fixture kernel covers the compiled paths); the reference ops stand in.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.runtime import rt_assemble as rt
from wheelfactory.project.kernel_toml import load_kernel

pytestmark = pytest.mark.skipif(
    not (rt.FUSEDOPS_KERNEL / "python" / "fusedops" / "_reference.py").exists(),
    reason="kernels/fusedops/python/fusedops/_reference.py is not written yet",
)

API = r"""
import json, warnings
import torch
import fusedops
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x = torch.randn(3, 16)
    gate, up = x[:, :8], x[:, 8:]
    checks = {
        "silu": torch.allclose(fusedops.silu_and_mul(x), torch.nn.functional.silu(gate) * up, atol=1e-5),
        "gelu_tanh": torch.allclose(fusedops.gelu_and_mul(x, approximate="tanh"),
                                    torch.nn.functional.gelu(gate, approximate="tanh") * up, atol=1e-5),
        "out_is_returned": fusedops.silu_and_mul(x, out=torch.empty(3, 8)).shape == (3, 8),
    }
    w = torch.rand(16) + 0.5
    y = fusedops.rms_norm(x, w, epsilon=1e-5)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    checks["rms_norm"] = torch.allclose(y, expected, atol=1e-5)
    h, r = torch.randn(3, 16), torch.randn(3, 16)
    h0, r0 = h.clone(), r.clone()
    checks["fused_returns_none"] = fusedops.fused_add_rms_norm(h, r, w) is None
    checks["fused_residual"] = torch.allclose(r, h0 + r0, atol=1e-6)
    checks["fused_normed"] = torch.allclose(h, fusedops.rms_norm(h0 + r0, w), atol=1e-5)
    info = fusedops.backend_info()
print("RESULT " + json.dumps({"checks": checks, "info": info, "all": sorted(fusedops.__all__),
                              "warnings": [str(w.category.__name__) for w in caught]}))
"""


@pytest.fixture(scope="module")
def fusedops_parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("fusedops")
    rt.assemble(load_kernel(rt.FUSEDOPS_KERNEL), parent)
    return parent


def has_row(report: str, label: str, value: str) -> bool:
    """A report line ``<label> ..... <value>`` (dot leaders of any length)."""
    return re.search(rf"^\s*{re.escape(label)} \.+ {re.escape(value)}", report, re.MULTILINE) is not None


def run(code: str, parent: Path, **env: object) -> str:
    kernel = load_kernel(rt.FUSEDOPS_KERNEL)
    proc = rt.run_python(["-c", code], rt.child_env(kernel, parent, **env))  # type: ignore[arg-type]
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_public_api_on_the_reference_ops(fusedops_parent: Path, tmp_path: Path) -> None:
    import json

    out = run(API, fusedops_parent, cache_dir=tmp_path / "cache", load="reference")
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    assert all(result["checks"].values()), result["checks"]
    assert result["all"] == ["backend_info", "fused_add_rms_norm", "gelu_and_mul", "rms_norm", "silu_and_mul"]
    assert result["info"]["mode"] == "reference"
    assert set(result["info"]["ops"]) == {"silu_and_mul", "gelu_and_mul", "rms_norm", "fused_add_rms_norm"}
    assert "ReferenceFallbackWarning" not in result["warnings"]


def test_report_without_a_compiler(fusedops_parent: Path, tmp_path: Path) -> None:
    kernel = load_kernel(rt.FUSEDOPS_KERNEL)
    env = rt.child_env(kernel, fusedops_parent, cache_dir=tmp_path / "cache", no_compiler=tmp_path / "bin")
    proc = rt.run_python(["-m", "fusedops", "report"], env)
    assert proc.returncode == 0, proc.stderr
    report = proc.stdout
    assert report.splitlines()[1] == "fusedops report"
    for label, value in (
        ("package", "fusedops 0.1.0 at "),
        ("torch", "2."),
        ("torch CUDA", "none"),
        ("C++ ABI", "cxx11"),
        ("Python", "3."),
        ("machine", ""),
        ("GPU capabilities", "none (CPU-only torch)"),
        ("build record", "no build record (_build.json): a source-only install"),
        ("mode", "[WARN] reference"),
        ("silu_and_mul", "[WARN] reference"),
        ("fused_add_rms_norm", "[WARN] reference"),
        ("jit", "[ no ] no C++ compiler"),
        ("c++ compiler", "[FAIL] 'c++' not found on PATH"),
        ("ninja", "[FAIL] not found on PATH"),
        ("nvcc", ""),
        ("cache directory", f"{tmp_path / 'cache'} (from FUSEDOPS_CACHE_DIR)"),
        ("itself", "[OKAY]"),
        ("torch_extensions", "[OKAY]"),
    ):
        assert has_row(report, label, value), f"{label} ... {value} missing from:\n{report}"
    assert "ReferenceFallbackWarning" not in proc.stderr  # the report states the reason itself


def test_report_with_the_toolchain_and_usage(fusedops_parent: Path, tmp_path: Path) -> None:
    kernel = load_kernel(rt.FUSEDOPS_KERNEL)
    env = rt.child_env(kernel, fusedops_parent, cache_dir=tmp_path / "cache", load="reference")
    proc = rt.run_python(["-m", "fusedops", "report"], env)
    assert proc.returncode == 0, proc.stderr
    assert has_row(proc.stdout, "c++ compiler", "[OKAY]") and has_row(proc.stdout, "ninja", "[OKAY]")
    assert has_row(proc.stdout, "mode", "[WARN] reference") and has_row(
        proc.stdout, "reference", "[ yes] FUSEDOPS_LOAD=reference"
    )
    usage = rt.run_python(["-m", "fusedops"], env)
    assert usage.returncode == 2 and "report" in usage.stdout
    as_json = rt.run_python(["-m", "fusedops", "report", "--json"], env)
    assert as_json.returncode == 0 and '"mode": "reference"' in as_json.stdout
