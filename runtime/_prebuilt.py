"""The lean prebuilt check: what a kernel package's first op call runs before anything else.

``load_prebuilt`` reads ``_build.json`` with ``json``, checks it against torch and this interpreter
(``prebuilt_fits``) and loads ``_C`` with ``torch.ops.load_library``, importing nothing that
``import torch`` has not imported already (a GPU build adds ``_gpus``, the check's GPU half).
Whatever the check is not sure of (no record, a record for another environment, ``<PKG>_LOAD``
other than ``auto`` or ``prebuilt``, a failed dlopen) it leaves to the full loader, ``_loader``,
which decides again with the typed record and keeps the decision record.

Low in the runtime's layers, so the rest reads what it reads through it: the settings layer
``<PKG>_LOAD`` (``load_mode``), ``_env`` the torch facts (``environment_facts``), the full loader
the ops it binds (``bind_ops``). ``prebuilt_fits`` accepts what the full rule
(``_record.parse_build_record`` and ``decide_prebuilt``: ``_fit.check_fit`` plus the GPU archs)
accepts, and nothing it rejects; spellings it does not know (a version with leading blanks, say)
it leaves to the full rule. tests/runtime/test_runtime_prebuilt.py holds the two together on
generated records and environments, and checks what the hot path imports. Each node of this file
is compiled in every process without bytecode caches (a uv install, PYTHONDONTWRITEBYTECODE): keep
it short.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import BUILD_RECORD_FILE, RECORD_ABSENT, RECORD_KEYS, RECORD_SCHEMA

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ._gpus import Gpus
    from ._loader import LoadResult
    from ._package import KernelPackage

    OpCallable = Callable[..., Any]
    # torch.__version__, torch.version.cuda, torch.version.hip, C++ ABI, (Python major, minor), machine
    Facts = tuple[str, object, object, bool, tuple[int, int], str]

__all__ = [
    "Loaded",
    "bind_ops",
    "declared_ops",
    "env_prefix",
    "environment_facts",
    "load_mode",
    "load_prebuilt",
    "major_minor",
    "prebuilt_fits",
    "reference_ops",
]

LEAN_MODES = ("auto", "prebuilt")  # <PKG>_LOAD values that try the lean path
# The fit rule's constant, repeated (importing _fit on every load is what this module avoids);
# the agreement test compares them.
ABI3_MIN_PYTHON = (3, 9)
_LIBRARY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-")


def env_prefix(package: str) -> str:
    """``mykernels`` -> ``MYKERNELS``; ``my-kernels`` -> ``MY_KERNELS``."""
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in package).upper()


def load_mode(package: str, environ: Mapping[str, str]) -> str:
    """``<PKG>_LOAD`` as the settings layer reads it (``auto`` when unset); not validated here."""
    return environ.get(f"{env_prefix(package)}_LOAD", "").strip().lower() or "auto"


def environment_facts() -> Facts:
    """What a build record is compared with, as torch and this interpreter report it."""
    import torch

    cuda, hip = getattr(torch.version, "cuda", None), getattr(torch.version, "hip", None)
    python = (sys.version_info.major, sys.version_info.minor)
    return (
        str(torch.__version__),
        cuda,
        hip,
        bool(torch.compiled_with_cxx11_abi()),
        python,
        platform.machine(),
    )


def major_minor(text: object) -> tuple[int, int] | None:
    """``2.13.0+cpu``, ``13.0``, ``7.1.25424-dd7f`` -> (major, minor), as ``_fit.parse_major_minor``
    reads them; None for anything else, and for digits other than ASCII (left to that parser)."""
    if not isinstance(text, str):
        return None
    major, _, rest = text.partition(".")
    minor = rest.partition(".")[0]
    ok = major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()
    return (int(major), int(minor)) if ok else None


def prebuilt_fits(data: object, facts: Facts, gpus: Gpus | None = None) -> bool:
    """Does the full rule accept the build record ``data`` (as ``json.loads`` returns it) in the
    environment ``facts`` (``environment_facts()``)? True only if it does; False where it does not
    or where this check is not sure. ``gpus`` (default: the visible GPUs) is asked last."""
    torch_version, cuda, hip, cxx11_abi, python, machine = facts
    # The record, as parse_build_record validates it.
    if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA:
        return False
    for key, kinds in RECORD_KEYS.items():
        if type(data.get(key, RECORD_ABSENT.get(key))) not in kinds:
            return False
    stable_abi, arch_list, library = (
        data.get("stable_abi", False),
        data.get("arch_list", []),
        data["library"],
    )
    for name in [data["namespace"], *data["ops"]]:
        if not (isinstance(name, str) and name.isascii() and name.isidentifier()):
            return False
    # a bare file name: a path could make us dlopen any file
    stem, _, suffix = library.rpartition(".")
    if not (
        stem
        and suffix in ("so", "pyd", "dylib")
        and stem[0] not in ".+-"
        and _LIBRARY_CHARS.issuperset(library)
    ):
        return False
    built, built_python = major_minor(data["torch"]), data["python"]
    if built is None or not all(type(a) is str for a in arch_list):
        return False
    # The environment, as detect_environment reads it (a toolkit version it cannot parse: not sure).
    here, env_cuda, env_hip = major_minor(torch_version), major_minor(cuda), major_minor(hip)
    if (
        here is None
        or (isinstance(cuda, str) and cuda and not env_cuda)
        or (isinstance(hip, str) and hip and not env_hip)
    ):
        return False
    # The fit, as _fit.check_fit decides it.
    if data["arch"] != machine:
        # Spelt another way (AMD64, arm64): only then the fit rule's machine names.
        from ._fit import normalize_machine

        if normalize_machine(data["arch"]) != normalize_machine(machine):
            return False
    if stable_abi:  # the stable ABI is a C shim: newer torch serves it, whatever its C++ ABI
        if here < built:
            return False
    elif here != built or cxx11_abi != data["cxx11_abi"]:
        return False
    if built_python == "abi3" and tuple(python) < ABI3_MIN_PYTHON:
        return False
    if built_python != "abi3" and major_minor(built_python) != tuple(python):
        return False
    backend = data["backend"]
    if backend == "cpu":
        return True  # in a GPU torch too: its CPU ops run prebuilt
    env_backend, env_toolkit = (
        ("rocm", env_hip) if env_hip else ("cuda", env_cuda) if env_cuda else ("cpu", None)
    )
    built_toolkit = major_minor(data.get("toolkit"))
    if backend != env_backend or env_toolkit is None or built_toolkit is None:
        return False
    # The check's GPU half, imported here: a CPU load never compiles it.
    from ._gpus import gpu_build_fits

    return gpu_build_fits(backend, built_toolkit, arch_list, env_toolkit, gpus)


class Loaded:
    """A finished load: the op callables, each op's mode, the warning to emit once, and the
    ``LoadResult`` (after a lean load: the record's text, which ``_loader`` makes it from)."""

    __slots__ = ("op_modes", "ops", "result", "warning")

    def __init__(
        self,
        ops: Mapping[str, OpCallable],
        op_modes: Mapping[str, str],
        warning: str | None,
        result: LoadResult | str,
    ) -> None:
        self.ops, self.op_modes, self.warning, self.result = ops, op_modes, warning, result


def bind_ops(package: KernelPackage, mode: str, library: str, namespace: str) -> Loaded:
    """The loaded library's ops; those it lacks use the reference ops, and the warning names them.
    (``result`` is the caller's to fill in.)"""
    import torch

    library_ns = getattr(torch.ops, namespace)
    ops = reference_ops(package, package.op_names)
    modes = dict.fromkeys(package.op_names, "reference")
    for op in package.op_names:
        try:
            ops[op] = getattr(library_ns, op).default  # the overload skips the packet's lookup
            modes[op] = mode
        except (AttributeError, RuntimeError):
            pass
    missing = [op for op, m in modes.items() if m != mode]
    warning = f"{package.name}: the {mode} library {library} lacks ops {missing}: they use the reference ops"
    return Loaded(ops, modes, warning if missing else None, "")


def reference_ops(package: KernelPackage, names: Sequence[str]) -> dict[str, OpCallable]:
    """Callables for ``names`` that import the package's reference module when first called."""
    return {op: _reference_op(package, op) for op in names}


def _reference_op(package: KernelPackage, op: str) -> OpCallable:
    return lambda *args, **kwargs: getattr(package.reference(), op)(*args, **kwargs)


def load_prebuilt(package: KernelPackage, environ: Mapping[str, str]) -> Loaded | None:
    """The lean path; None leaves the load to the full loader, which decides and says why.
    (So does a CPU build in a GPU torch: the full loader sends GPU tensors to the reference ops.)"""
    if load_mode(package.name, environ) not in LEAN_MODES:
        return None
    try:
        with open(package.package_dir / BUILD_RECORD_FILE, encoding="utf-8") as file:
            text = file.read()
        data, facts = json.loads(text), environment_facts()
        library = package.package_dir / str(data["library"])
        if not (prebuilt_fits(data, facts) and library.is_file()):
            return None
        if data["backend"] == "cpu" and (facts[1] or facts[2]):  # a CPU build in a GPU torch
            return None
        import torch

        torch.ops.load_library(str(library))  # type: ignore[no-untyped-call]
    # No record, an unreadable one, an odd torch, a failed dlopen: the full loader tries
    # again, and says why in the decision record.
    except Exception:  # noqa: BLE001
        return None
    loaded = bind_ops(package, "prebuilt", str(library), data["namespace"])
    loaded.result = text
    return loaded


def declared_ops(package_dir: Path) -> tuple[str, ...]:
    """The ops kernel.toml declares: the build record's ``ops`` (the JIT spec's in a package
    without a prebuilt library); () when neither names them."""
    for relative in (BUILD_RECORD_FILE, "_sources/jit.json"):
        try:
            with open(package_dir / relative, encoding="utf-8") as file:
                ops = json.load(file).get("ops")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(ops, list) and all(isinstance(op, str) and op.isidentifier() for op in ops):
            return tuple(ops)
    return ()
