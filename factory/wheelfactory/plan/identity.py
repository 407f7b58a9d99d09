"""Variant identities: frozen values with one parser and one formatter each.

A variant is one (torch, backend+toolkit, C++ ABI, Python, arch) combination. Its id follows
the Hugging Face kernels convention, ``torch214-cxx11-cu130-x86_64-linux``; stable-ABI builds
are ``torch-stable-abi210-cu130-x86_64-linux``. A build for one CPython version (not abi3) gets
a ``-cp311`` suffix so that ids stay unique; the HF layout only carries abi3 builds. A CUDA build
split by GPU architecture (``[cuda] split_archs``) names its part after the backend:
``torch213-cxx11-cu130-sm90-x86_64-linux`` holds sm_90's SASS only, ``...-cu130-ptx120-...`` the
PTX of compute_120 only (GpuSlice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from packaging.version import Version

from wheelfactory._runtime._arch import CudaArch
from wheelfactory.plan.indexes import IndexRef
from wheelfactory.plan.versions import major_minor

BackendKind = Literal["cpu", "cuda", "rocm"]
BACKEND_KINDS: tuple[BackendKind, ...] = ("cpu", "cuda", "rocm")
ARCHES = ("x86_64", "aarch64")


class InvalidBackend(ValueError):
    """A backend name that is none of cpu, cuda, rocm, cuXY[Z], rocmX.Y."""


class InvalidVariantId(ValueError):
    """A string that is not a variant id."""


@dataclass(frozen=True, order=True)
class Backend:
    """A compute backend with its toolkit version: cpu, cuda 12.4, rocm 6.2.4."""

    kind: BackendKind
    version: str | None = None  # toolkit version as torch names it ("12.4", "6.2.4"); None for cpu

    def __post_init__(self) -> None:
        if self.kind not in BACKEND_KINDS:
            raise InvalidBackend(f"unknown backend kind {self.kind!r}")
        if (self.kind == "cpu") != (self.version is None):
            raise InvalidBackend(f"backend {self.kind!r} with version {self.version!r}")

    @property
    def tag(self) -> str:
        """Short tag used in ids and local versions: ``cpu``, ``cu124``, ``rocm62``."""
        if self.version is None:
            return "cpu"
        major, minor = major_minor(self.version)
        return f"cu{major}{minor}" if self.kind == "cuda" else f"rocm{major}{minor}"

    @property
    def build_name(self) -> str:
        """Name of the torch build as PyTorch's index paths spell it: ``cu124``, ``rocm6.2.4``."""
        if self.kind == "rocm":
            return f"rocm{self.version}"
        return self.tag

    def __str__(self) -> str:
        return self.build_name

    @classmethod
    def parse(cls, text: str) -> Backend:
        """Parse a pinned build name: ``cpu``, ``cu124``, ``cu130``, ``rocm6.2``, ``rocm6.2.4``."""
        name = text.strip().lower()
        if name == "cpu":
            return cls("cpu")
        cuda = re.fullmatch(r"cu(\d{1,2})(\d)", name, re.ASCII)
        if cuda:
            return cls("cuda", f"{int(cuda.group(1))}.{cuda.group(2)}")
        rocm = re.fullmatch(r"rocm(\d+\.\d+(?:\.\d+)?)", name, re.ASCII)
        if rocm:
            return cls("rocm", rocm.group(1))
        raise InvalidBackend(
            f"unknown backend {text!r}: use cpu, cuda, rocm, or a pinned build like cu124 or rocm6.2"
        )


_ID = re.compile(
    r"^torch(?:(?P<maj>\d)(?P<min>\d+)-(?P<abi>cxx11|cxx98)|-stable-abi(?P<smaj>\d)(?P<smin>\d+))"
    r"-(?P<backend>cpu|cu\d{2,3}|rocm\d{2,3})(?:-(?P<gpu>(?:sm|ptx)\d{2,3}[af]?))?"
    r"-(?P<arch>x86_64|aarch64)-linux(?:-cp(?P<py>3\d+))?$",
    re.ASCII,
)
_GPU_TAG = re.compile(r"(?P<kind>sm|ptx)(?P<digits>\d{2,3})(?P<suffix>[af]?)", re.ASCII)


