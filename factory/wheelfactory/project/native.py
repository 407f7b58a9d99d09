"""The factory-native kind (kernel.toml): what goes into a variant's build directory.

``plan_stage`` is pure given the kernel's file contents: it decides the namespace, version,
build record, JIT spec and the generated setup.py. ``write_stage`` copies files into place.
"""

from __future__ import annotations

import functools
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from wheelfactory._runtime._record import BUILD_RECORD_FILE, BuildRecord
from wheelfactory._runtime._toolkit import TOOLKITS_FILE, ToolkitFacts
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import CompatTable, load_table
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.torch_pin import TorchRequirement, torch_requires_dist
from wheelfactory.project.build_system import GENERATED_PYPROJECT
from wheelfactory.project.kernel_toml import DECLARATION, KernelSpec
from wheelfactory.project.keys import python_files, tree_digest
from wheelfactory.project.kind_facts import NATIVE, KindFacts
from wheelfactory.project.op_checks import coverage_warnings
from wheelfactory.project.stage import (
    CompiledStage,
    abi_defines,
    library_file,
    setup_py_head,
    variant_record,
)
from wheelfactory.project.wheel_checks import WheelChecks, check_sources
from wheelfactory.support.project_copy import (
    checked_file,
    copy_project_file,
    copy_project_tree,
    project_files,
)
from wheelfactory.support.resources import runtime_dir

RECORD_FILE = BUILD_RECORD_FILE
SOURCES_DIR = "_sources"
RUNTIME_PACKAGE = "_runtime"
LIBRARY_MODULE = "_C"


@dataclass(frozen=True)
class StagePlan(CompiledStage):
    kernel: KernelSpec
    variant: Variant
    source_digest: str
    namespace: str
    version: str
    record: BuildRecord
    jit_spec: dict[str, object]
    setup_py: str
    pyproject: str
    toolkits: ToolkitFacts  # the compatibility table's toolkit facts, for the runtime
    tests: ProjectTests | None = None  # matrix.toml [test]; None: kernel.toml's [test], if any

    @property
    def package(self) -> str:
        return self.kernel.name

    @property
    def checks(self) -> WheelChecks:
        kernel = self.kernel
        tests = self.tests if self.tests is not None else kernel.test
        return WheelChecks(
            kernel.root,
            kernel.name,
            kernel.ops,
            kernel.sample_inputs,
            tests,
            coverage_warnings=coverage_warnings(
                kernel.root,
                kernel.python_package,
                kernel.ops,
                kernel.sample_inputs,
                tests.sources if tests else (),
            ),
        )

    @property
    def kind(self) -> KindFacts:
        return NATIVE

    @property
    def source_root(self) -> Path:
        return self.kernel.root

    def key_material(self) -> object:
        return [
            self.source_digest,
            self.setup_py,
            self.pyproject,
            self.record.to_json(),
            self.jit_spec,
            self.toolkits.to_json(),
            self.kernel.sample_inputs,
            self.checks.key_material(),
        ]

    def write(self, dest: Path) -> None:
        write_stage(self, dest)


@functools.cache
def _bundled_table() -> CompatTable:
    return load_table()


def namespace_for(kernel: KernelSpec, variant: Variant) -> str:
    """``_mykernels_cpu_1a2b3c4d``: unique per (variant, version), so any two variants or releases
    load side by side in one process (and a JIT build has its own, from its digest). Not over the
    sources: the namespace is a -D on every compile line, and a source-dependent one would make an
    edit of one file recompile all of them (no compile-cache hits)."""
    import hashlib

    # the parts of a split build compile alike (one compile-cache entry per unit for all of them)
    token = hashlib.sha256(
        f"{variant.split_from or variant.id}\0{kernel.version}".encode()
    ).hexdigest()[:8]
    return f"_{kernel.name}_{variant.key.backend.kind}_{token}"


def plan_stage(
    kernel: KernelSpec,
    variant: Variant,
    *,
    table: CompatTable | None = None,
    tests: ProjectTests | None = None,
    torch_requirement: TorchRequirement = "pinned",
) -> StagePlan:
    """``table``: the compatibility table the plan came from (default: the bundled one); its
    toolkit facts ship with the runtime. ``torch_requirement``: [build] torch_requirement, the
    wheel's Requires-Dist on torch (plan/torch_pin.py)."""
    toolkits = (table or _bundled_table()).toolkit_facts()
    backend = variant.key.backend.kind
    check_inputs(kernel, tests)  # before any file is read for the digest: a FIFO would block it
    device = backend in ("cuda", "rocm")
    source_digest = tree_digest(kernel.root, kernel.files_for(backend))
    namespace = namespace_for(kernel, variant)
    version = f"{kernel.version}+{variant.local_version}"
    if variant.key.stable_abi and not dict(kernel.stable_sources).get("cuda" if device else "cpu"):
        raise ConfigError(
            f"{variant.id} needs stable-ABI sources for {backend}, and {kernel.root / 'kernel.toml'} "
            "declares none",
            key="stable_abi." + ("cuda" if device else "cpu"),
            hint="list them under [stable_abi], or drop stable_abi from [matrix]",
        )
    record = variant_record(
        variant,
        name=kernel.name,
        version=version,
        namespace=namespace,
        ops=tuple(kernel.ops),
        library=library_file(LIBRARY_MODULE, variant),
        source_digest=source_digest,
    )
    jit_spec: dict[str, object] = {
        "schema": 1,
        "name": kernel.name,
        "version": kernel.version,
        "namespace_macro": kernel.namespace_macro,
        # Only what this variant ships: a CPU wheel's JIT builds the CPU ops (see files_for).
        "sources": {
            name: [str(p) for p in files]
            for name, files in kernel.sources
            if name == "cpu" or device
        },
        "include_dirs": [str(p) for p in kernel.include_dirs],
        "cxx_flags": list(kernel.cxx_flags),
        "nvcc_flags": list(kernel.nvcc_flags) if device else [],
        "ops": list(kernel.ops),
    }
    requires_torch = torch_requires_dist(variant, torch_requirement)  # the wheel's Requires-Dist
    return StagePlan(
        kernel,
        variant,
        source_digest,
        namespace,
        version,
        record,
        jit_spec,
        _setup_py(kernel, variant, namespace, version, requires_torch),
        GENERATED_PYPROJECT,
        toolkits,
        tests,
    )


