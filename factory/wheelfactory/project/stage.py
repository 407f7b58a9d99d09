"""What the runner and the engines read of a staged build, whichever kind made it: the protocols
the kinds' stages satisfy (the native kind's StagePlan in project/native.py, kernel-builder's in
project/kernel_builder.py, bring-your-own's in project/bring_your_own.py, noarch's in
project/noarch.py), what the compiled kinds' stages share (``CompiledStage``, the build record),
and what the setup.py files the factory generates share: the ABI's macros, the CUDA-wheels block."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from packaging.version import Version

from wheelfactory._runtime._record import BuildRecord
from wheelfactory._runtime._versions import MajorMinor
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.versions import target_version_macro
from wheelfactory.project.build_system import GENERATED, BuildSystem
from wheelfactory.project.keys import source_date_epoch
from wheelfactory.project.kind_facts import KindFacts
from wheelfactory.project.wheel_checks import WheelChecks


class Target(Protocol):
    """What one build makes a wheel of, as the runner names and records it: a planned variant
    (plan/identity.py Variant), or a noarch build (project/noarch.py NoarchBuild)."""

    @property
    def id(self) -> str:
        """Its directory in the output and its key in the manifest."""

    @property
    def torch_version(self) -> str | None:
        """The torch release it builds against (None: none, a pure-Python wheel)."""

    @property
    def toolkit(self) -> str | None:
        """The CUDA or ROCm toolkit version (None: cpu, or none)."""

    def as_dict(self) -> dict[str, object]:
        """What it is, in full: part of the build's cache key and of its provenance record."""


class Staged(Protocol):
    """What the runner reads of any staged build: its key and its provenance record's project."""

    @property
    def package(self) -> str:
        """The import name the smoke test imports."""

    @property
    def kind(self) -> KindFacts:
        """What the project's kind does (project/kind_facts.py): its smoke program, wheel layout."""

    @property
    def source_date_epoch(self) -> int:
        """The time every file in the wheel gets (project/keys.py source_date_epoch): part of what
        makes a rebuild byte-identical."""

    @property
    def source_root(self) -> Path:
        """The project's checkout: its git state goes into the wheel's provenance record."""

    @property
    def kernel_depends(self) -> tuple[dict[str, object], ...]:
        """The Hub kernels this variant needs at run time, as metadata.json lists them (a
        kernel-builder project's ``kernel-depends``): the provenance record carries them to export."""

    @property
    def hub_metadata(self) -> dict[str, object] | None:
        """The Hugging Face layout's metadata.json of a pure-Python build, which its manifest entry
        keeps for `wheelfactory export --hf-layout`; None: a compiled wheel (its layout metadata
        comes from its build record)."""

    def key_material(self) -> object:
        """Everything about the staged project that changes the wheel (for the cache key)."""


class Stage(Staged, Protocol):
    """What an engine needs to compile one variant of a project, whichever its kind."""

    @property
    def variant(self) -> Variant: ...

    @property
    def checks(self) -> WheelChecks:
        """What the wheel is checked against besides the factory's checks: declared ops, tests."""

    @property
    def build_system(self) -> BuildSystem:
        """What the build environment holds besides torch (project/build_system.py)."""

    def build_env(self) -> dict[str, str]:
        """Variables the project's build reads (e.g. FORCE_CUDA), on top of the factory's own."""

    def write(self, dest: Path) -> None:
        """Lay the project out in ``dest`` for a PEP 517 build."""

    def finish(self, wheel: Path, dest_dir: Path) -> Path:
        """Last touch on the repaired wheel (a bring-your-own project gets its local version here)."""


class CompiledStage:
    """What a compiled kind's stage answers unless it says otherwise: files dated by its checkout,
    no Hub kernels needed at run time, no layout metadata of its own (its build record has it), the
    build system and variables of the setup.py the factory generates, the repaired wheel as is."""

    @property
    def source_root(self) -> Path:
        raise NotImplementedError

    @property
    def source_date_epoch(self) -> int:
        return source_date_epoch(self.source_root)

    @property
    def kernel_depends(self) -> tuple[dict[str, object], ...]:
        return ()

    @property
    def hub_metadata(self) -> None:
        return None

    @property
    def build_system(self) -> BuildSystem:
        return GENERATED

    def build_env(self) -> dict[str, str]:
        return {}

    def finish(self, wheel: Path, dest_dir: Path) -> Path:
        return wheel  # the generated setup.py already set the version with its local label


def library_file(module: str, variant: Variant) -> str:
    """The compiled module's file: ``_C.abi3.so``, ``_C.cpython-311-x86_64-linux-gnu.so``."""
    python = variant.key.python
    if python == "abi3":
        return f"{module}.abi3.so"
    return f"{module}.cpython-{python.replace('.', '')}-{variant.key.arch}-linux-gnu.so"