@dataclass(frozen=True, order=True)
class GpuSlice:
    """One part of a CUDA arch list split into one variant per GPU architecture: the SASS (machine
    code) of one arch, or the PTX (virtual code, JIT-compiled by the driver) of one. ``arch`` is in
    TORCH_CUDA_ARCH_LIST form without ``+PTX``: ``"9.0"``, ``"9.0a"``, ``"12.0"``."""

    arch: str
    ptx: bool = False

    @property
    def digits(self) -> str:
        """``"9.0a"`` -> ``"90a"``: how nvcc and cuobjdump name it (sm_90a, compute_120)."""
        return self.arch.replace(".", "")

    @property
    def tag(self) -> str:
        """The id's part: ``sm90``, ``sm90a``, ``ptx120``."""
        return f"{'ptx' if self.ptx else 'sm'}{self.digits}"

    @property
    def sm_arch(self) -> str:
        """PEP 825 ``nvidia::sm_arch`` value, as PyTorch's variant wheels write it: ``90_real``, ``120_virtual``."""
        return f"{self.digits}_{'virtual' if self.ptx else 'real'}"

    @property
    def arch_list_entry(self) -> str:
        """What the wheel holds, in arch-list form: ``"9.0"``; PTX only: ``"12.0+PTX-only"``
        (TORCH_CUDA_ARCH_LIST has no PTX-only form; our build records and checks read this one)."""
        return f"{self.arch}+PTX-only" if self.ptx else self.arch

    @classmethod
    def parse(cls, tag: str) -> GpuSlice:
        found = _GPU_TAG.fullmatch(tag)
        if not found:
            raise InvalidVariantId(
                f"not a GPU architecture part: {tag!r} (expected e.g. sm90 or ptx120)"
            )
        digits = found["digits"]
        return cls(f"{int(digits[:-1])}.{digits[-1]}{found['suffix']}", found["kind"] == "ptx")


def split_arch_list(arch_list: tuple[str, ...]) -> tuple[GpuSlice, ...]:
    """``("8.0", "9.0", "12.0+PTX")`` -> sm80, sm90, sm120, ptx120: one SASS part per arch and, where
    the list asks for PTX, one PTX part, the highest arch's (what a GPU newer than every SASS in
    the list JIT-compiles; lower archs' PTX would only serve GPUs a SASS part serves better)."""
    sass = {arch.split("+")[0] for arch in arch_list}
    ptx = [arch.split("+")[0] for arch in arch_list if arch.endswith("+PTX")]
    parts = [GpuSlice(arch) for arch in sorted(sass, key=CudaArch.parse)]
    if ptx:
        parts.append(GpuSlice(max(ptx, key=CudaArch.parse), ptx=True))
    return tuple(parts)


