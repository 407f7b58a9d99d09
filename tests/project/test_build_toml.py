"""build.toml (Hugging Face kernel-builder projects): every edition read into the typed spec, the
helpers the build wiring will use, each error as one exact line, and a fuzz suite: whatever the
document, the reader returns a spec or raises a one-line ConfigError naming build.toml."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from wheelfactory.errors import ConfigError
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.build_toml import (
    Hub,
    KernelBuilderSpec,
    KernelDependency,
    StableAbi,
    bounds_specifier,
    KernelUnit,
    is_kernel_builder_project,
)
from wheelfactory.project.build_toml_reader import load_build_toml, parse_build_toml
from wheelfactory.project.build_toml_schema import DEPENDENCIES, GENERAL_BACKENDS, detect_edition

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE = "kb/build.toml"  # display name of in-memory documents

TREE = (
    "torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h", "torch-ext/activation/__init__.py",
    "torch-ext/activation/layers.py", "torch-ext/activation/configs/tuned.json",
    "activation/activation_kernels.cu", "activation/cuda_compat.h", "activation/dispatch_utils.h",
    "activation_cpu/activation_cpu.cpp", "activation_metal/activation.mm",
    "activation_metal/activation.metal", "activation_xpu/activation_xpu.cpp",
)


def make_tree(root: Path) -> Path:
    for name in TREE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"// {name}\n")
    return root


def unit_names(units: Iterable[KernelUnit]) -> tuple[str, ...]:
    return tuple(unit.name for unit in units)


def units_by_backend(spec: KernelBuilderSpec) -> dict[str, tuple[KernelUnit, ...]]:
    """Every declared backend and the units it compiles (empty for a noarch kernel)."""
    return {backend: spec.units_for(backend) for backend in spec.general.backends}


def files_for(spec: KernelBuilderSpec, backend: str) -> tuple[Path, ...]:
    """What the spec says a ``backend`` build reads, relative to root: the Python package, the
    torch binding sources and the sources of the units for that backend."""
    files: set[Path] = set(spec.torch.src)
    package = spec.root / spec.python_package
    files.update(p.relative_to(spec.root) for p in package.rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts)
    for unit in spec.units_for(backend):
        files.update(unit.src)
    return tuple(sorted(files))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tree(tmp_path_factory.mktemp("kb_tree"))


def parse(text: str, root: Path) -> KernelBuilderSpec:
    return parse_build_toml(TomlDocument.from_text(text, FILE), root)


def error_of(text: str, root: Path) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, root)
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    return message


# --------------------------------------------------------------------------------------------
# One real-looking document per edition (modelled on kernels-community activation and the
# kernel-builder template)
# --------------------------------------------------------------------------------------------

V1 = """
[general]
name = "activation"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.activation]
language = "cuda-hipify"
cuda-capabilities = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0"]
rocm-archs = ["gfx90a", "gfx942"]
src = ["activation/activation_kernels.cu", "activation/cuda_compat.h", "activation/dispatch_utils.h"]
depends = ["torch"]

[kernel.activation_metal]
language = "metal"
src = ["activation_metal/activation.mm", "activation_metal/activation.metal"]
depends = ["torch"]
"""

V2 = """
[general]
name = "activation"
cuda-minver = "12.4"
cuda-maxver = "12.8"
python-depends = ["einops"]

[general.hub]
repo-id = "kernels-community/activation"
branch = "v1"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
include = ["."]
pyext = ["py", "json"]
minver = "2.5"
maxver = "2.8"

[kernel.activation]
backend = "cuda"
cuda-capabilities = ["8.0", "9.0a"]
cuda-flags = ["--use_fast_math"]
src = ["activation/activation_kernels.cu", "activation/cuda_compat.h"]
depends = ["torch", "cutlass_3_6"]
include = ["activation"]

[kernel.activation_cpu]
backend = "cpu"
cxx-flags = ["-O3"]
src = ["activation_cpu/activation_cpu.cpp"]
depends = ["torch"]
"""

V3 = """
[general]
name = "activation"
version = 1
backends = ["cuda", "rocm", "xpu", "cpu"]
upstream = "https://example.org/vllm-project/vllm"

[general.cuda]
minver = "12.6"
python-depends = ["nvidia-cutlass-dsl"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.activation]
backend = "cuda"
cuda-minver = "12.8"
src = ["activation/activation_kernels.cu"]
depends = ["torch"]

[kernel.activation_rocm]
backend = "rocm"
rocm-archs = ["gfx906", "gfx90a", "gfx942", "gfx1100"]
hip-flags = ["-O3"]
src = ["activation/activation_kernels.cu"]
depends = ["torch"]

[kernel.activation_xpu]
backend = "xpu"
sycl-flags = ["-fsycl"]
src = ["activation_xpu/activation_xpu.cpp"]
depends = ["torch", "sycl_tla"]
"""

V4 = """
[general]
name = "activation"
version = 2
license = "apache-2.0"
backends = ["cuda", "metal"]

