"""``CudaArch``: one entry of a CUDA arch list, and which GPUs its code runs on.

Imported only where CUDA archs matter (CUDA records, CUDA JIT builds, the toolkit checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import InvalidArch
from ._versions import MajorMinor

__all__ = ["CudaArch"]

_CUDA_ARCH = re.compile(r"^\s*(\d+)\.(\d+)([af]?)(\+PTX(-only)?)?\s*$")


@dataclass(frozen=True, order=True)
class CudaArch:
    """One entry of an arch list: ``8.0``, ``9.0a``, ``10.0f``, ``12.0+PTX``, ``12.0+PTX-only``.

    ``suffix`` "a" is architecture-specific code (only that exact GPU), "f" family-specific
    code (same major, equal or newer minor); ``ptx`` adds forward-compatible PTX. ``+PTX-only``
    (``sass`` false): the PTX without the SASS, the PTX wheel of a split build.
    """

    major: int
    minor: int
    suffix: str = ""
    ptx: bool = False
    sass: bool = True

    def __post_init__(self) -> None:
        if self.suffix not in ("", "a", "f"):
            raise InvalidArch(f"unknown CUDA arch suffix {self.suffix!r}")

    @classmethod
    def parse(cls, text: str) -> CudaArch:
        match = _CUDA_ARCH.match(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidArch(f"not a CUDA arch (like 8.0, 9.0a, 12.0+PTX): {text!r}")
        return cls(
            int(match.group(1)),
            int(match.group(2)),
            match.group(3),
            bool(match.group(4)),
            not match.group(5),
        )

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}{'+PTX' if self.ptx else ''}{'' if self.sass else '-only'}"

    @property
    def capability(self) -> MajorMinor:
        return MajorMinor(self.major, self.minor)

    @property
    def sm(self) -> str:
        return f"{self.major}{self.minor}{self.suffix}"

    def serves(self, capability: MajorMinor) -> bool:
        """Whether code built for this entry runs on a GPU of ``capability``."""
        own = self.capability
        if self.suffix == "a":
            # sm_90a uses instructions only that exact chip has; its PTX is not portable either.
            return capability == own
        if self.suffix == "f":
            return capability.major == own.major and capability.minor >= own.minor
        if capability.major == own.major and capability.minor >= own.minor:
            return True  # SASS runs on the same major with an equal or newer minor
        return self.ptx and capability >= own  # the driver JIT-compiles PTX for newer GPUs

    def gencode_flags(self) -> list[str]:
        flags = [f"-gencode=arch=compute_{self.sm},code=sm_{self.sm}"] if self.sass else []
        if self.ptx:
            flags.append(f"-gencode=arch=compute_{self.sm},code=compute_{self.sm}")
        return flags
