"""Build engines: where a variant's wheel is compiled. Each engine satisfies ``Engine``."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from wheelfactory.plan.identity import Variant
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import Timeline


class Engine(Protocol):
    name: str

    def identity(self, variant: Variant) -> str:
        """What about the engine changes this variant's wheel (interpreter + torch, image id): in the cache key."""

    def image_id(self, variant: Variant) -> str | None:
        """The id of the image the variant builds in (None where no image is used)."""

    def use_capacity(self, compile_jobs: int, container_memory: int | None) -> None:
        """Parallel compiles inside one build (MAX_JOBS) and the memory limit of one build's
        container (None: unlimited), from factory/engines/capacity.py."""

    def reclaim(self) -> list[str]:
        """Remove what a killed run on the same output left running (containers); their names."""

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> Path:
        """Build, repair and check one variant; return the finished wheel (inside ``workdir``).
        Each step runs as a phase of ``timeline`` (its seconds go to the manifest; at least one
        phase is ``compile``, the build backend's run)."""
