"""The compatibility table: which torch builds exist (factory/wheelfactory/data/compat.toml), as typed data.

Loaded and validated once; the planner asks it questions and never reads the TOML itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from packaging.version import InvalidVersion, Version

from wheelfactory._runtime._toolkit import CudaFacts, ToolkitFacts
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.plan.identity import Backend, InvalidBackend
from wheelfactory.plan.indexes import PYPI, IndexRef, InvalidIndexRef
from wheelfactory.plan.tomlsource import Table, TomlDocument
from wheelfactory.plan.versions import RELEASE_LINE, minor_of

BUNDLED_TABLE = "factory/wheelfactory/data/compat.toml"


@dataclass(frozen=True)
class AbiBuilds:
    """The builds of one torch release that exist with one C++ ABI."""

    builds: frozenset[str] | None  # build names ("cpu", "cu126"); None means every build
    index_paths: tuple[tuple[str, str], ...] = ()  # build -> index path where it differs

    def includes(self, build: str) -> bool:
        return self.builds is None or build in self.builds

    def index_path(self, build: str) -> str:
        return dict(self.index_paths).get(build, build)


@dataclass(frozen=True)
class TorchRelease:
    minor: str  # "2.6"
    build_version: str  # "2.6.0"
    python: tuple[str, ...]
    cuda: tuple[str, ...]
    rocm: tuple[str, ...]
    pypi_default: str
    wheel_platform: str
    aarch64: tuple[str, ...]
    cxx11: AbiBuilds | None
    cxx98: AbiBuilds | None
    source: str
    # The build PyPI's aarch64 wheel is: not pypi_default's (2.4-2.10 are CPU-only for aarch64,
    # their nvidia-* requirements marked x86_64; 2.11 on are CUDA 13). "": as pypi_default.
    pypi_aarch64: str = ""

    @property
    def version(self) -> Version:
        return Version(self.minor)

    def backends(self, kind: str) -> tuple[Backend, ...]:
        if kind == "cpu":
            return (Backend("cpu"),)
        versions = self.cuda if kind == "cuda" else self.rocm
        return tuple(Backend(kind, v) for v in versions)  # type: ignore[arg-type]

    def all_builds(self) -> tuple[Backend, ...]:
        return self.backends("cpu") + self.backends("cuda") + self.backends("rocm")

    def abi_builds(self, cxx11_abi: bool) -> AbiBuilds | None:
        return self.cxx11 if cxx11_abi else self.cxx98

    def has_build(self, backend: Backend, cxx11_abi: bool) -> bool:
        builds = self.abi_builds(cxx11_abi)
        return builds is not None and builds.includes(backend.build_name)

    @property
    def pypi_cxx11_abi(self) -> bool:
        """The ABI of the wheel on PyPI: pre-cxx11 as long as a cxx98 default build exists."""
        return not (self.cxx98 is not None and self.cxx98.includes(self.pypi_default))

    def pypi_build(self, arch: str) -> str:
        """The build of PyPI's wheel of this release for ``arch`` (a planner arch)."""
        return (self.pypi_aarch64 or self.pypi_default) if arch == "aarch64" else self.pypi_default

    def on_pypi(self, backend: Backend, cxx11_abi: bool, arch: str = "x86_64") -> bool:
        return backend.build_name == self.pypi_build(arch) and cxx11_abi == self.pypi_cxx11_abi


@dataclass(frozen=True)
class CudaToolkit:
    version: str
    arch_list: tuple[str, ...]
    min_arch: Version
    max_arch: Version
    source: str
    # NVIDIA's PyPI wheels that make a complete nvcc for this version (CUDA 13), installed beside
    # torch's own nvidia-* wheels; empty: the build image must carry the toolkit (CUDA 12).
    wheels: tuple[str, ...] = ()
    wheels_home: str = ""  # where they put CUDA_HOME, under site-packages/nvidia/ ("cu13")
    # the Debian suite whose non-free nvidia-cuda-toolkit is this version ("trixie")
    debian: str = ""

    def can_compile(self, arch: str) -> bool:
        """``"12.0+PTX"``, ``"9.0a"`` -> is the compute capability within this nvcc's range?"""
        number = arch.split("+")[0].rstrip("af")
        return self.min_arch <= Version(number) <= self.max_arch


