"""fusedops: fused activation and normalisation ops for LLM inference.

The ops run the prebuilt library when it matches the installed torch, else a JIT build of the
shipped sources, else the reference PyTorch ops (with one warning); ``backend_info()`` says which
and why, ``python -m fusedops report`` prints the details. ``FUSEDOPS_LOAD=auto|prebuilt|jit|reference``
and ``FUSEDOPS_CACHE_DIR`` control the choice and the JIT cache. Nothing is loaded until the
first op call.
"""

from __future__ import annotations

import os

import torch

from ._runtime import KernelPackage

__all__ = ["backend_info", "fused_add_rms_norm", "gelu_and_mul", "rms_norm", "silu_and_mul"]

_package = KernelPackage(
    "fusedops",  # the distribution: FUSEDOPS_LOAD, the cache dir (the module may be imported under another name)
    os.path.dirname(os.path.abspath(__file__)),
    module=__name__,  # the op names come from kernel.toml, through the build record
)


def _gated_out(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2)) if out is None else out


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(x[..., :d]) * x[..., d:] with d = x.shape[-1] // 2; written to ``out`` when given."""
    out = _gated_out(x, out)
    _package.op("silu_and_mul")(out, x)
    return out


def gelu_and_mul(x: torch.Tensor, approximate: str = "none", out: torch.Tensor | None = None) -> torch.Tensor:
    """gelu(x[..., :d], approximate) * x[..., d:]; ``approximate`` is "none" or "tanh"."""
    out = _gated_out(x, out)
    _package.op("gelu_and_mul")(out, x, approximate)
    return out


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, epsilon: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """x * rsqrt(mean(x^2, -1) + epsilon) * weight."""
    out = torch.empty_like(x) if out is None else out
    _package.op("rms_norm")(out, x, weight, epsilon)
    return out


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float = 1e-6
) -> None:
    """In place: residual <- x + residual, then x <- rms_norm(residual, weight, epsilon)."""
    _package.op("fused_add_rms_norm")(x, residual, weight, epsilon)


def backend_info() -> dict[str, object]:
    """{"mode": "prebuilt"|"jit"|"reference", "variant", "library", "reason", "ops", "decisions", ...}."""
    return _package.backend_info()
