"""Version-like identities: ``MajorMinor`` and the device tag (``cpu``, ``cu130``, ``rocm62``).

One parser and one formatter each, round-tripping; parse failures raise ``InvalidVersion``
quoting the input. The major.minor reading is the fit rule's (``_fit.parse_major_minor``, which
must stay importable on its own: select.py embeds it). (``CudaArch`` lives in ``_arch``: only CUDA
paths need it.)
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ._errors import InvalidVersion
from ._fit import parse_major_minor

__all__ = ["BACKENDS", "Backend", "MajorMinor", "format_device_tag", "parse_device_tag"]

# "cpu" | "cuda" | "rocm": the backend a torch build or a kernel library targets.
Backend = str
BACKENDS: tuple[Backend, ...] = ("cpu", "cuda", "rocm")


class MajorMinor(NamedTuple):
    """The major.minor part of a version: what ABI compatibility is decided on.

    A NamedTuple: immutable, hashable, ordered like the version, and cheap to define (this module
    is imported inside the measured first op call).
    """

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> MajorMinor:
        """Accept ``2.13``, ``2.13.0+cpu``, ``2.14.0a0+git1234``, ``6.2.41133-dd7f95766``, ``13.0``."""
        try:
            return cls(*parse_major_minor(text))
        except ValueError as exc:
            raise InvalidVersion(str(exc)) from None

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def format_device_tag(backend: Backend, toolkit: MajorMinor | None) -> str:
    """``cpu`` | ``cu130`` | ``rocm62``: the minor version is the last digit, as in PyTorch's
    wheel tags (there is no CUDA or ROCm x.10 to tell apart)."""
    if backend not in BACKENDS:
        raise InvalidVersion(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    if (backend == "cpu") != (toolkit is None):
        raise InvalidVersion(
            f"backend {backend!r} with toolkit {toolkit}: cpu has no toolkit, GPUs need one"
        )
    if toolkit is None:
        return "cpu"
    if not 0 <= toolkit.minor <= 9:
        raise InvalidVersion(
            f"toolkit {toolkit} has a two-digit minor; a device tag cannot name it"
        )
    return f"{'cu' if backend == 'cuda' else 'rocm'}{toolkit.major}{toolkit.minor}"


def parse_device_tag(text: str) -> tuple[Backend, MajorMinor | None]:
    match = re.match(r"^(?:(cpu)|cu(\d+)(\d)|rocm(\d+)(\d))$", text)
    if match is None:
        raise InvalidVersion(f"not a device tag (cpu, cu<XY>, rocm<XY>): {text!r}")
    if match.group(1):
        return "cpu", None
    if match.group(2):
        return "cuda", MajorMinor(int(match.group(2)), int(match.group(3)))
    return "rocm", MajorMinor(int(match.group(4)), int(match.group(5)))
