"""The setup.py a kernel-builder variant builds with, and the registration.h its bindings include:
what kernel-builder does with Nix and CMake, done with torch's own extension builder. Each
``[kernel.X]`` unit is compiled with its own flags, includes and archs, then linked with the
``[torch] src`` bindings into one library; every compile gets the backend's define
(``CPU_KERNEL``, ``CUDA_KERNEL``, ``ROCM_KERNEL``), as kernel-builder's templates set it. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files

from wheelfactory._runtime._record import BUILD_RECORD_FILE
from wheelfactory.plan.identity import Variant
from wheelfactory.project.build_toml import KernelBuilderSpec
from wheelfactory.project.stage import abi_defines, setup_py_head

GENERATED_DIR = "_wheelfactory"  # in the staging copy: registration.h
BACKEND_DEFINES = {"cpu": "CPU_KERNEL", "cuda": "CUDA_KERNEL", "rocm": "ROCM_KERNEL"}


def registration_h() -> str:
    """The macros kernel-builder bindings include as "registration.h": the op library named by a
    macro (TORCH_EXTENSION_NAME), and a module init so that ``import`` loads the library."""
    template = files("wheelfactory.data").joinpath("templates", "kernel-builder", "registration.h")
    return template.read_text(encoding="utf-8")


@dataclass(frozen=True)
class UnitBuild:
    """One ``[kernel.X]`` unit as this variant compiles it."""

    name: str
    sources: tuple[str, ...]  # relative to the staging root
    include_dirs: tuple[str, ...]  # relative to the staging root
    cxx_flags: tuple[str, ...]
    device_flags: tuple[str, ...]  # nvcc (CUDA) or hipcc (ROCm) flags, archs included
    archs: tuple[str, ...]  # what the unit's device code is compiled for ("8.0", "gfx942")


def setup_py(
    spec: KernelBuilderSpec,
    variant: Variant,
    namespace: str,
    version: str,
    requires: tuple[str, ...],
    sources: tuple[str, ...],
    units: tuple[UnitBuild, ...],
    subpackages: tuple[str, ...] = (),
) -> str:
    backend = variant.key.backend.kind
    device = backend in ("cuda", "rocm")
    package = spec.general.python_name
    package_dir = str(spec.python_package)
    defines = [
        (BACKEND_DEFINES.get(backend, backend.upper() + "_KERNEL"), None),
        *abi_defines(variant),
    ]
    abi3 = variant.key.python == "abi3"
    include_dirs = [*(str(p) for p in spec.torch.include), GENERATED_DIR, "."]
    cxx = [*spec.torch.cxx_flags, *variant.settings.extra_cflags]
    nvcc = (
        [
            *variant.nvcc_defaults(variant.settings.extra_cuda_cflags),
            *variant.settings.extra_cuda_cflags,
        ]
        if device
        else []
    )
    extension = "CUDAExtension" if device else "CppExtension"
    data = [f"*.{ext}" for ext in spec.torch.data_extensions]
    unit_specs = [
        {
            "name": u.name,
            "sources": list(u.sources),
            "include_dirs": list(u.include_dirs),
            "cxx": list(u.cxx_flags),
            "device": list(u.device_flags),
        }
        for u in units
        if u.sources
    ]
    head = setup_py_head(variant, " of a kernel-builder project. Edit build.toml.")
    return f"""{head}
HERE = os.path.dirname(os.path.abspath(__file__))
# build.toml [kernel.X] units: each compiled with its own flags, includes and archs, then linked
# with the [torch] src bindings into one library.
UNITS = {json.dumps(unit_specs, indent=4)}


class UnitsBuildExtension(BuildExtension):
    def build_extension(self, ext):
        # By now torch has added its flags (TORCH_EXTENSION_NAME, the C++ ABI) to ext's arguments.
        # Less one, as kernel-builder's CMake build never sets it: TORCH_API_INCLUDE_EXTENSION_H
        # makes <torch/torch.h> include <torch/extension.h> and pybind11, which cannot compile under
        # the Python limited API (Py_LIMITED_API), and the ops are registered with the dispatcher.
        for flags in ext.extra_compile_args.values():
            flags[:] = [f for f in flags if f != "-DTORCH_API_INCLUDE_EXTENSION_H"]
        base = ext.extra_compile_args
        objects = []
        for unit in UNITS:
            objects += self.compiler.compile(
                unit["sources"], output_dir=os.path.join(self.build_temp, "unit-" + unit["name"]),
                macros=ext.define_macros, include_dirs=[os.path.join(HERE, d) for d in unit["include_dirs"]]
                + ext.include_dirs, debug=self.debug, depends=ext.depends,
                extra_postargs={{"cxx": base["cxx"] + unit["cxx"], "nvcc": base.get("nvcc", []) + unit["device"]}})
        ext.extra_objects = list(ext.extra_objects or []) + objects
        super().build_extension(ext)


setup(
    name={spec.general.name!r},
    version={version!r},
    packages={[package, *subpackages]!r},
    package_dir={{{package!r}: {package_dir!r}}},
    package_data={ {package: [BUILD_RECORD_FILE, *data], **{sub: data for sub in subpackages}}!r},
    include_package_data=False,
    python_requires=">=3.9",
    install_requires={list(requires)!r},
    {"license=" + repr(spec.general.license) + "," if spec.general.license else ""}
    ext_modules=[
        {extension}(
            name={package + "." + namespace!r},
            sources={list(sources)!r},
            include_dirs=[os.path.join(HERE, d) for d in {include_dirs!r}],
            define_macros={defines!r},
            extra_compile_args={{"cxx": {cxx!r}, "nvcc": {nvcc!r}}},
            py_limited_api={abi3!r},
        )
    ],
    cmdclass={{"build_ext": UnitsBuildExtension}},
    options={{"bdist_wheel": {{"py_limited_api": "cp39"}}}} if {abi3!r} else {{}},
)
"""
