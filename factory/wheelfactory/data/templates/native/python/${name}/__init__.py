"""${name}: PyTorch ops in C++ and CUDA.

The ops run the prebuilt library when it matches the installed torch, else a JIT build of the
shipped sources, else the reference PyTorch ops (with one warning); ``backend_info()`` says which
and why, ``python -m ${name} report`` prints the details. ``${prefix}_LOAD=auto|prebuilt|jit|reference``
and ``${prefix}_CACHE_DIR`` control the choice and the JIT cache. Nothing is loaded until the
first op call.
"""

from __future__ import annotations

import os

import torch

# Not in the source tree: wheelfactory vendors its runtime into the package as _runtime when it
# builds a wheel. So this package is used (and tested) installed from a wheel, never from here.
from ._runtime import KernelPackage

__all__ = ["${op}", "backend_info"]

# The op names are kernel.toml's [kernel] ops, which the build record (_build.json) carries.
_package = KernelPackage("${name}", os.path.dirname(os.path.abspath(__file__)), module=__name__)


def ${op}(
    input: torch.Tensor, other: torch.Tensor, alpha: float = 1.0, out: torch.Tensor | None = None
) -> torch.Tensor:
    """input + alpha * other, elementwise (same shape, dtype and device); written to ``out`` when given."""
    out = torch.empty(input.shape, dtype=input.dtype, device=input.device) if out is None else out
    _package.op("${op}")(out, input, other, alpha)
    return out


def backend_info() -> dict[str, object]:
    """{"mode": "prebuilt"|"jit"|"reference", "variant", "library", "reason", "ops", "decisions", ...}."""
    return _package.backend_info()
