"""Sample inputs (kernel.toml: sample_inputs = "_samples:sample_inputs"). wheelfactory runs each
built wheel's ops on clones of these next to the reference ops, and compares every tensor argument
after the call and the return values.
"""

from __future__ import annotations

import torch


def sample_inputs() -> dict[str, list[tuple[object, ...]]]:
    """{op name: [the op's arguments in schema order, ...]}: small CPU tensors, the same on every call."""
    generator = torch.Generator().manual_seed(0)

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=generator).to(dtype)

    ${op} = [(torch.zeros(4, 33, dtype=dtype), randn(4, 33, dtype=dtype), randn(4, 33, dtype=dtype), 0.5)
            for dtype in (torch.float32, torch.float16, torch.bfloat16)]
    ${op}.append((torch.zeros(4, 33), randn(33, 4).t(), randn(4, 33), -2.0))  # a strided input
    ${op}.append((torch.zeros(0, 8), torch.zeros(0, 8), torch.zeros(0, 8), 1.0))  # no elements
    return {"${op}": ${op}}