@dataclass(frozen=True, order=True)
class VariantId:
    """The identity of a variant, as it appears in directory names and the manifest."""

    torch: str  # major.minor, "2.14"; for stable-ABI builds the oldest torch it serves
    backend: Backend  # toolkit at major.minor precision (ids do not carry patch versions)
    cxx11_abi: bool
    arch: str = "x86_64"
    python: str = "abi3"  # "abi3" or a CPython version "3.11"
    stable_abi: bool = False
    # a split CUDA build's part, GpuSlice.tag ("sm90", "ptx120"); "": the whole arch list
    gpu: str = ""

    @property
    def gpu_slice(self) -> GpuSlice | None:
        return GpuSlice.parse(self.gpu) if self.gpu else None

    @property
    def build_head(self) -> str:
        """The id without arch, OS and Python (the wheel tags carry those):
        ``torch213-cxx11-cu130-sm90``, ``torch-stable-abi210-cu130``."""
        major, minor = major_minor(self.torch)
        if self.stable_abi:
            head = f"torch-stable-abi{major}{minor}"
        else:
            head = f"torch{major}{minor}-{'cxx11' if self.cxx11_abi else 'cxx98'}"
        return f"{head}-{self.backend.tag}" + (f"-{self.gpu}" if self.gpu else "")

    def axes(self) -> dict[str, object]:
        """The variant's axes by the names index.json and the build record give them: what
        index.json's reader and the build record's check compare. The writer (publish/pages.py)
        spells them in index_json.VARIANT_KEYS' order, which tests/test_one_home.py holds."""
        return {
            "torch": self.torch,
            "backend": self.backend.kind,
            "cxx11_abi": self.cxx11_abi,
            "python": self.python,
            "arch": self.arch,
            "stable_abi": self.stable_abi,
            "gpu": self.gpu,
        }

    def __str__(self) -> str:
        text = f"{self.build_head}-{self.arch}-linux"
        if self.python != "abi3":
            text += "-cp" + self.python.replace(".", "")
        return text

    @classmethod
    def parse(cls, text: str) -> VariantId:
        found = _ID.match(text)
        if not found:
            raise InvalidVariantId(
                f"not a variant id: {text!r} (expected e.g. torch214-cxx11-cu130-x86_64-linux)"
            )
        stable = found.group("smaj") is not None
        major = found.group("smaj") if stable else found.group("maj")
        minor = found.group("smin") if stable else found.group("min")
        tag = found.group("backend")
        if tag.startswith("rocm"):  # rocm62 -> 6.2: ids keep major.minor only
            backend = Backend("rocm", f"{tag[4]}.{int(tag[5:])}")
        else:
            backend = Backend.parse(tag)
        py = found.group("py")
        if found.group("gpu") and backend.kind != "cuda":
            raise InvalidVariantId(
                f"not a variant id: {text!r} (a GPU architecture part follows a CUDA backend only)"
            )
        return cls(
            torch=f"{major}.{int(minor)}",
            backend=backend,
            cxx11_abi=stable or found.group("abi") == "cxx11",
            arch=found.group("arch"),
            python="abi3" if py is None else f"{py[0]}.{py[1:]}",
            stable_abi=stable,
            gpu=found.group("gpu") or "",
        )

    @property
    def local_label(self) -> str:
        """The PEP 440 local label of this variant's wheels: ``cu130torch2.14``, ``cputorch2.6cxx98``,
        ``cu130torch2.10stableabi``, ``cu130torch2.13sm90``. A wheel's local version ends with it (a
        VCS version may come before it: ``0.3.2.dev2+gb4153aeb6.cputorch2.13``)."""
        label = f"{self.backend.tag}torch{self.torch}"
        if self.stable_abi:
            label += "stableabi"
        elif not self.cxx11_abi:
            label += "cxx98"
        return label + self.gpu


@dataclass(frozen=True)
class BuildSettings:
    """Per-variant build settings (they change the wheel): from [[include]] entries, and
    ``debug_info`` from [build]."""

    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # keep the -g Python's own compile flags add (engines/compile_flags.py)
    debug_info: bool = False
    # move the libraries' debug info out of the wheel, beside it (verify/strip.py)
    strip: bool = True

    def merged(self, other: BuildSettings) -> BuildSettings:
        return BuildSettings(
            extra_cflags=self.extra_cflags + other.extra_cflags,
            extra_cuda_cflags=self.extra_cuda_cflags + other.extra_cuda_cflags,
            env=tuple(sorted({**dict(self.env), **dict(other.env)}.items())),
            debug_info=self.debug_info or other.debug_info,
            strip=self.strip and other.strip,
        )


