"""Release lines: the major.minor of a version (a torch release, a CUDA or ROCm toolkit, a glibc),
read in one place, with packaging's ``Version`` (InvalidVersion, a ValueError quoting the text,
for anything PEP 440 refuses). The runtime, which may use the standard library only, has its own
(``_runtime._versions.MajorMinor``)."""

from __future__ import annotations

import re

from packaging.version import Version

# The text of a release line and nothing else: "2.10", "13.0" (not "2.10.1", "v2.10", "2.10rc1").
RELEASE_LINE = re.compile(r"[0-9]+\.[0-9]+", re.ASCII)


def major_minor(version: str) -> tuple[int, int]:
    """``"2.14.1"`` -> ``(2, 14)``; ``"6.2.4"`` -> ``(6, 2)``; ``"13"`` -> ``(13, 0)``."""
    release = Version(version).release
    return release[0], release[1] if len(release) > 1 else 0


def minor_of(version: str) -> str:
    """``"2.14.1"`` -> ``"2.14"``; ``"6.2.4"`` -> ``"6.2"``: the release line it belongs to."""
    major, minor = major_minor(version)
    return f"{major}.{minor}"


def target_version_macro(torch: str) -> str:
    """``"2.10"`` -> ``0x020a000000000000``: torch's encoding of TORCH_TARGET_VERSION."""
    major, minor = major_minor(torch)
    return f"0x{major:02x}{minor:02x}000000000000"