[general.cuda]
capabilities = ["8.0", "9.0", "10.0", "12.0"]
maxver = "12.9"

[torch]
src = ["torch-ext/torch_binding.cpp"]
stable-abi = "2.10"

[kernel.activation]
backend = "cuda"
src = ["activation/activation_kernels.cu"]
depends = ["torch"]

[kernel.activation_metal]
backend = "metal"
src = ["activation_metal/activation.mm", "activation_metal/activation.metal"]
depends = ["torch", "metal-cpp"]
"""

V5 = """
[general]
edition = 5
name = "activation"
version = 3
license = "apache-2.0"
backends = ["cuda", "rocm", "cpu", "tpu"]
source = "https://example.org/org/activation"
minver = "0.11.0"
kernel-depends = [{ repo-id = "kernels-community/triton-layer-norm", version = 1 }]

[general.cuda]
minver = "12.6"
maxver = "13.0"
kernel-depends = [{ repo-id = "kernels-community/deep-gemm", revision = "34fa" }]

[general.hub]
repo-id = "kernels-community/activation"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
minver = "2.9"
cxx-flags = ["-DACT_FAST"]
stable-abi = { cuda = "2.10", cpu = "2.11" }

[kernel.activation]
backend = "cuda"
cuda-capabilities = ["9.0a", "10.0f"]
src = ["activation/activation_kernels.cu"]
depends = ["torch"]

[kernel.activation_rocm]
backend = "rocm"
src = ["activation/activation_kernels.cu"]
depends = ["torch"]

[kernel.activation_cpu]
backend = "cpu"
src = ["activation_cpu/activation_cpu.cpp"]
depends = ["torch"]
"""

NOARCH_V3 = """
[general]
name = "activation"
backends = ["cpu", "cuda"]
"""

NOARCH_V4 = """
[general]
name = "activation"
version = 1
license = "mit"
backends = ["cuda", "rocm", "xpu"]

[torch-noarch]
"""

NOARCH_V5 = """
[general]
edition = 5
name = "activation"
version = 1
license = "mit"
backends = ["cuda", "rocm"]

[torch-noarch]
pyext = ["py", "json"]
cuda_capabilities = ["9.0"]
rocm_archs = ["gfx942"]
"""

UNIVERSAL_V1 = """
[general]
name = "activation"

[torch]
universal = true
"""

UNIVERSAL_V2 = """
[general]
name = "activation"
universal = true

