"""Parallel builds from cores, free memory, -j and --max-memory (factory/wheelfactory/engines/capacity.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import CliRunner
from wheelfactory.cli.main import cli
from wheelfactory.engines.capacity import GIB, parse_size, plan_capacity
from wheelfactory.errors import UsageError
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.identity import Variant

MATRIX = '[matrix]\ntorch = [">=2.12,<2.15"]\nbackends = ["cpu", "cuda"]\n'


@pytest.fixture
def variants(plan_of: Callable[[str], Plan]) -> tuple[Variant, ...]:
    return plan_of(MATRIX).variants


def cpu_only(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    return tuple(v for v in variants if v.key.backend.kind == "cpu")


def test_cores_and_memory_bound_the_default(variants: tuple[Variant, ...]) -> None:
    cpu = cpu_only(variants)
    assert plan_capacity("docker", variants, cpus=2, free_bytes=24 * GIB).jobs == 1
    wide = plan_capacity("docker", cpu, cpus=16, free_bytes=128 * GIB)
    assert len(cpu) == 3 and (wide.jobs, wide.bound) == (3, "cores")  # never more jobs than variants
    many = plan_capacity("docker", variants, cpus=16, free_bytes=128 * GIB)
    assert (many.jobs, many.bound, many.compile_jobs) == (8, "cores", 2)
    tight = plan_capacity("docker", variants, cpus=16, free_bytes=10 * GIB)
    assert (tight.jobs, tight.bound) == (2, "memory")  # CUDA builds: ~4 GiB each
    assert plan_capacity("docker", variants, cpus=16, free_bytes=1 * GIB).jobs == 1
    assert plan_capacity("host", variants, cpus=64, free_bytes=512 * GIB).jobs == 1


def test_cpu_builds_need_less_memory_than_cuda_ones(variants: tuple[Variant, ...]) -> None:
    cpu = plan_capacity("docker", cpu_only(variants), cpus=64, free_bytes=6 * GIB)
    cuda = plan_capacity("docker", variants, cpus=64, free_bytes=6 * GIB)
    assert cpu.jobs > cuda.jobs and cpu.bound == cuda.bound == "memory"


def test_max_memory_caps_jobs_and_limits_each_container(variants: tuple[Variant, ...]) -> None:
    capped = plan_capacity("docker", variants, cpus=16, free_bytes=128 * GIB, max_memory=8 * GIB)
    assert (capped.jobs, capped.bound, capped.container_memory) == (2, "--max-memory", 4 * GIB)
    assert capped.compile_jobs == 8
    explicit = plan_capacity("docker", variants, cpus=16, free_bytes=128 * GIB, requested_jobs=6, max_memory=8 * GIB)
    assert explicit.jobs == 2  # the cap holds against -j too
    roomy = plan_capacity("docker", variants, cpus=4, free_bytes=128 * GIB, max_memory=64 * GIB)
    assert roomy.bound == "cores" and roomy.container_memory == 32 * GIB
    small = plan_capacity("docker", variants, cpus=4, free_bytes=128 * GIB, max_memory=1 * GIB)
    assert small.jobs == 1 and "may be killed for memory" in small.describe()
    assert "--max-memory 8.0 GiB: each container limited to 4.0 GiB" in capped.describe()


@pytest.mark.parametrize(("text", "size"), [("8G", 8 * GIB), ("8GiB", 8 * GIB), ("512m", 512 << 20),
                                            ("1.5g", int(1.5 * GIB)), (str(2 * GIB), 2 * GIB)])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "8X", "-1G", "100M"])
def test_bad_sizes_say_what_to_write(text: str) -> None:
    with pytest.raises(UsageError, match="--max-memory"):
        parse_size(text)


def test_build_refuses_a_bad_max_memory_before_building(tmp_path: object) -> None:
    result = CliRunner().invoke(cli, ["build", "--max-memory", "lots", "-o", str(tmp_path)])
    assert isinstance(result.exception, UsageError) and "8G" in str(result.exception)
