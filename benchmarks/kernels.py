"""Benchmark the fusedops CPU kernels against the eager PyTorch a user would write.

    python benchmarks/kernels.py [--quick]

Builds the CPU library (or reuses the build the kernel tests cached: both build it with
tests/kernels/fusedops_build.py, from the factory's parse of kernel.toml), then times
each op at LLM shapes and prints milliseconds (median of several runs after warm-up), effective bandwidth
(bytes the op must read + write, divided by time) and the fused/eager speedup. A plain
tensor copy of the same input gives the machine's practical memory bandwidth.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: fusedops_build (no pytest)

from tests.kernels.fusedops_build import TEST_NAMESPACE, build_cpu_library  # noqa: E402


def build_library() -> Any:
    """The kernel tests' build (tests/kernels/fusedops_build.py), so the cache is shared."""
    build_cpu_library()
    return getattr(torch.ops, TEST_NAMESPACE)


def median_ms(fn: Callable[[], object], warmup: int, runs: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


@dataclass(frozen=True)
class Case:
    op: str
    dtype: torch.dtype
    shape: str
    nbytes: int  # bytes the op has to read and write at minimum
    fused: Callable[[], object]
    eager: Callable[[], object]


def rms_eager(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def make_cases(ops: Any, tokens: int, hidden: int, dtype: torch.dtype) -> list[Case]:
    g = torch.Generator().manual_seed(0)
    es = torch.empty((), dtype=dtype).element_size()
    eps = 1e-6
    shape = f"{tokens}x{hidden}"
    cases = []

    # *_and_mul: input [tokens, 2*hidden] -> out [tokens, hidden].
    gate_up = torch.randn(tokens, 2 * hidden, generator=g).to(dtype)
    out = torch.empty(tokens, hidden, dtype=dtype)
    d = hidden
    and_mul_bytes = 3 * tokens * hidden * es
    cases.append(
        Case(
            "silu_and_mul", dtype, shape, and_mul_bytes,
            lambda: ops.silu_and_mul(out, gate_up),
            lambda: F.silu(gate_up[..., :d]) * gate_up[..., d:],
        )
    )
    for approximate in ("none", "tanh"):
        cases.append(
            Case(
                f"gelu_and_mul[{approximate}]", dtype, shape, and_mul_bytes,
                lambda a=approximate: ops.gelu_and_mul(out, gate_up, a),
                lambda a=approximate: F.gelu(gate_up[..., :d], approximate=a) * gate_up[..., d:],
            )
        )

    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    w = torch.randn(hidden, generator=g).to(dtype)
    normed = torch.empty_like(x)
    cases.append(
        Case(
            "rms_norm", dtype, shape, (2 * tokens * hidden + hidden) * es,
            lambda: ops.rms_norm(normed, x, w, eps),
            lambda: rms_eager(x, w, eps),
        )
    )

    # In place: every call adds into the residual again; values stay finite over the runs.
    h = torch.randn(tokens, hidden, generator=g).to(dtype)
    res = torch.randn(tokens, hidden, generator=g).to(dtype)

    def fused_add_eager() -> None:
        res.add_(h)
        h.copy_(rms_eager(res, w, eps))

    cases.append(
        Case(
            "fused_add_rms_norm", dtype, shape, (4 * tokens * hidden + hidden) * es,
            lambda: ops.fused_add_rms_norm(h, res, w, eps),
            fused_add_eager,
        )
    )
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1024 tokens and fewer runs (a smoke run)")
    args = parser.parse_args(argv)

    tokens, hidden = (1024, 8192) if args.quick else (4096, 8192)
    warmup, runs = (1, 3) if args.quick else (2, 7)

    t0 = time.perf_counter()
    ops = build_library()
    print(f"library ready in {time.perf_counter() - t0:.1f} s (cached build when nothing changed)")
    print(
        f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"median of {runs} runs after {warmup} warm-up"
    )
    print("GB/s = (bytes the op must read + write) / time; speedup = eager ms / fused ms\n")

    header = (
        f"{'op':<22}{'dtype':<10}{'shape':<11}{'fused ms':>10}{'fused GB/s':>12}"
        f"{'eager ms':>10}{'eager GB/s':>12}{'speedup':>9}"
    )
    print(header)
    print("-" * len(header))
    with torch.inference_mode():
        for dtype in (torch.float32, torch.bfloat16):
            dname = str(dtype).removeprefix("torch.")
            src = torch.randn(tokens, 2 * hidden).to(dtype)
            dst = torch.empty_like(src)
            copy_ms = median_ms(lambda: dst.copy_(src), warmup, runs)
            copy_gbs = 2 * src.numel() * src.element_size() / copy_ms / 1e6
            del src, dst
            for case in make_cases(ops, tokens, hidden, dtype):
                fused_ms = median_ms(case.fused, warmup, runs)
                eager_ms = median_ms(case.eager, warmup, runs)
                print(
                    f"{case.op:<22}{dname:<10}{case.shape:<11}"
                    f"{fused_ms:>10.2f}{case.nbytes / fused_ms / 1e6:>12.1f}"
                    f"{eager_ms:>10.2f}{case.nbytes / eager_ms / 1e6:>12.1f}"
                    f"{eager_ms / fused_ms:>8.1f}x"
                )
            copy_shape = f"{tokens}x{2 * hidden}"
            print(f"{'copy (reference)':<22}{dname:<10}{copy_shape:<11}{copy_ms:>10.2f}{copy_gbs:>12.1f}")
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
