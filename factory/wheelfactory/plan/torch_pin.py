"""The torch requirement a variant's wheel declares (its ``Requires-Dist`` on torch).

Pure: computed from the Variant and matrix.toml's ``[build] torch_requirement``.

- ``"pinned"`` (the default): a wheel built for one torch release requires that release line,
  ``torch>=2.13,<2.14``. Local builds such as ``2.13.0+cpu`` satisfy it, 2.14 pre-releases and
  nightlies do not (PEP 440: ``<2.14`` excludes pre-releases of 2.14). A resolver then never pairs
  the wheel with another torch: ``pip install mykernels torch`` keeps torch on the wheel's line.
  A stable-ABI wheel serves every torch from its target on: ``torch>=2.10``.
- ``"unpinned"``: plain ``torch``, for projects that rely on the runtime's fallback: when torch
  moves, the runtime JIT-compiles the shipped sources or uses the reference ops.
"""

from __future__ import annotations

from typing import Literal

from wheelfactory.plan.identity import Variant
from wheelfactory.plan.versions import major_minor

TorchRequirement = Literal["pinned", "unpinned"]
TORCH_REQUIREMENTS: tuple[TorchRequirement, ...] = ("pinned", "unpinned")


def torch_requires_dist(variant: Variant, mode: TorchRequirement = "pinned") -> str:
    """The requirement on torch for ``variant``'s wheel: ``torch>=2.13,<2.14``, ``torch>=2.10``
    (stable ABI: ``variant.key.torch`` is the target) or ``torch`` (unpinned)."""
    if mode == "unpinned":
        return "torch"
    major, minor = major_minor(variant.key.torch)
    if variant.key.stable_abi:
        return f"torch>={major}.{minor}"
    return f"torch>={major}.{minor},<{major}.{minor + 1}"
