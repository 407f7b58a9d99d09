"""Whether a torch index serves a variant's own torch build: refused before the wheelhouse is filled
where [build] torch_index is PyPI and PyPI has another build (``pypi_refusal``), and checked again
on the wheel the index served (``torch_build_mismatch``)."""

from __future__ import annotations

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from wheelfactory.plan.compat import TorchRelease
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.indexes import PYPI


def pypi_refusal(variant: Variant, release: TorchRelease, index: str) -> str | None:
    """Why ``index`` ([build] torch_index) cannot serve this variant's torch, when it is the alias
    ``pypi``, the host's pip index (None: it can).

    PyPI holds one build per torch release (its ``pypi_default``, one ABI). CPU ops compile
    against any build of the right version and ABI, so a CPU variant takes whatever build PyPI
    has; a CUDA/ROCm variant needs its own toolkit's build. Refusing before the wheelhouse is
    filled saves downloading GBs of torch only for the build to stop at a version check."""
    if index != PYPI:
        return None
    arch = variant.key.arch
    build = release.pypi_build(arch)  # PyPI's aarch64 wheel is another build than its x86_64 one
    pypi = (
        f"PyPI's torch {release.build_version}{' for ' + arch if arch != 'x86_64' else ''} is the {build} build"
        + ("" if release.pypi_cxx11_abi else " with the pre-cxx11 ABI")
    )
    if variant.key.cxx11_abi != release.pypi_cxx11_abi or (
        variant.key.backend.kind != "cpu" and variant.key.backend.build_name != build
    ):
        return (
            f'{variant.id}: [build] torch_index is "pypi" (PyPI), which cannot serve this variant\'s '
            f'torch ({pypi}): set torch_index = "pytorch" (PyTorch\'s index or a mirror of it), or leave '
            f"the variant out (--only, [[exclude]])"
        )
    return None


def torch_build_mismatch(
    variant: Variant, wheels: tuple[tuple[str, str], ...], index: str
) -> str | None:
    """Why the torch wheel ``index`` served is not the variant's build (None: it is, or the wheel
    says no build, as PyPI's default ones do): a CPU build (``+cpu``) for a CUDA variant would fail
    the compile with torch's "CUDA_HOME environment variable is not set", another toolkit's with
    a version check."""
    for name, _ in wheels:
        try:
            project, version, _, _ = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if project != "torch" or not version.local:
            continue
        wanted = variant.key.backend.build_name
        got = version.local
        if variant.key.backend.kind == "cpu" or got.replace(".", "") == wanted.replace(".", ""):
            return None
        kind = "CPU" if got == "cpu" else got
        return (
            f"{variant.id}: the torch index ({index}) served {name.split('-')[0]}-{version}, the {kind} build, for "
            f"this {wanted} variant: point [build] torch_index at an index that has torch {version.public}+"
            f'{wanted} ("pytorch" or a mirror of it), or leave the variant out (--only, [[exclude]])'
        )
    return None