@dataclass(frozen=True)
class RocmToolkit:
    version: str  # major.minor
    gfx_targets: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class CompatTable:
    releases: tuple[TorchRelease, ...]  # oldest first
    cuda: tuple[CudaToolkit, ...]
    rocm: tuple[RocmToolkit, ...]
    cuda_groups: tuple[tuple[str, tuple[str, ...]], ...]
    pypi_index: IndexRef  # where the default build (pypi_default) comes from: the alias pypi
    pytorch_index: IndexRef  # every other build: an alias and a path template with {path}
    file: str

    def release(self, minor: str) -> TorchRelease | None:
        return next((r for r in self.releases if r.minor == minor), None)

    def cuda_toolkit(self, version: str) -> CudaToolkit:
        found = next((c for c in self.cuda if c.version == minor_of(version)), None)
        if found is None:  # guarded by validation; reaching this is a bug in the table loader
            raise KeyError(version)
        return found

    def rocm_toolkit(self, version: str) -> RocmToolkit:
        found = next((r for r in self.rocm if r.version == minor_of(version)), None)
        if found is None:
            raise KeyError(version)
        return found

    def known_versions(self) -> str:
        return ", ".join(r.minor for r in self.releases)

    def torch_index(
        self, release: TorchRelease, backend: Backend, cxx11_abi: bool, arch: str = "x86_64"
    ) -> IndexRef:
        """The index (by alias, plan/indexes.py resolves it) that serves this torch build."""
        if release.on_pypi(backend, cxx11_abi, arch):
            return self.pypi_index
        path = self.torch_index_path(release, backend, cxx11_abi)
        return IndexRef(self.pytorch_index.alias, self.pytorch_index.path.replace("{path}", path))

    def torch_index_path(self, release: TorchRelease, backend: Backend, cxx11_abi: bool) -> str:
        """The build's path on a per-build index (``cu126``, ``cpu-cxx11-abi``), PyPI's build included."""
        builds = release.abi_builds(cxx11_abi)
        return builds.index_path(backend.build_name) if builds else backend.build_name

    def toolkit_facts(self) -> ToolkitFacts:
        """What the kernel runtime needs from this table, as the runtime's own type: every CUDA
        release's default arch list and arch range, the CUDA minor groups, the ROCm gfx targets.
        Staging writes it into each package (``_runtime/_toolkits.json``)."""
        return ToolkitFacts(
            cuda=tuple(
                CudaFacts(
                    MajorMinor.parse(c.version),
                    ";".join(c.arch_list),
                    MajorMinor.parse(str(c.min_arch)),
                    MajorMinor.parse(str(c.max_arch)),
                )
                for c in self.cuda
            ),
            cuda_groups=tuple(group for _, group in self.cuda_groups),
            rocm=tuple((MajorMinor.parse(r.version), r.gfx_targets) for r in self.rocm),
            source=Path(self.file).name,
        )


def load_table(path: Path | None = None) -> CompatTable:
    """Load the bundled table, or another file with the same schema."""
    if path is None:
        text = resources.files("wheelfactory.data").joinpath("compat.toml").read_text("utf-8")
        doc = TomlDocument.from_text(text, BUNDLED_TABLE)
    else:
        doc = TomlDocument.load(path)
    return _parse(doc)