@dataclass(frozen=True)
class Variant:
    """A variant the plan will build: its identity plus the facts a build needs."""

    key: VariantId
    torch_version: str  # exact torch release to build against, "2.14.1"
    toolkit: str | None  # full toolkit version, "12.4", "6.2.4"; None for cpu
    arch_list: tuple[str, ...]  # CUDA archs ("8.0", "12.0+PTX") or ROCm gfx targets; () for cpu
    torch_index: IndexRef  # the index that serves this torch build, by alias (plan/indexes.py)
    torch_on_pypi: bool  # the PyPI default build: installable with a plain `pip install torch`
    wheel_platform: str  # platform tag of torch's own wheels (a floor hint for the build image)
    settings: BuildSettings = field(default_factory=BuildSettings)
    notes: tuple[str, ...] = ()  # things the planner adjusted, e.g. archs dropped from an override
    # The toolkit as PyPI wheels (CUDA 13: nvcc, nvvm, crt, cccl), installed beside torch in the
    # build environment, CUDA_HOME at site-packages/nvidia/<home>; () : the image carries it.
    toolkit_wheels: tuple[str, ...] = ()
    toolkit_wheels_home: str = ""
    # offline builds: the Debian suite that packages this toolkit ("trixie")
    toolkit_debian: str = ""
    # [cuda] split_archs: the id of the whole-arch-list variant this one is a part of (key.gpu
    # names the part); the build compiles ``arch_list`` and the wheel keeps the part's device code.
    split_from: str = ""
    # A stable-ABI variant: the variants of the other torch releases it serves that its wheel is
    # also verified with (the stable-ABI gate, [stable_abi] verify_on), besides the one it builds with.
    gate: tuple[Variant, ...] = ()

    def nvcc_defaults(self, flags: tuple[str, ...] = ()) -> tuple[str, ...]:
        """nvcc flags the factory adds before the project's ``flags`` (which win): from CUDA 13,
        ``--compress-mode=size`` (fat binaries compressed harder: a 3-arch library 16 % smaller
        installed, 3 % as a wheel; every driver CUDA 13 runs on reads it, where CUDA 12.8's
        minor-version compatibility reaches drivers that may not)."""
        if (
            self.key.backend.kind != "cuda"
            or not self.toolkit
            or Version(self.toolkit) < Version("13.0")
        ):
            return ()
        if any(flag.lstrip("-").startswith("compress-mode") for flag in flags):
            return ()
        return ("--compress-mode=size",)

    @property
    def split_parts(self) -> tuple[str, ...]:
        """Every part of the split build this variant is one of (GpuSlice tags); (): not split."""
        return tuple(part.tag for part in split_arch_list(self.arch_list)) if self.key.gpu else ()

    @property
    def shipped_arch_list(self) -> tuple[str, ...]:
        """What the wheel's device code serves: the arch list, or the part's one entry (GpuSlice)."""
        part = self.key.gpu_slice
        return (part.arch_list_entry,) if part else self.arch_list

    @property
    def id(self) -> str:
        return str(self.key)

    @property
    def backend(self) -> Backend:
        return Backend(self.key.backend.kind, self.toolkit)

    @property
    def local_version(self) -> str:
        """PEP 440 local label: ``cu130torch2.14``, ``cputorch2.6cxx98`` (VariantId.local_label)."""
        return self.key.local_label

    @property
    def torch_requirement(self) -> str:
        return f"torch=={self.torch_version}"

    def sort_key(
        self,
    ) -> tuple[Version, str, str, bool, str, str, tuple[bool, CudaArch]]:
        backend = self.key.backend
        part = self.key.gpu_slice
        return (
            Version(self.key.torch),
            backend.kind,
            backend.version or "",
            not self.key.cxx11_abi,
            self.key.python,
            self.key.arch,
            (part.ptx, CudaArch.parse(part.arch)) if part else (False, CudaArch(0, 0)),
        )

    def as_dict(self) -> dict[str, object]:
        """The contract shape of ``plan --format json`` (see ARCHITECTURE.md)."""
        return {
            "id": self.id,
            "torch": self.key.torch,
            "torch_version": self.torch_version,
            "torch_requirement": self.torch_requirement,
            "backend": self.key.backend.kind,
            "build": self.backend.build_name,
            "toolkit": self.toolkit,
            "cxx11_abi": self.key.cxx11_abi,
            "python": self.key.python,
            "arch": self.key.arch,
            "stable_abi": self.key.stable_abi,
            "local_version": self.local_version,
            "arch_list": ";".join(self.arch_list),
            "gpu": self.key.gpu,
            "shipped_arch_list": ";".join(self.shipped_arch_list),
            "split_from": self.split_from,
            "verify_on": [self.torch_version, *(other.torch_version for other in self.gate)]
            if self.gate
            else [],
            "torch_index": str(self.torch_index),
            "torch_on_pypi": self.torch_on_pypi,
            "wheel_platform": self.wheel_platform,
            "extra_cflags": list(self.settings.extra_cflags),
            "extra_cuda_cflags": list(self.settings.extra_cuda_cflags),
            "env": dict(self.settings.env),
            "debug_info": self.settings.debug_info,
            "strip": self.settings.strip,
            "notes": list(self.notes),
            "toolkit_wheels": list(self.toolkit_wheels),
        }
