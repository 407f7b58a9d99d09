"""A factory-native kernel project's declaration file (kernel.toml), parsed into a typed spec."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from wheelfactory.plan.project_tests import TEST_SECTION, ProjectTests, parse_test_table
from wheelfactory.plan.toml_model import Key, Section, Text, TextList
from wheelfactory.plan.tomlsource import Table, TomlDocument
from wheelfactory.project.op_checks import check_ops
from wheelfactory.support.project_copy import project_files

DECLARATION = "kernel.toml"
_PYCACHE = shutil.ignore_patterns("__pycache__")
NAME = r"^[a-z_][a-z0-9_]*$"
OP = r"^[A-Za-z_][A-Za-z0-9_]*$"
_NAME = re.compile(NAME, re.ASCII)
_OP = re.compile(OP, re.ASCII)
SOURCE_BACKENDS = ("cpu", "cuda")

# The keys of kernel.toml, declared once (plan/toml_model.py): parse_kernel refuses every other key,
# and plan/schema.py writes the file's JSON Schema from these. Paths are relative to kernel.toml;
# that they exist is the parser's check, not the schema's.
_SOURCE_LISTS = {
    "cpu": Key(
        "cpu",
        TextList(item=Text(examples=("csrc/cpu/ops.cpp",)), nonempty=True),
        "C++ sources every variant compiles",
        required=True,
    ),
    "cuda": Key(
        "cuda",
        TextList(item=Text(examples=("csrc/cuda/ops.cu",))),
        "CUDA sources a CUDA variant adds (hipified for ROCm)",
    ),
}
KERNEL_FILE = Section(
    description="wheelfactory's kernel.toml: a factory-native kernel project's declaration",
    keys=(
        Key(
            "kernel",
            Section(
                (
                    Key(
                        "name",
                        Text(pattern=NAME, examples=("mykernels",)),
                        "the import name of the package (a lower-case Python identifier)",
                        required=True,
                    ),
                    Key(
                        "version",
                        Text(examples=("0.1.0",)),
                        "a PEP 440 version without a local label (the factory adds one per variant)",
                        required=True,
                    ),
                    Key(
                        "description",
                        Text(examples=("Fused ops for LLM inference",)),
                        "one line",
                        default="",
                    ),
                    Key(
                        "python_package",
                        Text(examples=("python/mykernels",)),
                        "the directory of the hand-written Python package",
                        required=True,
                    ),
                    Key(
                        "namespace_macro",
                        Text(examples=("MYKERNELS_NAMESPACE",)),
                        "the macro the sources use as the TORCH_LIBRARY namespace; default <NAME>_NAMESPACE",
                    ),
                    Key(
                        "ops",
                        TextList(
                            item=Text(pattern=OP, examples=("my_op",)), lone=False, nonempty=True
                        ),
                        "the op names registered with TORCH_LIBRARY",
                        required=True,
                    ),
                    Key(
                        "sample_inputs",
                        Text(examples=("_samples:sample_inputs",)),
                        '"module:function" in the Python package returning sample inputs per op',
                    ),
                )
            ),
            "the package",
            required=True,
        ),
        Key(
            "sources",
            Section(
                (
                    Key(
                        "include_dirs",
                        TextList(item=Text(examples=("csrc",))),
                        "header directories",
                    ),
                    *(_SOURCE_LISTS[backend] for backend in SOURCE_BACKENDS),
                    Key(
                        "device_check",
                        Text(examples=("csrc/cuda/device_check.cu",)),
                        "a .cu instantiating every kernel with c10's types only, for the device-code compile check",
                    ),
                )
            ),
            "what the builds compile",
            required=True,
        ),
        Key(
            "stable_abi",
            Section(
                tuple(
                    Key(
                        backend,
                        TextList(
                            item=Text(
                                examples=(
                                    f"csrc/stable/ops.{'cu' if backend == 'cuda' else 'cpp'}",
                                )
                            )
                        ),
                        f"{backend} sources written against torch's stable ABI only",
                    )
                    for backend in SOURCE_BACKENDS
                )
            ),
            "what a stable-ABI variant compiles instead of [sources]",
        ),
        Key(
            "flags",
            Section(
                (
                    Key("cxx", TextList(item=Text(examples=("-O3",))), "C++ compiler flags"),
                    Key("nvcc", TextList(item=Text(examples=("-O3",))), "nvcc flags"),
                )
            ),
            "compiler flags",
        ),
        Key(
            "test",
            TEST_SECTION,
            "the kernel's own tests, run against every built wheel (a matrix.toml [test] "
            "replaces it)",
        ),
    ),
)
# Files only a device build reads: a CPU variant neither ships nor hashes them, so editing a
# .cu file rebuilds the CUDA/ROCm variants and leaves the CPU ones cached.
DEVICE_SUFFIXES = frozenset({".cu", ".cuh", ".hip"})


@dataclass(frozen=True)
class KernelSpec:
    root: Path  # the directory holding kernel.toml
    name: str  # import name of the package, e.g. "mykernels"
    version: str
    description: str
    python_package: Path  # relative to root
    namespace_macro: str
    ops: tuple[str, ...]
    include_dirs: tuple[Path, ...]  # relative to root
    sources: tuple[tuple[str, tuple[Path, ...]], ...]  # backend -> files, relative to root
    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    # Sources written against torch's stable ABI only (torch/csrc/stable, torch/headeronly):
    # what a torch-stable-abi variant compiles instead of ``sources``. backend -> files.
    stable_sources: tuple[tuple[str, tuple[Path, ...]], ...] = ()
    # A .cu instantiating every kernel with no torch beyond c10's types: what a device-code
    # compile check builds (ROCm: hipified, then hipcc per gfx target). Not part of any wheel build.
    device_check: Path | None = None
    # "module:function" in the Python package: ``function()`` returns {op: [args, ...]}, sample
    # inputs that verification runs through each prebuilt op and its reference and compares.
    sample_inputs: tuple[str, str] | None = None
    # [test]: the kernel's own tests, run against every built wheel (a matrix [test] replaces it).
    test: ProjectTests | None = None

    def stable_sources_for(self, backend_kind: str) -> tuple[Path, ...]:
        table = dict(self.stable_sources)
        device = table.get("cuda", ()) if backend_kind in ("cuda", "rocm") else ()
        return table.get("cpu", ()) + device

    def sources_for(self, backend_kind: str) -> tuple[Path, ...]:
        """What a build for this backend compiles: cpu sources always, plus the device ones.

        ROCm builds hipify the CUDA sources.
        """
        table = dict(self.sources)
        device = table.get("cuda", ()) if backend_kind in ("cuda", "rocm") else ()
        return table.get("cpu", ()) + device

    def files_for(self, backend_kind: str) -> tuple[Path, ...]:
        """Every file a build for this backend reads: the Python package, the headers under the
        include dirs and the backend's sources. This is what the variant ships for JIT and what
        its cache key hashes. kernel.toml itself is not: its parsed values (flags, ops, version)
        reach the key through the generated packaging and records."""
        compiled = set(self.sources_for(backend_kind)) | set(self.stable_sources_for(backend_kind))
        other = {p for _, paths in (*self.sources, *self.stable_sources) for p in paths} - compiled
        device = backend_kind in ("cuda", "rocm")
        files: set[Path] = set()
        for directory in (self.python_package, *self.include_dirs):
            # Refuses what may not leave the project (support/project_copy.py), follows inside links.
            files.update(
                project_files(
                    self.root, directory, ignore=_PYCACHE, declared_in=str(self.root / DECLARATION)
                )
            )
        files = {p for p in files if p not in other and (device or p.suffix not in DEVICE_SUFFIXES)}
        return tuple(sorted(files | compiled))


def is_native_project(path: Path) -> bool:
    return (path / DECLARATION).is_file()


def load_kernel(root: Path) -> KernelSpec:
    doc = TomlDocument.load(root / DECLARATION)
    return parse_kernel(doc, root)


def parse_kernel(doc: TomlDocument, root: Path) -> KernelSpec:
    top = doc.root()
    top.reject_unknown(KERNEL_FILE.names())
    kernel = top.table("kernel")
    kernel.reject_unknown(KERNEL_FILE.section("kernel").names())
    name = kernel.string("name")
    if name is None or not _NAME.fullmatch(name):
        kernel.error("name", f"must be a lower-case Python identifier, got {name!r}")
    version = kernel.string("version")
    try:
        if version is None or Version(version).local is not None:
            raise InvalidVersion(str(version))
    except InvalidVersion:
        kernel.error(
            "version",
            f"must be a PEP 440 version without a local label, got {version!r}",
            "the factory adds the +local label per variant",
        )
    ops = kernel.string_list("ops", (), allow_scalar=False)
    if not ops:
        kernel.error("ops", "names no op", "list the op names registered with TORCH_LIBRARY")
    for op in ops:
        if not _OP.fullmatch(op):
            kernel.error("ops", f"{op!r} is not an identifier")
    macro = kernel.string("namespace_macro", f"{name.upper()}_NAMESPACE")
    python_package = _existing_dir(kernel, "python_package", root, required=True)

    sources = top.table("sources")
    sources.reject_unknown(KERNEL_FILE.section("sources").names())
    include_dirs = tuple(
        _existing_dir(sources, "include_dirs", root, value=v)
        for v in sources.string_list("include_dirs", ())
    )
    per_backend: list[tuple[str, tuple[Path, ...]]] = []
    for backend in SOURCE_BACKENDS:
        files = tuple(
            _existing_file(sources, backend, root, v) for v in sources.string_list(backend, ())
        )
        per_backend.append((backend, files))
    device_check = sources.string("device_check")
    if not dict(per_backend)["cpu"]:
        sources.error("cpu", "names no source", "the CPU sources are built for every variant")

    stable = top.table("stable_abi")
    stable.reject_unknown(KERNEL_FILE.section("stable_abi").names())
    stable_sources = tuple(
        (
            backend,
            tuple(
                _existing_file(stable, backend, root, v) for v in stable.string_list(backend, ())
            ),
        )
        for backend in SOURCE_BACKENDS
        if stable.has(backend)
    )

    flags = top.table("flags")
    flags.reject_unknown(KERNEL_FILE.section("flags").names())
    check_ops(
        kernel,
        root,
        python_package,
        ops,
        [f for _, files in (*per_backend, *stable_sources) for f in files],
        list(include_dirs),
    )
    return KernelSpec(
        root=root,
        name=name,
        version=version,
        description=kernel.string("description", ""),
        python_package=python_package,
        namespace_macro=macro,
        ops=tuple(ops),
        include_dirs=include_dirs,
        sources=tuple(per_backend),
        cxx_flags=flags.string_list("cxx", ()),
        nvcc_flags=flags.string_list("nvcc", ()),
        stable_sources=stable_sources,
        device_check=None
        if device_check is None
        else _existing_file(sources, "device_check", root, device_check),
        test=_test(top.table("test"), root, doc.file),
        sample_inputs=_sample_inputs(kernel, root / python_package),
    )


def _sample_inputs(kernel: Table, package: Path) -> tuple[str, str] | None:
    text = kernel.string("sample_inputs")
    if text is None:
        return None
    module, _, function = text.partition(":")
    hint = (
        'e.g. sample_inputs = "_samples:sample_inputs" (a function in python_package/_samples.py)'
    )
    if not all(part.isidentifier() for part in module.split(".")) or not function.isidentifier():
        kernel.error("sample_inputs", f'{text!r} is not "module:function"', hint)
    if not (package / Path(*module.split("."))).with_suffix(".py").is_file():
        kernel.error("sample_inputs", f"no module {module!r} in {package}", hint)
    return module, function


def _test(table: Table, root: Path, file: str) -> ProjectTests | None:
    spec = parse_test_table(table, declared_in=file, base_dir=root)
    for source in spec.sources if spec else ():
        if not (root / source).exists():
            table.error(
                "sources",
                f"{source!r} does not exist under {root}",
                "list files or directories of the kernel",
            )
    return spec


def _existing_dir(
    table: Table, key: str, root: Path, *, value: str | None = None, required: bool = False
) -> Path:
    text = value if value is not None else table.string(key)
    if text is None:
        table.error(key, "is required")
    path = Path(text)
    if path.is_absolute() or ".." in path.parts:
        table.error(key, f"{text!r} must be a path inside the project")
    if not (root / path).is_dir():
        table.error(key, f"directory {text!r} does not exist in {root}")
    return path


def _existing_file(table: Table, key: str, root: Path, text: str) -> Path:
    path = Path(text)
    if path.is_absolute() or ".." in path.parts:
        table.error(key, f"{text!r} must be a path inside the project")
    if not (root / path).is_file():
        table.error(key, f"source {text!r} does not exist in {root}")
    return path
