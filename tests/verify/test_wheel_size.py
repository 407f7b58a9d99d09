"""[build] wheel_size_limit's refusal: the wheel's size, the limit and what would fit, per backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.build_config import parse_size
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.matrix import Matrix
from wheelfactory.verify.wheel_size import over_limit


@pytest.mark.parametrize(("text", "size"), [("100 MB", 100_000_000), ("1 GiB", 1024**3), ("1.5kB", 1500),
                                            ("7 B", 7), ("0.5 MiB", 524288)])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["100", "MB", "-1 MB", "1e3 MB", "100 mb"])
def test_not_sizes(text: str) -> None:
    assert parse_size(text) is None


def test_the_limit_is_checked_in_matrix_toml(parse: Callable[[str], Matrix]) -> None:
    assert parse('[build]\nwheel_size_limit = "2 GiB"\n').build.wheel_size_limit == 2 * 1024**3
    assert parse("").build.wheel_size_limit == 100_000_000  # PyPI's default
    with pytest.raises(ConfigError, match="wheel_size_limit"):
        parse('[build]\nwheel_size_limit = "lots"\n')


def test_a_fat_cuda_wheel_is_told_to_split(plan_of: Callable[[str], Plan]) -> None:
    (variant,) = plan_of('[matrix]\ntorch = ["2.13"]\nbackends = ["cu130"]\n'
                         '[cuda]\narch_list = "8.0;9.0;12.0+PTX"\n').variants
    message = over_limit(variant, 240_000_000, 100_000_000)
    assert message is not None
    assert message.startswith(f"{variant.id}: the wheel is 240.0 MB (240000000 bytes), over [build] "
                              "wheel_size_limit 100.0 MB (100000000 bytes); what would fit: [cuda] split_archs = true: "
                              "4 wheels (sm80, sm90, sm120, ptx120)")
    assert "about 60.0 MB each" in message and "fewer archs" in message and "--compress-mode=size" in message
    assert over_limit(variant, 100_000_000, 100_000_000) is None


def test_a_cpu_wheel_is_not_told_about_gpus(plan_of: Callable[[str], Plan]) -> None:
    (variant,) = plan_of('[matrix]\ntorch = ["2.13"]\n').variants
    message = over_limit(variant, 200, 100)
    assert message is not None and "split_archs" not in message and "nvcc" not in message
    assert "raise wheel_size_limit" in message