def check_inputs(kernel: KernelSpec, tests: ProjectTests | None = None) -> None:
    """Every file a build of any backend reads, and the [test] sources, stay inside the project
    (support/project_copy.py): a one-line ConfigError now, before any variant is staged."""
    declared_in = str(kernel.root / DECLARATION)
    project_files(kernel.root, kernel.python_package, declared_in=declared_in)
    for backend in ("cpu", "cuda"):
        for rel in kernel.files_for(backend):
            checked_file(kernel.root, rel, declared_in=declared_in)
    if kernel.device_check is not None:
        checked_file(kernel.root, kernel.device_check, declared_in=declared_in)
    for test in (tests, kernel.test):
        if test is not None:
            check_sources(test, kernel.root)


def write_stage(plan: StagePlan, dest: Path) -> None:
    """Lay out the build directory: generated packaging, the Python package, the vendored
    runtime, the shipped sources for JIT and the build record. ``dest`` is made fresh for each
    build (staging, not an output): its files are written plainly, not through support/atomic.py."""
    kernel = plan.kernel
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    package = dest / kernel.name
    declared_in = str(kernel.root / DECLARATION)
    # Inside symlinks are copied as what they point to (the stage is self-contained); others refused.
    copy_project_tree(
        kernel.root,
        kernel.python_package,
        package,
        ignore=shutil.ignore_patterns("__pycache__", "*.so", RECORD_FILE),
        declared_in=declared_in,
    )
    runtime = runtime_dir()
    for rel in python_files(runtime):
        target = package / RUNTIME_PACKAGE / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(runtime / rel, target)
    sources = package / SOURCES_DIR
    for rel in kernel.files_for(plan.variant.key.backend.kind):
        if rel.parts[0] == str(kernel.python_package.parts[0]) and rel.suffix == ".py":
            continue  # the Python package is shipped as itself, not as a JIT source
        copy_project_file(kernel.root, rel, sources / rel, declared_in=declared_in)
    (sources / "jit.json").write_text(json.dumps(plan.jit_spec, indent=2) + "\n")
    (package / RECORD_FILE).write_text(json.dumps(plan.record.to_json(), indent=2) + "\n")
    # One line: what the runtime needs from the compatibility table (no copy of it in runtime/).
    (package / RUNTIME_PACKAGE / TOOLKITS_FILE).write_text(
        json.dumps(plan.toolkits.to_json(), separators=(",", ":")) + "\n"
    )
    (dest / "setup.py").write_text(plan.setup_py)
    (dest / "pyproject.toml").write_text(plan.pyproject)


def _setup_py(
    kernel: KernelSpec, variant: Variant, namespace: str, version: str, requires_torch: str
) -> str:
    backend = variant.key.backend.kind
    compiled = (
        kernel.stable_sources_for(backend)
        if variant.key.stable_abi
        else kernel.sources_for(backend)
    )
    sources = [f"{kernel.name}/{SOURCES_DIR}/{p}" for p in compiled]
    include_dirs = [f"{kernel.name}/{SOURCES_DIR}/{p}" for p in kernel.include_dirs]
    defines = [(kernel.namespace_macro, namespace), *abi_defines(variant)]
    cxx = list(kernel.cxx_flags) + list(variant.settings.extra_cflags)
    device = backend in ("cuda", "rocm")
    own = (*kernel.nvcc_flags, *variant.settings.extra_cuda_cflags)
    nvcc = [*variant.nvcc_defaults(own), *own] if device else []
    extension = "CUDAExtension" if device else "CppExtension"
    abi3 = variant.key.python == "abi3"
    head = setup_py_head(variant, ". Do not edit: edit kernel.toml.")
    return f'''{head}
setup(
    name={kernel.name!r},
    version={version!r},
    description={kernel.description!r},
    packages=[{kernel.name!r}, {kernel.name + "." + RUNTIME_PACKAGE!r}],
    package_data={{{kernel.name!r}: [{RECORD_FILE!r}, "{SOURCES_DIR}/**/*"],
                  {kernel.name + "." + RUNTIME_PACKAGE!r}: [{TOOLKITS_FILE!r}]}},
    include_package_data=False,
    python_requires=">=3.9",
    install_requires=[{requires_torch!r}],
    ext_modules=[
        {extension}(
            name={kernel.name + "." + LIBRARY_MODULE!r},
            sources={sources!r},
            # Absolute: torch's ninja build compiles from its own build directory.
            include_dirs=[os.path.join(os.path.dirname(os.path.abspath(__file__)), d) for d in {include_dirs!r}],
            define_macros={defines!r},
            extra_compile_args={{"cxx": {cxx!r}, "nvcc": {nvcc!r}}},
            py_limited_api={abi3!r},
        )
    ],
    cmdclass={{"build_ext": BuildExtension}},
    options={{"bdist_wheel": {{"py_limited_api": "cp39"}}}} if {abi3!r} else {{}},
)
'''
