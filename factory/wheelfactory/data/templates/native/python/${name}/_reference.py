"""The ${name} ops in plain PyTorch: what the runtime calls when no compiled library can be loaded,
and what the tests and wheelfactory's verification compare the compiled ops with.

Each function has the op's name and the signature of its schema (csrc/registration.cpp):
out-parameters first, returning None, and the same numerics (float16 and bfloat16 computed in
float32, rounded once when written).
"""

from __future__ import annotations

import torch

__all__ = ["${op}"]


def ${op}(out: torch.Tensor, input: torch.Tensor, other: torch.Tensor, alpha: float) -> None:
    """out = input + alpha * other."""
    compute = torch.float64 if input.dtype == torch.float64 else torch.float32
    out.copy_(input.to(compute) + alpha * other.to(compute))
