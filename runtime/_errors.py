"""One tree of errors and the one warning the runtime emits.

Parse failures are ``ValueError`` subclasses that quote the offending text; load failures carry
the decision record so the user sees why every candidate was rejected.
"""

from __future__ import annotations

__all__ = [
    "InvalidArch",
    "InvalidVersion",
    "JitUnavailable",
    "KernelLoadError",
    "RecordError",
    "ReferenceFallbackWarning",
    "RuntimeLoaderError",
    "SettingsError",
    "UnsafeCacheDirError",
]


class RuntimeLoaderError(Exception):
    """Base class of every error the vendored runtime raises on purpose."""


class InvalidVersion(RuntimeLoaderError, ValueError):
    """A version string (torch, CUDA, ROCm, Python, nvcc output) could not be parsed."""


class InvalidArch(RuntimeLoaderError, ValueError):
    """A CUDA architecture string such as ``9.0a`` or ``12.0+PTX`` could not be parsed."""


class RecordError(RuntimeLoaderError, ValueError):
    """A build record (``_build.json``) or JIT spec (``_sources/jit.json``) is unusable."""


class SettingsError(RuntimeLoaderError, ValueError):
    """An environment variable read by the runtime has a value it does not understand."""


class UnsafeCacheDirError(RuntimeLoaderError, PermissionError):
    """The JIT cache directory could let another user plant a library we would load."""


class JitUnavailable(RuntimeLoaderError):
    """JIT compilation cannot be done here; ``reason`` says why and ``fix`` how to change that."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason if not fix else f"{reason}. {fix}")
        self.reason = reason
        self.fix = fix


class KernelLoadError(RuntimeLoaderError, ImportError):
    """A forced load mode (``<PKG>_LOAD=prebuilt|jit``) could not be satisfied."""


class ReferenceFallbackWarning(RuntimeWarning):
    """Emitted once per process when a kernel package falls back to its reference ops."""
