"""How many variants build at once, and with how much memory each: pure, from the machine's
cores and free memory, the variants' kinds, ``-j`` and ``--max-memory``.

A CPU compile of a kernel takes a few hundred MB per compiler process; nvcc takes several GB
(device code for 6-7 archs). Running more containers than memory allows does not build faster:
it swaps or gets killed by the OOM killer mid-compile. So the default ``-j`` is bounded by both
cores and free memory, and ``--max-memory`` caps the whole run: fewer jobs, and each container
gets an equal share as its memory limit (docker ``--memory``), so one runaway build cannot take
the machine down.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from wheelfactory.errors import UsageError
from wheelfactory.plan.identity import Variant

GIB = 1 << 30
# Memory one build container needs, by backend kind (peak of a parallel compile of our kernels).
PER_BUILD = {"cpu": 2 * GIB, "cuda": 4 * GIB, "rocm": 4 * GIB}
CORES_PER_BUILD = 2  # one build's own compiles run in parallel too (MAX_JOBS)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``8G``, ``8GiB``, ``512M``, ``1.5g``, a plain number of bytes."""
    found = _SIZE.match(text) if len(text) <= 40 else None
    if not found:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise UsageError(f"--max-memory {shown!r} is not a size: use e.g. 8G, 16GiB or 512M")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": GIB, "t": 1 << 40}[found.group(2).lower()]
    size = (
        int(float(found.group(1)) * scale) if float(found.group(1)) * scale < 1 << 62 else 1 << 62
    )
    if size < 256 << 20:
        raise UsageError(f"--max-memory {text!r} is below 256 MiB: no compile fits in it")
    return size


def free_memory() -> int:
    """Available memory (MemAvailable: free plus what the kernel can reclaim), in bytes."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Capacity:
    jobs: int  # variants built at once
    compile_jobs: int  # parallel compiles inside one build (MAX_JOBS)
    container_memory: int | None  # per-container limit (bytes) under --max-memory, else None
    cpus: int
    free_bytes: int
    per_build: int  # the memory one build is expected to need
    bound: str  # what decided jobs: "cores", "memory", "--max-memory", "-j", "host engine"
    max_memory: int | None = None

    def describe(self) -> str:
        text = (
            f"-j {self.jobs} ({self.bound}): {self.cpus} cores, {_gib(self.free_bytes)} free, "
            f"~{_gib(self.per_build)} per build, {self.compile_jobs} compile job(s) each"
        )
        if self.max_memory is not None:
            text += f"; --max-memory {_gib(self.max_memory)}"
            if self.container_memory is not None:
                text += f": each container limited to {_gib(self.container_memory)}"
            if self.max_memory < self.per_build:
                text += " (below what one build needs: it may be killed for memory)"
        return text


def _gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def plan_capacity(
    engine_name: str,
    variants: Sequence[Variant],
    *,
    cpus: int,
    free_bytes: int,
    requested_jobs: int | None = None,
    max_memory: int | None = None,
) -> Capacity:
    kinds = {v.key.backend.kind for v in variants} or {"cpu"}
    per_build = max(PER_BUILD.get(kind, PER_BUILD["cuda"]) for kind in kinds)
    if engine_name == "host":  # one variant: the host interpreter's torch
        jobs, bound = 1, "host engine"
    elif requested_jobs:
        jobs, bound = requested_jobs, "-j"
    else:
        by_cores = max(1, cpus // CORES_PER_BUILD)
        by_memory = max(1, free_bytes // per_build)
        jobs, bound = (by_cores, "cores") if by_cores <= by_memory else (by_memory, "memory")
    if max_memory is not None:
        by_cap = max(1, max_memory // per_build)
        if by_cap < jobs:
            jobs, bound = by_cap, "--max-memory"
    jobs = max(1, min(jobs, len(variants) or 1))
    container_memory = (
        max_memory // jobs if max_memory is not None and engine_name != "host" else None
    )
    return Capacity(
        jobs=jobs,
        compile_jobs=max(1, cpus // jobs),
        container_memory=container_memory,
        cpus=cpus,
        free_bytes=free_bytes,
        per_build=per_build,
        bound=bound,
        max_memory=max_memory,
    )


def machine_capacity(
    engine_name: str,
    variants: Sequence[Variant],
    *,
    requested_jobs: int | None = None,
    max_memory: int | None = None,
) -> Capacity:
    return plan_capacity(
        engine_name,
        variants,
        cpus=os.cpu_count() or 1,
        free_bytes=free_memory(),
        requested_jobs=requested_jobs,
        max_memory=max_memory,
    )
