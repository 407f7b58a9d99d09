"""The loader vendored into every kernel package as ``<pkg>/_runtime`` (stdlib + torch only).

A kernel package's ``__init__`` creates one ``KernelPackage`` and asks it for ops; the first call
decides between the prebuilt library (checked against the environment before dlopen), a JIT build
of the shipped sources (hashed, locked cache) and the reference ops (one warning). See
ARCHITECTURE.md, "A load (inside an installed kernel package)".

Importing this package does no I/O and imports none of its modules: the names below resolve
lazily (PEP 562), so a load, measured from ``import <pkg>`` to the first op returning, imports only
what its path needs. A prebuilt load imports ``_package`` (``KernelPackage``, the top of the
modules' layers: pyproject.toml's runtime contract) and ``_prebuilt``, the lean check near their
bottom (``_gpus`` too for a GPU build). What the lean check and the full rule both read lives here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The build record's file name (beside the library it describes) and schema, here because the full
# rule (_record) and the lean check (_prebuilt) both read them and neither imports the other.
BUILD_RECORD_FILE = "_build.json"
RECORD_SCHEMA = 1
# The JSON types each key may hold (a bool is no int here; "toolkit"'s rule depends on the backend)
# and what a key left out stands for; a key in neither table is required ("toolkit" aside).
RECORD_KEYS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("name", "variant", "torch", "backend", "python", "arch", "namespace", "library"), (str,)
    ),
    **dict.fromkeys(("version", "built_with_torch", "source_digest"), (str, type(None))),
    **dict.fromkeys(("cxx11_abi", "stable_abi"), (bool,)),
    **dict.fromkeys(("ops", "arch_list", "parts"), (list,)),
    "schema": (int,),
}
RECORD_ABSENT: dict[str, object] = {
    "version": None,
    "built_with_torch": None,
    "source_digest": None,
    "arch_list": [],
    "stable_abi": False,
    "parts": [],
}

__all__ = [
    "BUILD_RECORD_FILE",
    "LOAD_MODES",
    "BuildRecord",
    "CudaArch",
    "Decision",
    "Environment",
    "InvalidArch",
    "InvalidVersion",
    "JitUnavailable",
    "KernelLoadError",
    "KernelPackage",
    "LoadResult",
    "MajorMinor",
    "RecordError",
    "RecordUnavailable",
    "ReferenceFallbackWarning",
    "RuntimeLoaderError",
    "Settings",
    "SettingsError",
    "ToolCheck",
    "UnsafeCacheDirError",
    "check_build_tools",
    "check_nvcc_version",
    "decide_prebuilt",
    "detect_environment",
    "format_decisions",
    "main",
    "parse_build_record",
    "read_build_record",
    "read_settings",
    "select_cuda_archs",
    "with_gpus",
]

_HOME = {
    "LOAD_MODES": "_settings",
    "Settings": "_settings",
    "read_settings": "_settings",
    "BuildRecord": "_record",
    "RecordUnavailable": "_record",
    "decide_prebuilt": "_record",
    "parse_build_record": "_record",
    "read_build_record": "_record",
    "CudaArch": "_arch",
    "MajorMinor": "_versions",
    "Decision": "_decision",
    "format_decisions": "_decision",
    "Environment": "_env",
    "detect_environment": "_env",
    "with_gpus": "_env",
    "InvalidArch": "_errors",
    "InvalidVersion": "_errors",
    "JitUnavailable": "_errors",
    "KernelLoadError": "_errors",
    "RecordError": "_errors",
    "ReferenceFallbackWarning": "_errors",
    "RuntimeLoaderError": "_errors",
    "SettingsError": "_errors",
    "UnsafeCacheDirError": "_errors",
    "KernelPackage": "_package",
    "LoadResult": "_loader",
    "ToolCheck": "_toolkit",
    "check_build_tools": "_toolkit",
    "check_nvcc_version": "_toolkit",
    "select_cuda_archs": "_toolkit",
    "main": "_report",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from ._arch import CudaArch
    from ._decision import Decision, format_decisions
    from ._env import Environment, detect_environment, with_gpus
    from ._errors import (
        InvalidArch,
        InvalidVersion,
        JitUnavailable,
        KernelLoadError,
        RecordError,
        ReferenceFallbackWarning,
        RuntimeLoaderError,
        SettingsError,
        UnsafeCacheDirError,
    )
    from ._loader import LoadResult
    from ._package import KernelPackage
    from ._record import (
        BuildRecord,
        RecordUnavailable,
        decide_prebuilt,
        parse_build_record,
        read_build_record,
    )
    from ._report import main
    from ._settings import LOAD_MODES, Settings, read_settings
    from ._toolkit import ToolCheck, check_build_tools, check_nvcc_version, select_cuda_archs
    from ._versions import MajorMinor