def variant_record(
    variant: Variant,
    *,
    name: str,
    version: str,
    namespace: str,
    ops: tuple[str, ...],
    library: str,
    source_digest: str,
) -> BuildRecord:
    """The build record of a variant's wheel: what it is built for, from the variant, and what the
    project puts in it."""
    return BuildRecord(
        name=name,
        version=version,
        variant=variant.id,
        # A stable-ABI build serves every torch from its target on: the record names the target.
        torch=MajorMinor.parse(
            variant.key.torch if variant.key.stable_abi else variant.torch_version
        ),
        built_with_torch=variant.torch_version,
        backend=variant.key.backend.kind,
        toolkit=MajorMinor.parse(variant.toolkit) if variant.toolkit else None,
        cxx11_abi=variant.key.cxx11_abi,
        python=variant.key.python,
        arch=variant.key.arch,
        arch_list=variant.shipped_arch_list,
        namespace=namespace,
        ops=ops,
        library=library,
        stable_abi=variant.key.stable_abi,
        source_digest=source_digest,
        parts=variant.split_parts,
    )


# torch >= 2.7 defines Py_LIMITED_API itself for py_limited_api extensions.
TORCH_DEFINES_LIMITED_API = Version("2.7")
LIMITED_API = "0x03090000"  # cp39-abi3: one wheel for every CPython >= 3.9


def abi_defines(variant: Variant) -> list[tuple[str, str | None]]:
    """The macros a generated setup.py defines for the variant's ABI: TORCH_TARGET_VERSION for a
    stable-ABI build (only the stable ABI of the target and older may be used), Py_LIMITED_API
    for an abi3 one against a torch that does not define it."""
    defines: list[tuple[str, str | None]] = []
    if variant.key.stable_abi:
        defines.append(("TORCH_TARGET_VERSION", target_version_macro(variant.key.torch)))
    if Version(variant.key.torch) < TORCH_DEFINES_LIMITED_API and variant.key.python == "abi3":
        defines.append(("Py_LIMITED_API", LIMITED_API))
    return defines


def setup_py_head(variant: Variant, about: str) -> str:
    """A generated setup.py's start (``about``: what it is, after the variant id): the torch and
    C++ ABI it must build against, the CUDA toolkit's wheels, then torch's extension builder."""
    device = variant.key.backend.kind in ("cuda", "rocm")
    return f"""# Generated by wheelfactory for variant {variant.id}{about}
import os

import torch
from setuptools import setup

EXPECTED_TORCH = {variant.torch_version!r}
EXPECTED_CXX11_ABI = {variant.key.cxx11_abi!r}
if torch.__version__.split("+")[0] != EXPECTED_TORCH:
    raise SystemExit(
        "wheelfactory: variant {variant.id} builds against torch==" + EXPECTED_TORCH
        + " but torch " + torch.__version__ + " is installed in this build environment"
    )
if bool(torch.compiled_with_cxx11_abi()) != EXPECTED_CXX11_ABI:
    # A wheel built against the other ABI would claim the wrong one in its build record.
    raise SystemExit(
        "wheelfactory: variant {variant.id} needs the " + ("cxx11" if EXPECTED_CXX11_ABI else "pre-cxx11")
        + " ABI build of torch " + EXPECTED_TORCH + " but the installed one is the other ABI; "
        "point [build].torch_index at an index that serves it"
    )
{cuda_wheels_block(variant)}
from torch.utils.cpp_extension import BuildExtension, {"CUDAExtension" if device else "CppExtension"}  # noqa: E402 (reads CUDA_HOME when imported)
"""


def cuda_wheels_block(variant: Variant) -> str:
    """setup.py lines that point CUDA_HOME at the toolkit installed from NVIDIA's wheels: nvcc,
    nvvm and crt land in site-packages/nvidia/<home>, beside the CUDA headers torch's own
    nvidia-* wheels bring (cusparse.h, cublas_v2.h), which torch's headers include. The path is
    only known inside the build environment, hence here and not in the container's variables.
    Empty for any other variant."""
    if variant.key.backend.kind != "cuda" or not variant.toolkit_wheels_home:
        return ""
    return f"""
CUDA_WHEELS_HOME = {variant.toolkit_wheels_home!r}
if not os.environ.get("CUDA_HOME"):
    import nvidia  # the namespace package NVIDIA's wheels install into

    homes = [os.path.join(p, CUDA_WHEELS_HOME) for p in nvidia.__path__
             if os.path.isfile(os.path.join(p, CUDA_WHEELS_HOME, "bin", "nvcc"))]
    if not homes:
        raise SystemExit("wheelfactory: no nvcc under site-packages/nvidia/" + CUDA_WHEELS_HOME
                         + ": the toolkit wheels ({", ".join(variant.toolkit_wheels)}) are not installed")
    os.environ["CUDA_HOME"] = homes[0]
    os.environ["PATH"] = os.path.join(homes[0], "bin") + os.pathsep + os.environ.get("PATH", "")
    # The wheel ships libcudart.so.<major> only; the link step asks for -lcudart.
    lib = os.path.join(homes[0], "lib")
    versioned = sorted(n for n in os.listdir(lib) if n.startswith("libcudart.so."))
    if versioned and not os.path.exists(os.path.join(lib, "libcudart.so")):
        os.symlink(versioned[0], os.path.join(lib, "libcudart.so"))
"""