[torch]
"""

DOCUMENTS = {"v1": V1, "v2": V2, "v3": V3, "v4": V4, "v5": V5, "noarch-v3": NOARCH_V3,
             "noarch-v4": NOARCH_V4, "noarch-v5": NOARCH_V5, "universal-v1": UNIVERSAL_V1,
             "universal-v2": UNIVERSAL_V2}


@pytest.mark.parametrize("name, edition", [("v1", 1), ("v2", 2), ("v3", 3), ("v4", 4), ("v5", 5),
                                           ("noarch-v3", 3), ("noarch-v4", 4), ("noarch-v5", 5),
                                           ("universal-v1", 1), ("universal-v2", 2)])
def test_edition_is_detected(name: str, edition: int, tree: Path) -> None:
    assert detect_edition(TomlDocument.from_text(DOCUMENTS[name], FILE)) == edition
    assert parse(DOCUMENTS[name], tree).edition == edition


def test_edition_1_hipify_unit_is_built_for_rocm_too(tree: Path) -> None:
    spec = parse(V1, tree)
    assert spec.general.name == "activation" and spec.general.version is None
    assert spec.general.backends == ("cuda", "metal", "rocm")
    assert unit_names(spec.kernels) == ("activation", "activation_metal", "activation_rocm")
    cuda, metal, rocm = spec.kernels
    assert (cuda.backend, metal.backend, rocm.backend) == ("cuda", "metal", "rocm")
    assert cuda.cuda_capabilities == ("7.0", "7.5", "8.0", "8.6", "8.9", "9.0")
    assert rocm.rocm_archs == ("gfx90a", "gfx942") and rocm.src == cuda.src
    assert spec.torch.src == (Path("torch-ext/torch_binding.cpp"), Path("torch-ext/torch_binding.h"))
    assert spec.torch.pyext == ("py", "pyi") and spec.torch.data_extensions == ()
    assert not spec.noarch and spec.torch_specifier() == SpecifierSet()


def test_edition_2_bounds_hub_and_tagged_units(tree: Path) -> None:
    spec = parse(V2, tree)
    general = spec.general
    assert general.backends == ("cpu", "cuda") and general.python_depends == ("einops",)
    assert general.hub == Hub(repo_id="kernels-community/activation", branch="v1")
    assert spec.cuda_specifier() == SpecifierSet(">=12.4,<12.9")
    assert spec.torch_specifier() == SpecifierSet(">=2.5,<2.9")
    assert "2.8.1" in spec.torch_specifier() and "2.9.0" not in spec.torch_specifier()
    assert spec.torch.include == (Path("."),) and spec.torch.data_extensions == ("json",)
    cuda = spec.units_for("cuda")[0]
    assert cuda.depends == ("torch", "cutlass_3_6") and cuda.cuda_flags == ("--use_fast_math",)
    assert cuda.include == (Path("activation"),) and cuda.cuda_capabilities == ("8.0", "9.0a")
    assert spec.units_for("cpu")[0].cxx_flags == ("-O3",)
    assert spec.units_for("rocm") == ()


def test_edition_3_backends_and_cuda_minver_per_unit(tree: Path) -> None:
    spec = parse(V3, tree)
    assert spec.general.backends == ("cpu", "cuda", "rocm", "xpu") and spec.general.license is None
    assert spec.general.version == 1 and spec.general.upstream == "https://example.org/vllm-project/vllm"
    assert spec.general.backend_python_depends == (("cuda", ("nvidia-cutlass-dsl",)),)
    assert spec.cuda_specifier() == SpecifierSet(">=12.6")
    assert unit_names(spec.units_for("cuda")) == ("activation",)
    assert spec.units_for("cuda", cuda="12.6") == ()  # the unit needs CUDA 12.8
    assert unit_names(spec.units_for("cuda", cuda="12.8")) == ("activation",)
    assert spec.units_for("rocm")[0].hip_flags == ("-O3",)
    assert spec.units_for("xpu")[0].sycl_flags == ("-fsycl",)
    assert spec.compiled_backends() == ("cuda", "rocm", "xpu")  # cpu is declared, nothing compiles
    assert {b: unit_names(u) for b, u in units_by_backend(spec).items()} == {
        "cpu": (), "cuda": ("activation",), "rocm": ("activation_rocm",), "xpu": ("activation_xpu",)}


def test_edition_4_capabilities_and_stable_abi(tree: Path) -> None:
    spec = parse(V4, tree)
    assert spec.general.license == "apache-2.0" and spec.general.version == 2
    assert spec.general.cuda_capabilities == ("8.0", "9.0", "10.0", "12.0")
    assert spec.cuda_specifier() == SpecifierSet("<12.10")
    assert spec.torch.stable_abi == StableAbi(every_backend="2.10")
    assert spec.stable_abi_for("cuda") == spec.stable_abi_for("metal") == "2.10"
    assert spec.units_for("metal")[0].depends == ("torch", "metal-cpp")


def test_edition_5_marker_depends_and_per_backend_stable_abi(tree: Path) -> None:
    spec = parse(V5, tree)
    general = spec.general
    assert general.backends == ("cpu", "cuda", "rocm", "tpu") and general.kernels_minver == "0.11.0"
    assert general.source == "https://example.org/org/activation"
    assert general.kernel_depends == (
        ("", (KernelDependency("kernels-community/triton-layer-norm", version=1),)),
        ("cuda", (KernelDependency("kernels-community/deep-gemm", revision="34fa"),)))
    assert spec.cuda_specifier() == SpecifierSet(">=12.6,<13.1")
    assert spec.torch_specifier() == SpecifierSet(">=2.9") and spec.torch.cxx_flags == ("-DACT_FAST",)
    assert spec.stable_abi_for("cuda") == "2.10" and spec.stable_abi_for("cpu") == "2.11"
    assert spec.stable_abi_for("rocm") is None
    assert spec.units_for("cuda")[0].cuda_capabilities == ("9.0a", "10.0f")
    assert spec.compiled_backends() == ("cpu", "cuda", "rocm")


@pytest.mark.parametrize("name", ["noarch-v3", "noarch-v4", "noarch-v5", "universal-v1", "universal-v2"])
def test_noarch(name: str, tree: Path) -> None:
    spec = parse(DOCUMENTS[name], tree)
    assert spec.noarch and spec.kernels == () and spec.compiled_backends() == ()
    assert all(spec.units_for(b) == () for b in spec.general.backends)
    assert files_for(spec, "cuda") == (Path("torch-ext/activation/__init__.py"),
                                      Path("torch-ext/activation/configs/tuned.json"),
                                      Path("torch-ext/activation/layers.py"))


def test_universal_means_every_backend(tree: Path) -> None:
    for text in (UNIVERSAL_V1, UNIVERSAL_V2):
        spec = parse(text, tree)
        assert spec.general.universal and spec.general.backends == GENERAL_BACKENDS[3]


def test_noarch_v5_keeps_torch_noarch_settings(tree: Path) -> None:
    spec = parse(NOARCH_V5, tree)
    assert not spec.torch.present and spec.torch.data_extensions == ("json",)
    assert spec.general.cuda_capabilities == ("9.0",) and spec.general.rocm_archs == ("gfx942",)


def test_files_for_a_backend(tree: Path) -> None:
    spec = parse(V2, tree)
    package = {Path("torch-ext/activation/__init__.py"), Path("torch-ext/activation/layers.py"),
               Path("torch-ext/activation/configs/tuned.json")}
    binding = {Path("torch-ext/torch_binding.cpp"), Path("torch-ext/torch_binding.h")}
    assert set(files_for(spec, "cpu")) == package | binding | {Path("activation_cpu/activation_cpu.cpp")}
    assert set(files_for(spec, "cuda")) == package | binding | {
        Path("activation/activation_kernels.cu"), Path("activation/cuda_compat.h")}
    assert spec.python_package == Path("torch-ext/activation")


def test_load_from_disk_and_project_detection(tmp_path: Path) -> None:
    make_tree(tmp_path)
    assert not is_kernel_builder_project(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_build_toml(tmp_path)
    assert str(info.value) == (f"{tmp_path / 'build.toml'}: file not found; "
                               "a kernel-builder project has build.toml at its root")
    (tmp_path / "build.toml").write_text(V5)
    assert is_kernel_builder_project(tmp_path)
    spec = load_build_toml(tmp_path)
    assert spec.root == tmp_path and spec.edition == 5


def test_dashed_name_maps_to_python_name(tmp_path: Path) -> None:
    make_tree(tmp_path)
    (tmp_path / "torch-ext" / "flash_attn").mkdir()
    spec = parse(NOARCH_V4.replace('name = "activation"', 'name = "flash-attn"'), tmp_path)
    assert spec.general.python_name == "flash_attn"
    assert spec.python_package == Path("torch-ext/flash_attn")


def test_bounds_specifier() -> None:
    assert bounds_specifier(None, None) == SpecifierSet()
    assert bounds_specifier("2.5", None) == SpecifierSet(">=2.5")
    assert bounds_specifier(None, "2") == SpecifierSet("<3")
    assert bounds_specifier("12.4", "12.9") == SpecifierSet(">=12.4,<12.10")


def test_every_known_dependency_is_accepted(tree: Path) -> None:
    text = V2.replace('depends = ["torch", "cutlass_3_6"]', f"depends = {list(DEPENDENCIES)!r}".replace("'", '"'))
    assert parse(text, tree).units_for("cuda")[0].depends == DEPENDENCIES


# --------------------------------------------------------------------------------------------
# Errors: one exact line each
# --------------------------------------------------------------------------------------------

ERRORS = [
    # (document, old, new, exact message; {root} is the project root)
    ("v5", "edition = 5", "edition = 6",
     ("kb/build.toml:3: general.edition: edition 6 is not one this reader knows; "
     "editions 1-4 are unmarked; the only marked edition is 5")),
    ("v5", "edition = 5", 'edition = "5"',
     'kb/build.toml:3: general.edition: must be an integer, got string \'5\'; write edition = 5'),
    ("v5", "[general]\nedition = 5", "edition = 5\n[general]",
     ("kb/build.toml:2: edition: belongs in [general]; move it under [general] (edition = 5), "
     "or drop it for editions 1-4")),
    ("v5", "[general.cuda]", "[general.rocm]\narchs = [\"gfx942\"]\n[general.cuda]",
     "kb/build.toml:12: general.rocm: unknown key; the keys allowed here are: "),
    ("v3", "[torch]", "[torch]\nstable-abi = \"2.10\"",
     ("kb/build.toml:2: general.license: is required in edition 4; "
     'e.g. license = "apache-2.0" (a Hub license identifier)')),
    ("noarch-v5", 'rocm_archs = ["gfx942"]', 'rocm_archs = ["942"]',
     "kb/build.toml:12: torch-noarch.rocm_archs: '942' is not a ROCm architecture; e.g. \"gfx90a\", \"gfx942\""),
    ("noarch-v5", 'rocm_archs = ["gfx942"]', 'rocm-archs = ["gfx942"]',
     "kb/build.toml:12: torch-noarch.rocm-archs: unknown key; did you mean 'rocm_archs'?"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]\n', "",
     ("kb/build.toml:2: general.backends: is required; e.g. backends = [\"cuda\"]; known: "
     "cann, cpu, cuda, metal, neuron, rocm, xpu")),
    ("v3", "[general]\nname", "[genral]\nname",
     "kb/build.toml:2: genral: unknown key; did you mean 'general'?"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = ["cuda", "rocm", "xpu", "cpu"]\nlicence = "mit"',
     "kb/build.toml:6: general.licence: unknown key; did you mean 'license'?"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = ["cuda", "roc"]',
     "kb/build.toml:5: general.backends: unknown backend 'roc'; did you mean 'rocm'?"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = []',
     ("kb/build.toml:5: general.backends: names no backend; list one or more of: "
     "cann, cpu, cuda, metal, neuron, rocm, xpu")),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = "cuda"',
     "kb/build.toml:5: general.backends: must be an array of strings, got string 'cuda'"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = ["cuda", "tpu"]',
     "kb/build.toml:5: general.backends: unknown backend 'tpu'; did you mean 'xpu'?"),
    ("v3", 'backends = ["cuda", "rocm", "xpu", "cpu"]', 'backends = ["cuda", "cuda"]',
     "kb/build.toml:5: general.backends: names a backend twice"),
    ("v3", 'name = "activation"', 'name = "Activation"',
     ("kb/build.toml:3: general.name: 'Activation' is not a kernel name: lower-case letters, digits "
     "and '-' or '_', starting with a letter, ending with a letter or digit; "
     'e.g. name = "flash-attention"')),
    ("v4", 'name = "activation"', 'name = "act_ivation"',
     ("kb/build.toml:3: general.name: 'act_ivation' is not a kernel name: lower-case letters, digits "
     "and '-', starting with a letter, ending with a letter or digit; e.g. name = \"flash-attention\"")),
    ("v3", 'name = "activation"', 'name = "gelu"',
     ("kb/build.toml:3: general.name: the Python package torch-ext/gelu/ does not exist in {root}; "
     "kernel-builder reads the kernel's Python code from torch-ext/gelu/")),
    ("v3", 'name = "activation"\n', "",
     'kb/build.toml:2: general.name: is required; e.g. name = "activation"'),
    ("v4", "version = 2\n", "",
     "kb/build.toml:2: general.version: is required in edition 4; e.g. version = 1 (the kernel's major version)"),
    ("v4", 'license = "apache-2.0"\n', "",
     ('kb/build.toml:2: general.license: is required in edition 4; e.g. license = "apache-2.0" '
     "(a Hub license identifier)")),
    ("v4", "version = 2", "version = -2",
     "kb/build.toml:4: general.version: must be a whole number from 0, got -2; e.g. version = 1"),
    ("v4", "version = 2", 'version = "2"',
     "kb/build.toml:4: general.version: must be an integer, got string '2'"),
    ("noarch-v5", '[torch-noarch]\npyext = ["py", "json"]\ncuda_capabilities = ["9.0"]\nrocm_archs = ["gfx942"]\n', "",
     ("kb/build.toml: torch: is required in edition 5: [torch] or [torch-noarch]; "
     "add [torch] with the binding sources, or an empty [torch-noarch]")),
    ("noarch-v4", "[torch-noarch]", "[torch-noarch]\n[torch]",
     "kb/build.toml:8: torch-noarch: [torch] and [torch-noarch] are both given; keep one framework table"),
    ("noarch-v4", "[torch-noarch]", "[torch-noarch]\npyext = [\"py\"]",
     "kb/build.toml:9: torch-noarch.pyext: unknown key; the keys allowed here are: "),
    ("noarch-v3", 'backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda"]\n[tvm-ffi]\nsrc = []',
     ("kb/build.toml:5: tvm-ffi: tvm-ffi kernels are not torch extensions; this factory builds torch "
     "extensions only; describe the kernel with a [torch] table")),
    ("universal-v1", "[torch]\nuniversal = true\n", "",
     "kb/build.toml: torch: is required in this format (edition 1); add [torch] with the binding sources"),
    ("noarch-v3", 'backends = ["cpu", "cuda"]',
     'backends = ["cpu", "cuda"]\n[kernel.a]\nbackend = "cpu"\nsrc = ["activation_cpu/activation_cpu.cpp"]\ndepends = []',
     "kb/build.toml:5: kernel.a: compiled units need a [torch] table; add [torch] with the binding sources (src = [...])"),
    ("v2", 'backend = "cuda"', 'backend = "cude"',
     "kb/build.toml:20: kernel.activation.backend: unknown backend 'cude'; did you mean 'cuda'?"),
    ("v2", 'backend = "cpu"', 'backend = "tpu"',
     "kb/build.toml:28: kernel.activation_cpu.backend: unknown backend 'tpu'; did you mean 'xpu'?"),
    ("v3", 'backend = "rocm"\n', "",
     "kb/build.toml:21: kernel.activation_rocm.backend: is required; one of: cpu, cuda, metal, rocm, xpu"),
    ("v2", 'cxx-flags = ["-O3"]', 'cuda-flags = ["-O3"]',
     "kb/build.toml:29: kernel.activation_cpu.cuda-flags: unknown key; did you mean 'cxx-flags'?"),
    ("v2", 'cuda-capabilities = ["8.0", "9.0a"]', 'cuda-capabilities = ["8.0", "sm_90"]',
     ("kb/build.toml:21: kernel.activation.cuda-capabilities: 'sm_90' is not a CUDA capability; "
     'e.g. "8.0", "9.0a", "10.0"')),
    ("v3", 'rocm-archs = ["gfx906", "gfx90a", "gfx942", "gfx1100"]', 'rocm-archs = ["90a"]',
     ("kb/build.toml:23: kernel.activation_rocm.rocm-archs: '90a' is not a ROCm architecture; "
     'e.g. "gfx90a", "gfx942"')),
    ("v2", 'depends = ["torch", "cutlass_3_6"]', 'depends = ["torch", "cutlass_3_7"]',
     "kb/build.toml:24: kernel.activation.depends: unknown dependency 'cutlass_3_7'; did you mean 'cutlass_3_9'?"),
    ("v2", 'depends = ["torch", "cutlass_3_6"]\n', "",
     "kb/build.toml:19: kernel.activation.depends: is required; e.g. depends = [\"torch\"] (or [] for none)"),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]\n', "",
     ("kb/build.toml:27: kernel.activation_cpu.src: is required; list the unit's sources and headers: "
     'src = ["x/x.cu"]')),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', "src = []",
     "kb/build.toml:30: kernel.activation_cpu.src: names no source; list the unit's sources and headers"),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', 'src = ["activation_cpu/missing.cpp"]',
     ("kb/build.toml:30: kernel.activation_cpu.src: file 'activation_cpu/missing.cpp' does not exist in "
     "{root}; create it, or fix the path (relative to build.toml)")),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', 'src = ["../outside.cpp"]',
     ("kb/build.toml:30: kernel.activation_cpu.src: '../outside.cpp' must be a path inside the project; "
     "name a file relative to the directory of build.toml, without '..'")),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', 'src = ["/etc/passwd"]',
     ("kb/build.toml:30: kernel.activation_cpu.src: '/etc/passwd' must be a path inside the project; "
     "name a file relative to the directory of build.toml, without '..'")),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', 'src = ["a\\u0000b"]',
     "kb/build.toml:30: kernel.activation_cpu.src: 'a\\x00b' is not a path; name a file relative to build.toml"),
    ("v2", 'src = ["activation_cpu/activation_cpu.cpp"]', 'src = "activation_cpu/activation_cpu.cpp"',
     ("kb/build.toml:30: kernel.activation_cpu.src: must be an array of strings, got string "
     "'activation_cpu/activation_cpu.cpp'")),
    ("v2", 'include = ["."]', 'include = ["headers"]',
     ("kb/build.toml:14: torch.include: directory 'headers' does not exist in {root}; "
     "create it, or fix the path (relative to build.toml)")),
    ("v2", 'pyext = ["py", "json"]', 'pyext = ["py", ".json"]',
     "kb/build.toml:15: torch.pyext: '.json' is not a file extension; write it without the dot: \"json\""),
    ("v2", 'minver = "2.5"', 'minver = "2.x"',
     "kb/build.toml:16: torch.minver: '2.x' is not a version; write numbers and dots, e.g. \"12.4\""),
    ("v2", 'maxver = "2.8"', 'maxver = "2.4"',
     "kb/build.toml:17: torch.maxver: the torch maximum 2.4 is below the minimum 2.5"),
    ("v2", 'cuda-maxver = "12.8"', 'cuda-maxver = "12.2"',
     "kb/build.toml:5: general.cuda-maxver: the CUDA maximum 12.2 is below the minimum 12.4"),
    ("v2", 'python-depends = ["einops"]', 'python-depends = ["einop"]',
     ("kb/build.toml:6: general.python-depends: 'einop' is not a dependency this format knows; "
     "did you mean 'einops'?")),
    ("v2", 'repo-id = "kernels-community/activation"', 'repo-id = "activation"',
     ("kb/build.toml:9: general.hub.repo-id: 'activation' is not a Hub repository id; "
     'e.g. repo-id = "my-org/activation"')),
    ("v3", 'upstream = "https://example.org/vllm-project/vllm"', 'upstream = "vllm"',
     "kb/build.toml:6: general.upstream: 'vllm' is not a URL; e.g. upstream = \"https://example.org/org/repo\""),
    ("v5", 'minver = "2.9"', 'minver = "2.9.1"',
     "kb/build.toml:22: torch.minver: '2.9.1' is not a version; write \"major.minor\", e.g. \"2.8\""),
    ("v5", 'stable-abi = { cuda = "2.10", cpu = "2.11" }', 'stable-abi = { cuda = "2.10", gpu = "2.11" }',
     "kb/build.toml:24: torch.stable-abi.gpu: unknown key; did you mean 'xpu'?"),
    ("v5", 'stable-abi = { cuda = "2.10", cpu = "2.11" }', 'stable-abi = "2.9"',
     "kb/build.toml:24: torch.stable-abi: torch 2.9 has no stable ABI; the stable ABI starts at torch 2.10"),
    ("v4", 'stable-abi = "2.10"', "stable-abi = 2.10",
     "kb/build.toml:14: torch.stable-abi: must be a torch version (\"2.10\"), got number 2.1"),
    ("v5", 'version = 1 }', 'version = 1, revision = "x" }',
     ("kb/build.toml:10: general.kernel-depends[1]: needs exactly one of version and revision; "
     'e.g. { repo-id = "org/kernel", version = 1 }')),
    ("v1", 'language = "cuda-hipify"', 'language = "hip"',
     "kb/build.toml:9: kernel.activation.language: unknown language 'hip'; known: cuda, cuda-hipify, metal"),
    ("v1", "[kernel.activation_metal]", "[kernel.activation_rocm]",
     ("kb/build.toml:15: kernel.activation_rocm: unit 'activation_rocm' is given twice "
     "(a cuda-hipify unit adds <name>_rocm); rename one of them")),
    ("v1", 'language = "cuda-hipify"', 'language = "cuda-hipify"\ncuda-flags = []',
     ("kb/build.toml:10: kernel.activation.cuda-flags: unknown key; the keys allowed here are: "
     "cuda-capabilities, depends, include, language, rocm-archs, src")),
    ("v2", "[kernel.activation_cpu]", '[kernel."activation cpu"]',
     ('kb/build.toml:27: kernel."activation cpu": is not a unit name: letters, digits, \'_\', \'-\' or \'.\'; '
     "e.g. [kernel.activation]")),
    ("noarch-v3", '[general]\nname = "activation"\nbackends = ["cpu", "cuda"]', "general = 1",
     "kb/build.toml:2: general: must be a table, got integer 1"),
]


@pytest.mark.parametrize("document, old, new, expected", ERRORS,
                         ids=[f"{d}-{i}" for i, (d, *_rest) in enumerate(ERRORS)])
def test_error_messages(document: str, old: str, new: str, expected: str, tree: Path) -> None:
    text = DOCUMENTS[document]
    assert old in text, old
    message = error_of(text.replace(old, new, 1), tree)
    expected = expected.replace("{root}", str(tree))
    if expected.endswith(": "):  # the list of allowed keys is long: its start is enough
        assert message.startswith(expected), message
    else:
        assert message == expected


def test_missing_general_table(tree: Path) -> None:
    assert error_of('[torch]\nsrc = []\n', tree) == (
        'kb/build.toml: general: is required; start the file with [general] and name = "..."')


def test_symlink_leading_outside_is_refused(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "project")
    (tmp_path / "secret.cpp").write_text("// outside\n")
    os.symlink(tmp_path / "secret.cpp", root / "activation_cpu" / "link.cpp")
    message = error_of(V2.replace("activation_cpu/activation_cpu.cpp", "activation_cpu/link.cpp"), root)
    assert message == (f"kb/build.toml:30: kernel.activation_cpu.src: 'activation_cpu/link.cpp' leads "
                       f"outside the project (a symlink to {tmp_path / 'secret.cpp'}); "
                       "copy the file into the project instead of linking to it")


def test_symlinked_include_dir_outside_is_refused(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "project")
    (tmp_path / "headers").mkdir()
    os.symlink(tmp_path / "headers", root / "headers")
    message = error_of(V2.replace('include = ["."]', 'include = ["headers"]'), root)
    assert "torch.include: 'headers' leads outside the project" in message


def test_symlink_inside_is_accepted(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    os.symlink(root / "activation_cpu" / "activation_cpu.cpp", root / "activation_cpu" / "alias.cpp")
    spec = parse(V2.replace("activation_cpu/activation_cpu.cpp", "activation_cpu/alias.cpp"), root)
    assert spec.units_for("cpu")[0].src == (Path("activation_cpu/alias.cpp"),)


def test_symlink_loop_is_a_clean_error(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    message = error_of(V2.replace("activation_cpu/activation_cpu.cpp", "loop_a"), root)
    assert message.startswith("kb/build.toml:30: kernel.activation_cpu.src: 'loop_a' ")


def test_not_toml(tree: Path) -> None:
    message = error_of("[general\nname = 1", tree)
    assert message.startswith("kb/build.toml:1: not valid TOML")


# --------------------------------------------------------------------------------------------
# Fuzz: mutated valid documents give a spec or one clean line naming build.toml
# --------------------------------------------------------------------------------------------

FUZZ = settings(deadline=None, database=None, max_examples=150,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                phases=[Phase.explicit, Phase.generate, Phase.shrink])

BASES = {name: tomllib.loads(text) for name, text in DOCUMENTS.items()}
NASTY = ["", " ", "\n", "\x00", "\u2028", "é", "🔥", "..", "../x", "/abs", "~/x", "a" * 5000,
         "2.6\n", "gfx90a\n", "٨.0", "12.٤", "cuda ", "CUDA", "[/red]", "torch-ext", ".", "null"]
SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True), st.booleans(),
    st.datetimes(timezones=st.sampled_from([None, dt.timezone.utc])), st.dates(), st.times(),
    st.sampled_from(NASTY), st.text(max_size=8),
)
VALUES = st.one_of(
    SCALARS, st.builds(list), st.builds(dict), st.lists(SCALARS, max_size=3),
    st.lists(st.sampled_from(NASTY + ["cuda", "rocm", "torch", "8.0", "2.10", "py"]), max_size=3),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=2),
    st.lists(st.dictionaries(st.sampled_from(["repo-id", "version", "revision", "x"]), SCALARS,
                             max_size=3), max_size=2),
)
KEYS = ["name", "version", "license", "backends", "edition", "universal", "cuda", "rocm", "hub",
        "python-depends", "kernel-depends", "src", "include", "pyext", "minver", "maxver",
        "stable-abi", "cxx-flags", "backend", "depends", "cuda-capabilities", "cuda-flags",
        "cuda-minver", "rocm-archs", "hip-flags", "sycl-flags", "language", "capabilities", "archs",
        "repo-id", "branch", "upstream", "source", "torch", "torch-noarch", "tvm-ffi", "kernel",
        "general", "cuda_capabilities", "rocm_archs", "x", "", "a b", "é"]


def sites(document: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every table of the document (as a key path), the root included."""
    out = [path]
    for key, value in document.items():
        if isinstance(value, dict):
            out.extend(sites(value, (*path, key)))
    return out