def _parse(doc: TomlDocument) -> CompatTable:
    root = doc.root()
    root.reject_unknown({"schema", "indexes", "torch", "cuda", "cuda_groups", "rocm"})
    if root.integer("schema") != 1:
        root.error("schema", "unsupported schema version", "this wheelfactory reads schema = 1")
    indexes = root.table("indexes")
    indexes.reject_unknown({"pypi", "pytorch"})
    pypi_index = _index_ref(indexes, "pypi", PYPI)
    pytorch_index = _index_ref(indexes, "pytorch", "pytorch/{path}")
    if "{path}" not in pytorch_index.path:
        indexes.error("pytorch", "must name a path with {path}", 'e.g. pytorch = "pytorch/{path}"')
    if pypi_index.path:
        indexes.error("pypi", "is an alias without a path", 'e.g. pypi = "pypi"')

    for name, what, example in (
        ("cuda", "CUDA", 'cuda."12.8"'),
        ("rocm", "ROCm", 'rocm."6.4"'),
        ("torch", "torch", 'torch."2.14"'),
    ):
        for key in root.table(name).data:
            _check_key(root.table(name), key, what, example)
    cuda = tuple(_parse_cuda(root.table("cuda").table(v), v) for v in root.table("cuda").data)
    rocm = tuple(_parse_rocm(root.table("rocm").table(v), v) for v in root.table("rocm").data)
    groups_table = root.table("cuda_groups")
    groups = tuple(
        (major, groups_table.string_list(major, allow_scalar=False))
        for major in groups_table.data
        if major != "cuda_groups_source"
    )

    torch_table = root.table("torch")
    releases = [_parse_release(torch_table.table(minor), minor) for minor in torch_table.data]
    releases.sort(key=lambda r: r.version)
    table = CompatTable(tuple(releases), cuda, rocm, groups, pypi_index, pytorch_index, doc.file)
    for release in releases:
        _check_release(table, torch_table.table(release.minor), release)
    return table


def _index_ref(table: Table, key: str, default: str) -> IndexRef:
    """An index by alias (and path): host names live in the user's configuration, not in the table."""
    text = table.string(key, default)
    try:
        return IndexRef.parse(text)
    except InvalidIndexRef as exc:
        table.error(
            key,
            str(exc),
            "name an index alias; its URL comes from [indexes] in matrix.toml or "
            "WHEELFACTORY_INDEX_<ALIAS> (factory/wheelfactory/plan/indexes.py)",
        )


# A TORCH_CUDA_ARCH_LIST entry: "8.0", "9.0a", "10.0f", "12.0+PTX".
_CUDA_ARCH = re.compile(r"\d+\.\d+[af]?(\+PTX)?")


def _version(table: Table, key: str, default: str | None = None, *, example: str) -> Version:
    """A string key that must parse as a version; the table's own error (file, line, key) otherwise."""
    return Version(_version_text(table, key, default, example=example))


def _version_text(table: Table, key: str, default: str | None = None, *, example: str) -> str:
    """The text of a key that must parse as a version, as written (what the table's user reads)."""
    text = table.string(key, default)
    if text is None:
        table.error(key, "is required", f'e.g. {key} = "{example}"')
    try:
        Version(text)
    except InvalidVersion:
        table.error(key, f"{text!r} is not a version", f'e.g. {key} = "{example}"')
    return str(text)


def _check_key(table: Table, key: str, what: str, example: str) -> None:
    """The name of a [torch."X.Y"] / [cuda."X.Y"] / [rocm."X.Y"] entry must be a major.minor version."""
    if not RELEASE_LINE.fullmatch(key):
        table.error(key, f"is not a {what} major.minor version", f"name the entry like [{example}]")


def _versions(table: Table, key: str) -> tuple[str, ...]:
    values = table.string_list(key, (), allow_scalar=False)
    for value in values:
        try:
            Version(value)
        except ValueError:
            table.error(key, f"{value!r} is not a version")
    return tuple(values)


def _parse_cuda(table: Table, version: str) -> CudaToolkit:
    table.reject_unknown(
        {"arch_list", "min_arch", "max_arch", "source", "wheels", "wheels_home", "debian"}
    )
    arch_list = tuple(a for a in table.string("arch_list", "").split(";") if a)
    if not arch_list:
        table.error("arch_list", "is required", 'e.g. arch_list = "8.0;9.0;12.0+PTX"')
    for arch in arch_list:
        if not _CUDA_ARCH.fullmatch(arch):
            table.error(
                "arch_list", f"{arch!r} is not a CUDA arch", 'e.g. arch_list = "8.0;9.0a;12.0+PTX"'
            )
    wheels = table.string_list("wheels", (), allow_scalar=False)
    home = table.string("wheels_home", "")
    if bool(wheels) != bool(home):
        table.error(
            "wheels_home" if wheels else "wheels",
            "wheels and wheels_home go together",
            'e.g. wheels = ["nvidia-cuda-nvcc==13.0.*", ...] with wheels_home = "cu13"',
        )
    return CudaToolkit(
        version,
        arch_list,
        _version(table, "min_arch", "0", example="5.0"),
        _version(table, "max_arch", "99", example="12.0"),
        table.string("source", ""),
        wheels,
        home,
        table.string("debian", ""),
    )


