"""The torch wheel an index served, against the variant's build: a CPU build for a CUDA variant
is refused before anything compiles, naming the wheel and what to do (torch's own error would be
"CUDA_HOME environment variable is not set")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wheelfactory.engines.torch_builds import torch_build_mismatch
from wheelfactory.plan.expand import Plan

WHEELS = {
    "cpu": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    "cu130": "torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
    "cu126": "torch-2.13.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl",
    "pypi": "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
}


@pytest.mark.parametrize(("backend", "served", "refused"), [
    ("cu130", "cpu", "served torch-2.13.0+cpu, the CPU build, for this cu130 variant"),
    ("cu130", "cu126", "served torch-2.13.0+cu126, the cu126 build, for this cu130 variant"),
    ("cu130", "cu130", None),
    ("cu130", "pypi", None),  # PyPI's default build carries no label
    ("cpu", "cu130", None),  # CPU ops compile against any build of the release
])
def test_the_served_torch_build_must_be_the_variants(plan_of: Callable[[str], Plan], backend: str, served: str,
                                                      refused: str | None) -> None:
    (variant,) = plan_of(f'[matrix]\ntorch = ["2.13"]\nbackends = ["{backend}"]\n').variants
    message = torch_build_mismatch(variant, ((WHEELS[served], "0" * 64), ("ninja-1.11.whl", "1" * 64)),
                                   "the host's pip index")
    if refused is None:
        assert message is None
    else:
        assert message is not None and refused in message and "torch_index" in message, message
