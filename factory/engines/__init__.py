"""Build engines: where a variant's wheel is compiled. Each engine satisfies ``Engine``."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..stage import Stage
from ..variant import Variant


class Engine(Protocol):
    name: str

    def identity(self, variant: Variant) -> str:
        """What about the engine changes this variant's wheel (interpreter + torch, image id): in the cache key."""

    def image_id(self, variant: Variant) -> str | None:
        """The id of the image the variant builds in (None where no image is used)."""

    def build(self, stage: Stage, workdir: Path, log: Path) -> Path:
        """Build, repair and check one variant; return the finished wheel (inside ``workdir``)."""