def _parse_rocm(table: Table, version: str) -> RocmToolkit:
    table.reject_unknown({"gfx_targets", "source"})
    return RocmToolkit(
        version,
        table.string_list("gfx_targets", (), allow_scalar=False),
        table.string("source", ""),
    )


def _parse_abi(table: Table, key: str) -> AbiBuilds | None:
    if not table.has(key):
        return None
    abi = table.table(key)
    abi.reject_unknown({"builds", "index_paths"})
    builds = abi.data.get("builds", "all")
    names = None if builds == "all" else frozenset(abi.string_list("builds", allow_scalar=False))
    return AbiBuilds(names, tuple(sorted(abi.string_map("index_paths").items())))


def _parse_release(table: Table, minor: str) -> TorchRelease:
    table.reject_unknown(
        {
            "build_version",
            "python",
            "cuda",
            "rocm",
            "pypi_default",
            "wheel_platform",
            "aarch64",
            "pypi_aarch64",
            "abi",
            "source",
        }
    )
    example = f"{minor}.0"
    # checked first: minor_of needs a version
    build_version = _version_text(table, "build_version", example=example)
    if minor_of(build_version) != minor:
        table.error(
            "build_version",
            f"must be a {minor}.x release, not {build_version!r}",
            f'e.g. build_version = "{example}"',
        )
    abi = table.table("abi")
    abi.reject_unknown({"cxx11", "cxx98"})
    return TorchRelease(
        minor=minor,
        build_version=build_version,
        python=_versions(table, "python"),
        cuda=_versions(table, "cuda"),
        rocm=_versions(table, "rocm"),
        pypi_default=table.string("pypi_default", "cpu"),
        wheel_platform=table.string("wheel_platform", "linux"),
        aarch64=table.string_list("aarch64", (), allow_scalar=False),
        pypi_aarch64=table.string("pypi_aarch64", ""),
        cxx11=_parse_abi(abi, "cxx11"),
        cxx98=_parse_abi(abi, "cxx98"),
        source=table.string("source", ""),
    )


def _check_release(table: CompatTable, where: Table, release: TorchRelease) -> None:
    """Cross-references inside the table: every build named must exist and be described."""
    names = {b.build_name for b in release.all_builds()}
    for version in release.cuda:
        if not any(c.version == minor_of(version) for c in table.cuda):
            where.error("cuda", f'CUDA {version} has no [cuda."{minor_of(version)}"] entry')
    for version in release.rocm:
        if not any(r.version == minor_of(version) for r in table.rocm):
            where.error("rocm", f'ROCm {version} has no [rocm."{minor_of(version)}"] entry')
    if release.pypi_default not in names:
        where.error("pypi_default", f"{release.pypi_default!r} is not one of its builds")
    for build in (*release.aarch64,):
        try:
            Backend.parse(build)
        except InvalidBackend as exc:
            where.error("aarch64", str(exc))
    if release.pypi_aarch64 and release.pypi_aarch64 not in release.aarch64:
        where.error(
            "pypi_aarch64",
            f"{release.pypi_aarch64!r} is not one of its aarch64 builds "
            f"({', '.join(release.aarch64) or 'none'})",
        )
    if release.cxx11 is None and release.cxx98 is None:
        where.error("abi", "names no ABI", "add abi.cxx11 and/or abi.cxx98")
    for key, abi in (("cxx11", release.cxx11), ("cxx98", release.cxx98)):
        if abi is not None and abi.builds is not None:
            unknown = sorted(abi.builds - names)
            if unknown:
                where.error(
                    "abi", f"{key} names builds the release does not have: {', '.join(unknown)}"
                )
    for build in sorted(names):
        if not (release.cxx11 and release.cxx11.includes(build)) and not (
            release.cxx98 and release.cxx98.includes(build)
        ):
            where.error("abi", f"build {build} exists with neither ABI")
