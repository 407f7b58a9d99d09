"""Build engines: where a variant's wheel is compiled. Each engine satisfies ``Engine``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from wheelfactory.plan.identity import Variant
from wheelfactory.project.stage import Stage
from wheelfactory.support.timeline import Timeline


@dataclass(frozen=True)
class BuildInputs:
    """What one build consumed besides the project: the provenance record's dependencies
    (runner/provenance.py)."""

    engine: str  # docker, host
    interpreter: str  # cp311-cp311 in an image; the host interpreter's path
    image: str | None = None  # the build image's id (sha256:...); None on the host
    image_tag: str | None = None
    # (file name, sha256): the wheel set torch and the tools came from
    wheels: tuple[tuple[str, str], ...] = ()
    # (name, version) of what drove the build from outside it
    tools: tuple[tuple[str, str], ...] = ()


class Engine(Protocol):
    @property
    def name(self) -> str:
        """docker, host: what the summary and the manifest call it."""

    def identity(self, variant: Variant) -> str:
        """What about the engine changes this variant's wheel (interpreter + torch, image id): in the cache key."""

    def image_id(self, variant: Variant) -> str | None:
        """The id of the image the variant builds in (None where no image is used)."""

    def with_capacity(self, compile_jobs: int, container_memory: int | None) -> Engine:
        """The same engine with parallel compiles inside one build (MAX_JOBS) and the memory limit
        of one build's container (None: unlimited), from engines/capacity.py."""

    def reclaim(self) -> list[str]:
        """Remove what a killed run on the same output left running (containers); their names."""

    def build_inputs(self, variant: Variant) -> BuildInputs | None:
        """What the variant's last build in this run consumed (None: it was not built here)."""

    def build(self, stage: Stage, workdir: Path, log: Path, timeline: Timeline) -> Path:
        """Build, repair and check one variant; return the finished wheel (inside ``workdir``).
        Each step runs as a phase of ``timeline`` (its seconds go to the manifest; at least one
        phase is ``compile``, the build backend's run)."""
