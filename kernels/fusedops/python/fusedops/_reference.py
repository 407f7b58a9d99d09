"""Reference implementations of the fusedops ops in plain PyTorch.

Each function has the signature of the compiled op (out-parameters, returns None) and
the same numerics: half-precision inputs are computed in float32 and rounded once when
written. The tests compare the kernels against these, and the runtime calls them when
no compiled library is available.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["fused_add_rms_norm", "gelu_and_mul", "rms_norm", "silu_and_mul"]


def _split_gate_up(input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = input.shape[-1] // 2
    x = input.float()
    return x[..., :d], x[..., d:]


def _rms_normalize(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    x = x.float()
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + epsilon) * weight.float()


def silu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = silu(input[..., :d]) * input[..., d:], with d = input.shape[-1] // 2."""
    gate, up = _split_gate_up(input)
    out.copy_(F.silu(gate) * up)


def gelu_and_mul(out: torch.Tensor, input: torch.Tensor, approximate: str) -> None:
    """out = gelu(input[..., :d], approximate) * input[..., d:]; approximate is "none" or "tanh"."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_and_mul: approximate must be 'none' or 'tanh', got {approximate!r}")
    gate, up = _split_gate_up(input)
    out.copy_(F.gelu(gate, approximate=approximate) * up)


def rms_norm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    """out = input * rsqrt(mean(input^2, -1) + epsilon) * weight."""
    out.copy_(_rms_normalize(input, weight, epsilon))


def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> None:
    """In place: residual <- input + residual, then input <- rms_norm(residual) * weight.

    The sum is rounded to residual's dtype before the norm is taken, as the kernels do.
    """
    residual.copy_(input.float() + residual.float())
    input.copy_(_rms_normalize(residual, weight, epsilon))