def table_at(document: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    target = document
    for part in path:
        target = target[part]
    return target


def outcome(text: str, root: Path) -> KernelBuilderSpec | ConfigError:
    """Parse; return the spec or the checked ConfigError. Any other exception escapes the test."""
    try:
        spec = parse(text, root)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, f"not one line: {message!r}"
        assert FILE in message, message
        if exc.key is not None:
            assert exc.key in message, message
        return exc
    # A spec answers its helpers.
    for backend in spec.general.backends:
        spec.units_for(backend)
        spec.stable_abi_for(backend)
    spec.torch_specifier()
    spec.cuda_specifier()
    return spec


MUTATIONS = st.sampled_from(["set", "delete", "replace-value"])


def mutated(base: dict[str, Any], data: st.DataObject, most: int) -> dict[str, Any]:
    """A copy of ``base`` with 1 to ``most`` keys set, deleted or given another value."""
    document = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, most), label="mutations")):
        site = data.draw(st.sampled_from(sites(document)), label="site")
        table = table_at(document, site)
        kind = data.draw(MUTATIONS, label="kind")
        if kind == "delete" and table:
            del table[data.draw(st.sampled_from(sorted(table)), label="deleted")]
        elif kind == "replace-value" and table:
            key = data.draw(st.sampled_from(sorted(table)), label="replaced")
            table[key] = copy.deepcopy(data.draw(VALUES, label="value"))
        else:
            # a fresh copy: a drawn value must never be planted into itself on a later step
            table[data.draw(st.sampled_from(KEYS), label="key")] = copy.deepcopy(data.draw(VALUES, label="value"))
    return document


