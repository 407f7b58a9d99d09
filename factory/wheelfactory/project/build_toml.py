"""A Hugging Face kernel-builder project's declaration (build.toml), as typed values: what
project/build_toml_reader.py reads it into, by the declarations of its edition
(project/build_toml_schema.py, which says what each edition holds and where the format is
documented). Pure: these values only answer questions about the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

DECLARATION = "build.toml"
DEFAULT_PYEXT = ("py", "pyi")


@dataclass(frozen=True)
class Hub:
    repo_id: str | None = None
    branch: str | None = None


@dataclass(frozen=True)
class KernelDependency:
    """A Hub kernel this one needs at run time (edition 5 ``kernel-depends``)."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    def as_metadata(self) -> dict[str, object]:
        """The entry of a variant's metadata.json ``kernel-depends``, as `kernels` reads it."""
        return {
            "repo-id": self.repo_id,
            **(
                {"version": self.version}
                if self.version is not None
                else {"revision": self.revision}
            ),
        }


def kernel_depends_for(
    declared: tuple[tuple[str, tuple[KernelDependency, ...]], ...], backend: str
) -> tuple[dict[str, object], ...]:
    """The ``kernel-depends`` of one backend's build: those of [general], then the backend's own."""
    return tuple(
        dependency.as_metadata()
        for key, dependencies in declared
        if key in ("", backend)
        for dependency in dependencies
    )


@dataclass(frozen=True)
class General:
    name: str  # as written; python_name is the import name
    version: int | None
    license: str | None
    backends: tuple[str, ...]  # sorted, no duplicates
    python_depends: tuple[str, ...] = ()
    backend_python_depends: tuple[tuple[str, tuple[str, ...]], ...] = ()  # backend -> names
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    cuda_capabilities: tuple[str, ...] = ()  # edition 4 [general.cuda], 5 [torch-noarch]
    rocm_archs: tuple[str, ...] = ()  # edition 4 [general.rocm], 5 [torch-noarch]
    hub: Hub = Hub()
    upstream: str | None = None
    source: str | None = None
    kernels_minver: str | None = None  # edition 5 [general] minver: the oldest kernels release
    kernel_depends: tuple[tuple[str, tuple[KernelDependency, ...]], ...] = ()  # "" = all backends
    universal: bool = False  # editions 1 and 2: pure Python, loadable everywhere

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class StableAbi:
    """``[torch] stable-abi``: one torch version for every backend, or one per backend."""

    every_backend: str | None = None
    per_backend: tuple[tuple[str, str], ...] = ()

    def for_backend(self, backend: str) -> str | None:
        """The stable-ABI torch version a ``backend`` build targets; None: the regular ABI."""
        if self.every_backend is not None:
            return self.every_backend
        return dict(self.per_backend).get(backend)


@dataclass(frozen=True)
class TorchSection:
    src: tuple[Path, ...] = ()  # relative to the project root
    include: tuple[Path, ...] = ()
    pyext: tuple[str, ...] = DEFAULT_PYEXT
    minver: str | None = None
    maxver: str | None = None  # inclusive: "2.8" admits every 2.8.x
    cxx_flags: tuple[str, ...] = ()
    stable_abi: StableAbi | None = None
    present: bool = True  # False: no [torch] table (a noarch kernel, or [torch-noarch])

    @property
    def data_extensions(self) -> tuple[str, ...]:
        """Extensions of the non-Python files the package ships (``pyext`` less py/pyi)."""
        return tuple(ext for ext in self.pyext if ext not in ("py", "pyi"))


@dataclass(frozen=True)
class KernelUnit:
    """One ``[kernel.NAME]`` table: sources compiled for one backend."""

    name: str
    backend: str
    src: tuple[Path, ...]
    depends: tuple[str, ...]
    include: tuple[Path, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelBuilderSpec:
    root: Path  # the directory holding build.toml
    edition: int  # 1-5, see the module docstring
    general: General
    torch: TorchSection
    kernels: tuple[KernelUnit, ...]  # sorted by name

    @property
    def noarch(self) -> bool:
        """No compiled unit: one pure-Python package serves every variant."""
        return not self.kernels

    @property
    def python_package(self) -> Path:
        """The kernel's Python package, relative to root: ``torch-ext/<python name>``."""
        return Path("torch-ext") / self.general.python_name

    def declared_backends(self) -> tuple[str, ...]:
        return self.general.backends

    def compiled_backends(self) -> tuple[str, ...]:
        """Backends at least one unit compiles for, among the declared ones."""
        return tuple(b for b in self.general.backends if self.units_for(b))

    def units_for(self, backend: str, cuda: str | Version | None = None) -> tuple[KernelUnit, ...]:
        """The units a ``backend`` build compiles; with ``cuda`` (the toolkit version), CUDA units
        whose ``cuda-minver`` is newer are left out, as kernel-builder does."""
        if backend not in self.general.backends:
            return ()
        toolkit = Version(str(cuda)) if cuda is not None else None
        return tuple(
            unit
            for unit in self.kernels
            if unit.backend == backend
            and (
                toolkit is None or unit.cuda_minver is None or Version(unit.cuda_minver) <= toolkit
            )
        )

    def torch_specifier(self) -> SpecifierSet:
        """``[torch] minver``/``maxver`` as a specifier (maxver inclusive of its patch releases)."""
        return bounds_specifier(self.torch.minver, self.torch.maxver)

    def cuda_specifier(self) -> SpecifierSet:
        """The CUDA toolkit bounds (``[general.cuda]``; edition 2 ``cuda-minver``/``cuda-maxver``)."""
        return bounds_specifier(self.general.cuda_minver, self.general.cuda_maxver)

    def stable_abi_for(self, backend: str) -> str | None:
        return None if self.torch.stable_abi is None else self.torch.stable_abi.for_backend(backend)


def bounds_specifier(minver: str | None, maxver: str | None) -> SpecifierSet:
    """``("2.5", "2.8")`` -> ``>=2.5,<2.9``: an inclusive maximum admits its later components."""
    parts = []
    if minver is not None:
        parts.append(f">={minver}")
    if maxver is not None:
        numbers = list(Version(maxver).release)
        numbers[-1] += 1
        parts.append("<" + ".".join(str(n) for n in numbers))
    return SpecifierSet(",".join(parts))


def is_kernel_builder_project(path: Path) -> bool:
    return (path / DECLARATION).is_file()
