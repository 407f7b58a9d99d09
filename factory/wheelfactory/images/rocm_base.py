"""The image ``wheelfactory rocm-check`` compiles ROCm device code in: Debian's hipcc is installed
over a base of the matrix's, an x86_64 one (Debian ships hipcc for amd64 only)."""

from __future__ import annotations

from collections.abc import Callable

from wheelfactory.plan.build_config import BuildConfig

ROCM_CHECK_ARCH = "x86_64"


def rocm_check_base(build: BuildConfig, debian_base: Callable[[str, str], str]) -> str:
    """The matrix's offline Debian base for x86_64 where [build] names one (``debian_base(suite,
    arch)`` makes it, or finds it made), else its x86_64 ``base_image``."""
    if build.debian_base:
        return debian_base(build.debian_base, ROCM_CHECK_ARCH)
    return build.base_image(ROCM_CHECK_ARCH)
