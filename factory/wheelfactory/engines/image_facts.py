"""What a build image offers, probed once per image in a container (engines/docker.py caches it):
its interpreters, glibc, arch, compile cache, CUDA toolkit and cross compilers; and what follows
from it for a variant: the Python it builds with, where its CUDA toolkit is, and whether it
compiles natively, with the image's cross compilers or under emulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from wheelfactory.engines.prepared_env import PreparedEnv
from wheelfactory.engines.wheelhouse import ContainerPython
from wheelfactory.errors import DockerBuildError
from wheelfactory.images.base_image import CROSS_PREFIX
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.versions import major_minor, minor_of

# Run by the image's /opt/python/cp39-cp39 interpreter: one JSON line of ImageFacts' fields.
PROBE = (
    "import glob, json, os, platform, shutil; print(json.dumps({'glibc': platform.libc_ver()[1], "
    "'pythons': sorted(os.path.basename(p) for p in glob.glob('/opt/python/cp3*') "
    "if not os.path.islink(p)), 'ccache': shutil.which('ccache'), 'machine': platform.machine(), "
    "'nvcc': shutil.which('nvcc') or next((p for p in glob.glob('/usr/local/cuda*/bin/nvcc')), None), "
    f"'cross': open('{CROSS_PREFIX}/runs-on').read().strip() if os.path.exists('{CROSS_PREFIX}/runs-on') "
    "else ''}))"
)


def cuda_home(variant: Variant, facts: ImageFacts, torch_env: PreparedEnv) -> str | None:
    """Where a CUDA variant's toolkit is in the build container: NVIDIA's toolkit wheels installed
    beside torch (CUDA 13), else the image's own nvcc; None for other backends."""
    if variant.key.backend.kind != "cuda":
        return None
    if variant.toolkit_wheels_home:
        return f"{torch_env.mount}/nvidia/{variant.toolkit_wheels_home}"
    return str(PurePosixPath(facts.nvcc).parent.parent) if facts.nvcc else None


def interpreter_version(entry: str) -> str:
    """The Python version of an /opt/python entry: ``cp311-cp311`` -> ``3.11``."""
    return f"{entry[2]}.{entry[3 : entry.index('-')]}"


@dataclass(frozen=True)
class ImageFacts:
    """What a build image offers: its interpreters (cpXY-cpXY) and its glibc."""

    glibc: str
    pythons: tuple[str, ...]
    ccache: str | None = None  # path of ccache in the image; None: no compile cache there
    nvcc: str | None = None  # a CUDA toolkit in the image (CUDA 12 variants need one)
    machine: str = ""  # what platform.machine() says in a container of the image: its code's arch
    # the machine its cross compilers (CROSS_PREFIX) run on; "": it has none
    cross_runs_on: str = ""

    def container_python(self, version: str, arch: str) -> ContainerPython:
        """What an interpreter of this image runs as, for wheel sets and environments: the Python
        ``version`` on ``arch``, with the image's glibc (major.minor)."""
        return ContainerPython(version, arch, minor_of(self.glibc))

    def python_for(self, variant: Variant, supported: tuple[str, ...]) -> tuple[str, str]:
        """(version, /opt/python entry) to build with: the variant's own Python, or for abi3 the
        newest one the variant's torch ships wheels for (the wheel serves every CPython >= 3.9)."""
        have = {interpreter_version(p): p for p in self.pythons}
        wanted = (
            [variant.key.python]
            if variant.key.python != "abi3"
            else sorted((v for v in have if v in supported), key=major_minor)[-1:]
        )
        if not wanted or wanted[0] not in have:
            raise DockerBuildError(
                f"{variant.id}: the build image has no Python that torch {variant.key.torch} "
                f"supports (image: {', '.join(self.pythons) or 'none'}; torch: "
                f"{', '.join(supported)})"
            )
        return wanted[0], have[wanted[0]]


def cross_compilers(variant: Variant, facts: ImageFacts, host: str) -> str | None:
    """The directory of cross compilers a variant compiles with: the image's, when the variant's
    arch is emulated here and they run on this machine natively (~10x faster than compiling under
    QEMU); None: the image's own compilers."""
    if variant.key.arch != host and facts.cross_runs_on == host:
        return f"{CROSS_PREFIX}/bin"
    return None


def compile_note(variant: Variant, facts: ImageFacts, host: str) -> str:
    """How the variant compiles, for its log: natively, with cross compilers, or emulated."""
    if variant.key.arch == host:
        return ""
    if cross_compilers(variant, facts, host):
        return (
            f"compiling with the image's cross compilers ({CROSS_PREFIX}/bin, run natively on {host}); "
            f"Python, the smoke test and the tests run as {variant.key.arch} under emulation"
        )
    return (
        f"compiling as {variant.key.arch} under emulation (~10x slower than native): the image has no cross "
        f"compilers for {host} (a [build] debian_base image made on {host} has them)"
    )
