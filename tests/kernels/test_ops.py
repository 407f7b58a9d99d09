"""The fusedops CPU kernels against the plain-PyTorch reference, plus argument checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from torch.utils import cpp_extension

if TYPE_CHECKING:
    from wheelfactory.project.kernel_toml import KernelSpec

Ref = types.ModuleType  # python/fusedops/_reference.py
Case = tuple[tuple[int, ...], int]  # (leading shape, last dim)

DTYPES = [torch.float32, torch.bfloat16, torch.float16]

# Kernels and reference both compute in fp32; for half types they may still round to
# neighbouring values, so allow one ulp of the storage type.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.bfloat16: {"atol": 1e-5, "rtol": 2e-2},
    torch.float16: {"atol": 1e-5, "rtol": 2e-3},
}

# Leading shape + last dim (hidden size, or d for the *_and_mul outputs). Odd sizes
# leave vector tails; 4097 is one past a multiple of every vector width and of the
# 512-element staging block the half-precision CPU paths use.
SHAPE_CASES = [
    ((), 8),
    ((), 17),
    ((4,), 17),
    ((4,), 64),
    ((2, 3), 64),
    ((2, 3), 17),
    ((3,), 4097),
    ((2,), 8192),
]


def shape_id(case: Case) -> str:
    lead, hidden = case
    return "x".join(str(s) for s in (*lead, hidden))


def randn(*shape: int, dtype: torch.dtype, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, **TOLERANCES[expected.dtype], equal_nan=True)


# --- schemas -------------------------------------------------------------------------

EXPECTED_SCHEMAS = {
    "silu_and_mul": "silu_and_mul(Tensor(a!) out, Tensor input) -> ()",
    "gelu_and_mul": "gelu_and_mul(Tensor(a!) out, Tensor input, str approximate) -> ()",
    "rms_norm": "rms_norm(Tensor(a!) out, Tensor input, Tensor weight, float epsilon) -> ()",
    "fused_add_rms_norm": (
        "fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float epsilon) -> ()"
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_SCHEMAS))
def test_schema(ops: Any, ops_namespace: str, name: str) -> None:
    schema = str(getattr(ops, name).default._schema)
    assert schema == f"{ops_namespace}::{EXPECTED_SCHEMAS[name]}"


# --- values against the reference ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", SHAPE_CASES, ids=shape_id)
def test_silu_and_mul(ops: Any, ref: Ref, case: Case, dtype: torch.dtype) -> None:
    lead, d = case
    x = randn(*lead, 2 * d, dtype=dtype, scale=3.0)
    out = torch.empty(*lead, d, dtype=dtype)
    expected = torch.empty_like(out)
    ops.silu_and_mul(out, x)
    ref.silu_and_mul(expected, x)
    assert_close(out, expected)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", SHAPE_CASES, ids=shape_id)
def test_gelu_and_mul(ops: Any, ref: Ref, case: Case, dtype: torch.dtype, approximate: str) -> None:
    lead, d = case
    x = randn(*lead, 2 * d, dtype=dtype, scale=3.0)
    out = torch.empty(*lead, d, dtype=dtype)
    expected = torch.empty_like(out)
    ops.gelu_and_mul(out, x, approximate)
    ref.gelu_and_mul(expected, x, approximate)
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", SHAPE_CASES, ids=shape_id)
def test_rms_norm(ops: Any, ref: Ref, case: Case, dtype: torch.dtype) -> None:
    lead, hidden = case
    x = randn(*lead, hidden, dtype=dtype, seed=1, scale=2.0)
    w = randn(hidden, dtype=dtype, seed=2)
    out = torch.empty_like(x)
    expected = torch.empty_like(x)
    ops.rms_norm(out, x, w, 1e-6)
    ref.rms_norm(expected, x, w, 1e-6)
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", SHAPE_CASES, ids=shape_id)
def test_fused_add_rms_norm(ops: Any, ref: Ref, case: Case, dtype: torch.dtype) -> None:
    lead, hidden = case
    x = randn(*lead, hidden, dtype=dtype, seed=3)
    r = randn(*lead, hidden, dtype=dtype, seed=4, scale=4.0)
    w = randn(hidden, dtype=dtype, seed=5)
    x_ref, r_ref = x.clone(), r.clone()
    x_ptr, r_ptr = x.data_ptr(), r.data_ptr()

    ops.fused_add_rms_norm(x, r, w, 1e-5)
    ref.fused_add_rms_norm(x_ref, r_ref, w, 1e-5)

    assert (x.data_ptr(), r.data_ptr()) == (x_ptr, r_ptr)
    assert_close(r, r_ref)
    assert_close(x, x_ref)


def test_fused_add_rms_norm_updates_both_in_place(ops: Any) -> None:
    x = randn(4, 64, dtype=torch.float32, seed=6)
    r = randn(4, 64, dtype=torch.float32, seed=7)
    w = torch.ones(64)
    x0, r0 = x.clone(), r.clone()
    ops.fused_add_rms_norm(x, r, w, 1e-6)
    torch.testing.assert_close(r, x0 + r0)
    s = x0 + r0
    torch.testing.assert_close(x, s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_in_place(ops: Any, ref: Ref, dtype: torch.dtype) -> None:
    # out may alias input: each element is read before it is written.
    x = randn(3, 4097, dtype=dtype, seed=8)
    w = randn(4097, dtype=dtype, seed=9)
    expected = torch.empty_like(x)
    ref.rms_norm(expected, x, w, 1e-6)
    ops.rms_norm(x, x, w, 1e-6)
    assert_close(x, expected)


@pytest.mark.parametrize("op", ["silu", "gelu_none", "gelu_tanh"])
def test_activation_special_values(ops: Any, ref: Ref, op: str) -> None:
    gate = torch.tensor(
        [float("nan"), 0.0, -0.0, 1e-30, -1e-30, 80.0, -80.0, 88.5, -88.5, 100.0, -100.0, 1e4, -1e4, 3e38, -3e38]
    )
    if op == "gelu_none":
        # torch's exact gelu forms x * (1 + erf(x / sqrt 2)) before halving on some CPU paths (AVX-512:
        # gelu(3e38) = inf, AVX2: 3e38), so above FLT_MAX / 2 the reference itself depends on the CPU.
        gate = gate.clamp(-1e38, 1e38)
    x = torch.cat([gate, torch.full_like(gate, 0.5)])
    out, expected = torch.empty_like(gate), torch.empty_like(gate)
    if op == "silu":
        ops.silu_and_mul(out, x)
        ref.silu_and_mul(expected, x)
    else:
        approximate = op.removeprefix("gelu_")
        ops.gelu_and_mul(out, x, approximate)
        ref.gelu_and_mul(expected, x, approximate)
    assert_close(out, expected)


# --- layouts: strided rows are supported, a strided last dim is rejected ------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_and_mul_strided_rows(ops: Any, ref: Ref, dtype: torch.dtype) -> None:
    d = 33
    buf = randn(5, 2 * d + 7, dtype=dtype, seed=10)
    x = buf[:, 3 : 3 + 2 * d]  # row stride 2d+7, offset start
    out_buf = torch.zeros(5, d + 5, dtype=dtype)
    out = out_buf[:, 1 : 1 + d]
    expected = torch.empty(5, d, dtype=dtype)
    ops.silu_and_mul(out, x)
    ref.silu_and_mul(expected, x)
    assert_close(out, expected)
    # Nothing outside the view was written.
    assert torch.count_nonzero(out_buf[:, 0]) == 0
    assert torch.count_nonzero(out_buf[:, 1 + d :]) == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_strided_rows(ops: Any, ref: Ref, dtype: torch.dtype) -> None:
    # A 3-D view whose leading dims flatten to one row stride: every other row of a
    # wider buffer, e.g. the q slice of a fused qkv projection.
    hidden = 40
    buf = randn(2, 6, hidden + 24, dtype=dtype, seed=11)
    x = buf[:, ::2, :hidden]
    assert not x.is_contiguous()
    w = randn(hidden, dtype=dtype, seed=12)
    out = torch.empty_like(x)
    expected = torch.empty(x.shape, dtype=dtype)
    ops.rms_norm(out, x, w, 1e-6)
    ref.rms_norm(expected, x, w, 1e-6)
    assert_close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_add_rms_norm_strided_rows(ops: Any, ref: Ref, dtype: torch.dtype) -> None:
    hidden = 24
    x_buf = randn(4, hidden + 8, dtype=dtype, seed=13)
    r_buf = randn(4, 2 * hidden, dtype=dtype, seed=14)
    x, r = x_buf[:, :hidden], r_buf[:, hidden:]
    w = randn(hidden, dtype=dtype, seed=15)
    x_ref, r_ref = x.clone(), r.clone()
    untouched = x_buf[:, hidden:].clone(), r_buf[:, :hidden].clone()
    ops.fused_add_rms_norm(x, r, w, 1e-6)
    ref.fused_add_rms_norm(x_ref, r_ref, w, 1e-6)
    assert_close(r, r_ref)
    assert_close(x, x_ref)
    assert torch.equal(x_buf[:, hidden:], untouched[0])
    assert torch.equal(r_buf[:, :hidden], untouched[1])


def test_rms_norm_broadcast_input_rows(ops: Any, ref: Ref) -> None:
    # Rows with stride 0 are fine to read (only written tensors must not overlap).
    x = randn(1, 16, dtype=torch.float32, seed=16).expand(3, 16)
    w = randn(16, dtype=torch.float32, seed=17)
    out, expected = torch.empty(3, 16), torch.empty(3, 16)
    ops.rms_norm(out, x, w, 1e-6)
    ref.rms_norm(expected, x, w, 1e-6)
    assert_close(out, expected)


def test_strided_last_dim_is_rejected(ops: Any) -> None:
    x = torch.randn(4, 32)[:, ::2]
    w = torch.ones(16)
    msg = "fusedops::{}: the last dimension of {} must be contiguous"
    with pytest.raises(RuntimeError, match=msg.format("rms_norm", "input")):
        ops.rms_norm(torch.empty(4, 16), x, w, 1e-6)
    with pytest.raises(RuntimeError, match=msg.format("silu_and_mul", "input")):
        ops.silu_and_mul(torch.empty(4, 8), x)
    with pytest.raises(RuntimeError, match=msg.format("silu_and_mul", "out")):
        ops.silu_and_mul(torch.empty(16, 4).t(), torch.randn(4, 32))


def test_unflattenable_rows_are_rejected(ops: Any) -> None:
    x = torch.randn(4, 6, 8)[:, :3, :]  # rows 8 apart inside a block, blocks 48 apart
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: the rows of input must be evenly spaced"):
        ops.rms_norm(torch.empty(4, 3, 8), x, torch.ones(8), 1e-6)


def test_overlapping_output_rows_are_rejected(ops: Any) -> None:
    out = torch.empty(1, 8).expand(3, 8)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: out is written to but its rows overlap"):
        ops.rms_norm(out, torch.randn(3, 8), torch.ones(8), 1e-6)


# --- argument errors ---------------------------------------------------------------------


def test_and_mul_odd_last_dim(ops: Any) -> None:
    with pytest.raises(RuntimeError, match=r"fusedops::silu_and_mul: the last dim of input must be even"):
        ops.silu_and_mul(torch.empty(4, 3), torch.randn(4, 7))


def test_and_mul_out_shape(ops: Any) -> None:
    with pytest.raises(RuntimeError, match=r"fusedops::gelu_and_mul: out must have shape \[4, 8\]"):
        ops.gelu_and_mul(torch.empty(4, 16), torch.randn(4, 16), "none")
    with pytest.raises(RuntimeError, match=r"fusedops::silu_and_mul: out must have shape \[2, 3, 4\]"):
        ops.silu_and_mul(torch.empty(6, 4), torch.randn(2, 3, 8))


def test_and_mul_dtypes(ops: Any) -> None:
    with pytest.raises(
        RuntimeError,
        match=r"fusedops::silu_and_mul: out and input must have the same dtype, "
        r"got out bfloat16 and input float32",
    ):
        ops.silu_and_mul(torch.empty(4, 8, dtype=torch.bfloat16), torch.randn(4, 16))
    with pytest.raises(RuntimeError, match=r"fusedops::silu_and_mul: unsupported dtype float64 for input"):
        ops.silu_and_mul(torch.empty(4, 8, dtype=torch.float64), torch.randn(4, 16, dtype=torch.float64))


def test_gelu_approximate_value(ops: Any) -> None:
    with pytest.raises(
        RuntimeError, match=r"fusedops::gelu_and_mul: approximate must be 'none' or 'tanh', got 'erf'"
    ):
        ops.gelu_and_mul(torch.empty(4, 8), torch.randn(4, 16), "erf")


def test_rms_norm_errors(ops: Any) -> None:
    x = torch.randn(4, 16)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: weight must be 1-D with 16 elements"):
        ops.rms_norm(torch.empty_like(x), x, torch.ones(8), 1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: out must have the same shape as input"):
        ops.rms_norm(torch.empty(4, 8), x, torch.ones(16), 1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: weight and input must have the same dtype"):
        ops.rms_norm(torch.empty_like(x), x, torch.ones(16, dtype=torch.float16), 1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: weight must be contiguous"):
        ops.rms_norm(torch.empty_like(x), x, torch.ones(32)[::2], 1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops::rms_norm: input must have at least one dimension"):
        ops.rms_norm(torch.empty(()), torch.tensor(1.0), torch.ones(1), 1e-6)


def test_fused_add_rms_norm_errors(ops: Any) -> None:
    x = torch.randn(4, 16)
    with pytest.raises(
        RuntimeError, match=r"fusedops::fused_add_rms_norm: residual must have the same shape as input"
    ):
        ops.fused_add_rms_norm(x, torch.randn(4, 8), torch.ones(16), 1e-6)
    with pytest.raises(
        RuntimeError, match=r"fusedops::fused_add_rms_norm: residual and input must have the same dtype"
    ):
        ops.fused_add_rms_norm(x, torch.randn(4, 16, dtype=torch.bfloat16), torch.ones(16), 1e-6)


def test_fused_add_rms_norm_same_tensor(ops: Any) -> None:
    x = torch.randn(4, 16)
    with pytest.raises(RuntimeError, match=r"fused_add_rms_norm: input and residual must be different"):
        ops.fused_add_rms_norm(x, x, torch.ones(16), 1e-6)


def test_device_mismatch(ops: Any) -> None:
    # A meta tensor routes the call to the Meta kernel, which runs the same checks.
    x = torch.randn(4, 16)
    with pytest.raises(
        RuntimeError,
        match=r"fusedops::rms_norm: all tensors must be on the same device, got out on meta and input on cpu",
    ):
        ops.rms_norm(torch.empty(4, 16, device="meta"), x, torch.ones(16), 1e-6)
    with pytest.raises(
        RuntimeError,
        match=r"fusedops::silu_and_mul: all tensors must be on the same device"
        r", got out on cpu and input on meta",
    ):
        ops.silu_and_mul(torch.empty(4, 8), torch.empty(4, 16, device="meta"))


def test_meta_tensors(ops: Any) -> None:
    # Meta kernels validate without computing, so shapes can be traced.
    x = torch.empty(2, 3, 16, device="meta", dtype=torch.bfloat16)
    ops.silu_and_mul(torch.empty(2, 3, 8, device="meta", dtype=torch.bfloat16), x)
    ops.fused_add_rms_norm(x, torch.empty_like(x), torch.empty(16, device="meta", dtype=torch.bfloat16), 1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops::gelu_and_mul: out must have shape"):
        ops.gelu_and_mul(torch.empty(2, 3, 16, device="meta", dtype=torch.bfloat16), x, "tanh")


def test_empty_inputs(ops: Any) -> None:
    ops.silu_and_mul(torch.empty(0, 8), torch.empty(0, 16))
    ops.rms_norm(torch.empty(0, 8), torch.empty(0, 8), torch.ones(8), 1e-6)
    ops.fused_add_rms_norm(torch.empty(3, 0), torch.empty(3, 0), torch.ones(0), 1e-6)


# --- property tests --------------------------------------------------------------------

# 2 x 25 examples of at most a few thousand elements: a second or two in all.
_PROPERTY_SETTINGS = settings(max_examples=25, deadline=None)


@_PROPERTY_SETTINGS
@given(
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    hidden=st.integers(1, 300),
    eps=st.floats(1e-8, 1e-1),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_rms_norm_property(
    ops: Any, ref: Ref, lead: list[int], hidden: int, eps: float, dtype: torch.dtype, seed: int
) -> None:
    x = randn(*lead, hidden, dtype=dtype, seed=seed, scale=3.0)
    w = randn(hidden, dtype=dtype, seed=seed + 1)
    out, expected = torch.empty_like(x), torch.empty_like(x)
    ops.rms_norm(out, x, w, eps)
    ref.rms_norm(expected, x, w, eps)
    assert_close(out, expected)


@_PROPERTY_SETTINGS
@given(
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    d=st.integers(1, 300),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_silu_and_mul_property(
    ops: Any, ref: Ref, lead: list[int], d: int, dtype: torch.dtype, seed: int
) -> None:
    x = randn(*lead, 2 * d, dtype=dtype, seed=seed, scale=4.0)
    out, expected = torch.empty(*lead, d, dtype=dtype), torch.empty(*lead, d, dtype=dtype)
    ops.silu_and_mul(out, x)
    ref.silu_and_mul(expected, x)
    assert_close(out, expected)


# --- the baseline-ISA code path -----------------------------------------------------------

_BASELINE_SCRIPT = r"""
import importlib.util, json, sys
import torch
lib, ref_path, ns = sys.argv[1:4]
torch.ops.load_library(lib)
spec = importlib.util.spec_from_file_location("ref", ref_path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
ops = getattr(torch.ops, ns)
tol = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1e-5, 2e-2), torch.float16: (1e-5, 2e-3)}
failures = []
for dtype, (atol, rtol) in tol.items():
    g = torch.Generator().manual_seed(0)
    for lead, h in [((), 17), ((3,), 4097), ((2, 2), 64)]:
        x = (torch.randn(*lead, 2 * h, generator=g) * 3).to(dtype)
        w = torch.randn(h, generator=g).to(dtype)
        cases = []
        for name, args in [("silu_and_mul", ()), ("gelu_and_mul", ("none",)), ("gelu_and_mul", ("tanh",))]:
            out, exp = torch.empty(*lead, h, dtype=dtype), torch.empty(*lead, h, dtype=dtype)
            getattr(ops, name)(out, x, *args)
            getattr(ref, name)(exp, x, *args)
            cases.append((name, out, exp))
        y = x[..., :h].contiguous()
        out, exp = torch.empty_like(y), torch.empty_like(y)
        ops.rms_norm(out, y, w, 1e-6)
        ref.rms_norm(exp, y, w, 1e-6)
        cases.append(("rms_norm", out, exp))
        a, b = y.clone(), x[..., h:].contiguous()
        a2, b2 = a.clone(), b.clone()
        ops.fused_add_rms_norm(a, b, w, 1e-6)
        ref.fused_add_rms_norm(a2, b2, w, 1e-6)
        cases += [("fused_add_rms_norm.input", a, a2), ("fused_add_rms_norm.residual", b, b2)]
        for name, got, exp in cases:
            if not torch.allclose(got.float(), exp.float(), atol=atol, rtol=rtol):
                failures.append(f"{name} {dtype} {tuple(got.shape)}")
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "failures": failures}))
"""


def test_baseline_isa_path(fusedops_library: Path, kernel_dir: Path, ops_namespace: str) -> None:
    """ATEN_CPU_CAPABILITY=default sends the kernels down their non-AVX2 code path."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    ref_path = kernel_dir / "python" / "fusedops" / "_reference.py"
    proc = subprocess.run(
        [sys.executable, "-c", _BASELINE_SCRIPT, str(fusedops_library), str(ref_path), ops_namespace],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["capability"] == "DEFAULT"
    assert result["failures"] == []


# --- opt-in: the CUDA sources compile with nvcc ------------------------------------------


ARCHS = (80, 90)


def _nvcc_command(kernel: KernelSpec, source: Path, obj: Path, std: str) -> list[str]:
    """nvcc on one .cu as the factory's CUDA recipe compiles it: kernel.toml's include dirs and
    [flags].nvcc, the namespace macro, and what torch.utils.cpp_extension adds."""
    includes = [*cpp_extension.include_paths(), *(str(kernel.root / p) for p in kernel.include_dirs)]
    return [
        os.environ.get("NVCC", "nvcc"),
        "-c",
        str(source),
        "-o",
        str(obj),
        *(f"-I{p}" for p in includes),
        f"-D{kernel.namespace_macro}=_fusedops_cuda_compile_test",
        # A CPU-only torch wheel lacks the generated c10/cuda/impl/cuda_cmake_macros.h;
        # it only holds Windows DLL settings, so skipping it is harmless here.
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",
        # What torch.utils.cpp_extension passes to nvcc for every extension.
        "-D__CUDA_NO_HALF_OPERATORS__",
        "-D__CUDA_NO_HALF_CONVERSIONS__",
        "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
        "-D__CUDA_NO_HALF2_OPERATORS__",
        f"-std={std}",
        *kernel.nvcc_flags,
        "-Xcompiler",
        "-fPIC",
        *(f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS),
    ]


def _cubin_archs(obj: Path) -> set[int]:
    """SM versions of the device ELF images nvcc embedded (uncompressed) in a host object."""
    data = obj.read_bytes()
    archs = set()
    at = data.find(b"\x7fELF", 1)  # offset 0 is the host object itself
    while at >= 0:
        (flags,) = struct.unpack_from("<I", data, at + 48)  # ELF64 e_flags
        # CUDA < 13 keeps the SM in the low byte of e_flags, CUDA 13 in the next one.
        archs.add(flags & 0xFF if flags & 0xFF >= 20 else (flags >> 8) & 0xFF)
        at = data.find(b"\x7fELF", at + 4)
    return archs


def _listed_archs(obj: Path) -> set[int] | None:
    """SM versions cuobjdump lists (it reads compressed images too); None without cuobjdump."""
    nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
    beside = Path(nvcc).with_name("cuobjdump") if nvcc else None
    tool = str(beside) if beside is not None and beside.is_file() else shutil.which("cuobjdump")
    if tool is None:
        return None
    proc = subprocess.run([tool, "--list-elf", str(obj)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return {int(sm) for sm in re.findall(r"\.sm_(\d+)", proc.stdout)}


# torch.utils.cpp_extension builds with C++20 on current torch (torch 2.14's headers need
# it) and C++17 on older releases; the sources must compile as both.
@pytest.mark.cuda_compile
@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_cuda_source_compiles(
    cuda_source: Path, std: str, kernel: KernelSpec, test_cache_dir: Path
) -> None:
    out_dir = test_cache_dir / "fusedops_cuda_objects"
    out_dir.mkdir(parents=True, exist_ok=True)
    obj = out_dir / f"{cuda_source.stem}-{std}.o"
    start = time.monotonic()
    cmd = _nvcc_command(kernel, cuda_source, obj, std)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"nvcc failed after {time.monotonic() - start:.0f} s:\n{proc.stderr[-4000:]}"
    if cuda_source.suffix != ".cu":  # the torch side: host C++ with CUDA's headers (nvcc hands it on)
        return
    archs = _cubin_archs(obj) or _listed_archs(obj)
    if archs is None:
        pytest.skip(f"the device images in {obj.name} are compressed and there is no cuobjdump to list them")
    assert archs == set(ARCHS), f"device images for sm_{sorted(archs)}, wanted sm_{list(ARCHS)}"