@settings(FUZZ)
@given(base=st.sampled_from(sorted(BASES)), data=st.data())
def test_fuzz_mutated_documents(base: str, data: st.DataObject, tree: Path) -> None:
    document = mutated(BASES[base], data, 3)
    try:
        text = tomli_w.dumps(document)
    except (TypeError, ValueError):  # a value TOML cannot hold (NUL in a key, nan is fine)
        return
    outcome(text, tree)


@settings(FUZZ)
@given(base=st.sampled_from(sorted(DOCUMENTS)), data=st.data())
def test_fuzz_damaged_text(base: str, data: st.DataObject, tree: Path) -> None:
    """Lines dropped, duplicated or cut: syntax errors and half documents alike end cleanly."""
    lines = DOCUMENTS[base].splitlines()
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        op = data.draw(st.integers(0, 3), label="op")
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])), label="cut")]
        else:
            lines[i] = lines[i] + data.draw(st.sampled_from(['"', "]", "[", " = 1", ",", "\\"]), label="junk")
    outcome("\n".join(lines), tree)


@settings(FUZZ, max_examples=60)
@given(base=st.sampled_from(["v2", "v3", "v4", "v5"]), data=st.data())
def test_fuzz_planted_unknown_key_is_named(base: str, data: st.DataObject, tree: Path) -> None:
    """An unknown key planted in a valid document is refused, naming that key."""
    document = copy.deepcopy(BASES[base])
    site = data.draw(st.sampled_from(sites(document)), label="site")
    table = table_at(document, site)
    if site == ("kernel",):  # a key under [kernel] is a unit name, not a setting
        return
    key = data.draw(st.sampled_from(["frobnicate", "srcs", "backends2", "cuda-capability", "verison"]),
                    label="key")
    table[key] = "x"
    result = outcome(tomli_w.dumps(document), tree)
    assert isinstance(result, ConfigError), f"{key!r} at {site} was accepted"
    assert "unknown key" in str(result), str(result)
    assert result.key is not None and result.key.endswith(key), str(result)


def test_kernel_depends_per_backend_as_metadata_json_lists_them(tree: Path) -> None:
    """[general] kernel-depends apply to every backend, [general.cuda]'s to CUDA builds; each as the
    `kernels` loader reads a metadata.json entry (repo-id with version or revision)."""
    from kernels._rust import Metadata
    from wheelfactory.project.build_toml import kernel_depends_for

    declared = parse(V5, tree).general.kernel_depends
    cuda = kernel_depends_for(declared, "cuda")
    assert cuda == ({"repo-id": "kernels-community/triton-layer-norm", "version": 1},
                    {"repo-id": "kernels-community/deep-gemm", "revision": "34fa"})
    assert kernel_depends_for(declared, "cpu") == cuda[:1]
    document = {"id": "_activation_cuda_0123abcd", "name": "activation", "version": 3, "license": "apache-2.0",
                "python-depends": [], "backend": {"type": "cuda"}, "kernel-depends": list(cuda)}
    theirs = Metadata.from_bytes(json.dumps(document).encode())
    assert [d.repo_id for d in theirs.kernel_depends] == ["kernels-community/triton-layer-norm",
                                                           "kernels-community/deep-gemm"]
