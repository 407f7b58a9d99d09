"""[build] wheel_size_limit: a wheel over it fails its variant, saying its size, the limit and what
would fit. An index refuses a file over its limit only at upload, after every build of the
release is done; PyPI's default is 100 MB per file (more only on request, 1 GiB at most)."""

from __future__ import annotations

from wheelfactory.plan.identity import Variant, split_arch_list
from wheelfactory.project.stage import Target


def megabytes(size: int) -> str:
    return f"{size / 1000**2:.1f} MB" if size >= 100_000 else f"{size} bytes"


def over_limit(target: Target, size: int, limit: int) -> str | None:
    """None when ``size`` fits ``limit``; else the one-line refusal with what would fit (for a
    planned variant, the settings that make its wheels smaller)."""
    if size <= limit:
        return None
    fits = _smaller(target, size) if isinstance(target, Variant) else []
    fits.append(
        "or raise wheel_size_limit where the index takes bigger files (PyPI: on request, 1 GiB at most)"
    )
    return (
        f"{target.id}: the wheel is {megabytes(size)} ({size} bytes), over [build] wheel_size_limit "
        f"{megabytes(limit)} ({limit} bytes); what would fit: {'; '.join(fits)}"
    )


def _smaller(variant: Variant, size: int) -> list[str]:
    """What makes a variant's wheel smaller: fewer archs, or one wheel per arch."""
    fits = []
    parts = (
        split_arch_list(variant.arch_list)
        if variant.key.backend.kind == "cuda" and not variant.key.gpu
        else ()
    )
    if len(parts) > 1:
        fits.append(
            f"[cuda] split_archs = true: {len(parts)} wheels ({', '.join(p.tag for p in parts)}), each with "
            f"one arch's device code, about {megabytes(size // len(parts))} each where device code dominates"
        )
    if variant.key.backend.kind == "cuda" and len(variant.arch_list) > 1:
        fits.append(f"fewer archs in [cuda] arch_list (now {';'.join(variant.arch_list)})")
    if variant.key.backend.kind == "cuda":
        fits.append("nvcc's --compress-mode=size (CUDA 12.8+) in extra_cuda_cflags")
    return fits
