"""Sample inputs for the factory's verification (kernel.toml ``sample_inputs``): each op runs on
these next to its reference in ``_reference`` and the results are compared. Small and CPU-only;
the float32 tolerance is the one tests/kernels uses."""

from __future__ import annotations

import torch

_FLOAT32 = {"rtol": 1e-5, "atol": 1e-5}


def sample_inputs() -> dict[str, list[dict[str, object]]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 2 * 33, generator=g)
    h = torch.randn(5, 48, generator=g)
    weight = torch.rand(48, generator=g) + 0.5
    return {
        "silu_and_mul": [{"args": (torch.empty(7, 33), x), **_FLOAT32}],
        "gelu_and_mul": [{"args": (torch.empty(7, 33), x, approximate), **_FLOAT32} for approximate in ("none", "tanh")],
        "rms_norm": [{"args": (torch.empty_like(h), h, weight, 1e-6), **_FLOAT32}],
        "fused_add_rms_norm": [{"args": (h.clone(), torch.randn(5, 48, generator=g), weight, 1e-6), **_FLOAT32}],
    }
