"""The GPU half of the lean prebuilt check (``_prebuilt``): the visible GPUs, and whether a CUDA or
ROCm build's toolkit and arch list serve them.

Standard library only, and nothing of its own package: ``_prebuilt`` imports it only for a GPU
build in a torch of that backend (a CPU load never compiles this file), and ``_env.with_gpus``
probes through ``visible_gpus`` too. The rules repeat ``_fit``'s toolkit rule and
``_arch.CudaArch``; the tests of ``_prebuilt`` hold them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    # backend -> (CUDA compute capabilities, ROCm gfx names) of the visible GPUs
    Gpus = Callable[[str], tuple[Sequence[tuple[int, int]], Sequence[str]]]
    CudaArch = tuple[int, int, str, bool]  # major, minor, suffix "" | "a" | "f", +PTX

__all__ = ["gpu_build_fits", "visible_gpus"]


def visible_gpus(backend: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The visible GPUs' compute capabilities (CUDA) or gfx names (ROCm); initialises CUDA."""
    import torch

    capabilities: list[tuple[int, int]] = []
    names: list[str] = []
    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        if backend == "rocm":
            name = str(getattr(torch.cuda.get_device_properties(index), "gcnArchName", ""))
            names += [name.split(":", 1)[0]] if name else []
        else:
            major, minor = torch.cuda.get_device_capability(index)
            capabilities.append((major, minor))
    return capabilities, names


def gpu_build_fits(
    backend: str,
    built: tuple[int, int],
    arch_list: list[str],
    here: tuple[int, int],
    gpus: Gpus | None = None,
) -> bool:
    """Does a ``backend`` ("cuda" | "rocm") build with toolkit version ``built`` and ``arch_list``
    fit a torch of that backend and toolkit version ``here``, and the GPUs ``gpus(backend)`` finds
    (asked last)? True only where the full rule says so (``_fit.check_fit``,
    ``_record.decide_prebuilt``)."""
    # no binary compatibility across ROCm minors; gfx names as _record reads them
    if backend == "rocm":
        names = {a.partition(":")[0] for a in arch_list}
        if here != built or not all(_gfx(a) for a in arch_list):
            return False
        return not arch_list or all(g in names for g in (gpus or visible_gpus)(backend)[1])
    archs = [_cuda_arch(a) for a in arch_list]
    # CUDA: same major, minor no newer
    if here[0] != built[0] or here[1] < built[1] or None in archs:
        return False
    capabilities = (gpus or visible_gpus)(backend)[0]
    return not archs or all(
        any(a is not None and _serves(a, c) for a in archs) for c in capabilities
    )


def _cuda_arch(text: str) -> CudaArch | None:
    """``8.0``, ``9.0a``, ``10.0f``, ``12.0+PTX``, ``12.0+PTX-only``, as ``_arch.CudaArch.parse``
    reads them (PTX alone serves what PTX beside SASS serves: every GPU of this capability or newer)."""
    core, _, tail = text.partition("+")
    ptx = tail in ("PTX", "PTX-only")
    if tail and not ptx:
        return None
    suffix = core[-1:] if core[-1:] in ("a", "f") else ""
    major, dot, minor = core[: len(core) - len(suffix)].partition(".")
    if not (dot and _digits(major) and _digits(minor)):
        return None
    return int(major), int(minor), suffix, ptx


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()  # "\u0663" is a digit to str.isdigit and to int()


def _serves(arch: CudaArch, capability: tuple[int, int]) -> bool:
    """As ``_arch.CudaArch.serves``: does code built for ``arch`` run on a GPU of ``capability``?"""
    major, minor, suffix, ptx = arch
    if suffix == "a":
        return tuple(capability) == (major, minor)
    if capability[0] == major and capability[1] >= minor:
        return True
    return not suffix and ptx and tuple(capability) >= (major, minor)


def _gfx(text: str) -> bool:
    name = text.partition(":")[0]
    return (
        name[:3] == "gfx"
        and len(name) > 3
        and not name[3:].strip("0123456789abcdef")
        and "\n" not in text
    )
