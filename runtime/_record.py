"""The build record shipped beside a prebuilt ``_C`` and the pure "can it load here?" decision.

``parse_build_record`` turns JSON into a typed ``BuildRecord`` (unknown keys ignored, missing or
malformed required keys -> ``RecordError``). ``decide_prebuilt`` compares it with an
``Environment`` and returns one ``Decision``; it does no I/O, so tests feed it fake environments.
The check runs BEFORE dlopen: a mismatched library is never mapped, so no "undefined symbol".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ._decision import Decision
from ._env import Environment, normalize_machine
from ._errors import InvalidArch, InvalidVersion, RecordError
from ._versions import BACKENDS, Backend, MajorMinor

if TYPE_CHECKING:
    from ._arch import CudaArch

__all__ = [
    "BUILD_RECORD_FILE",
    "BuildRecord",
    "RecordUnavailable",
    "decide_prebuilt",
    "parse_build_record",
    "read_build_record",
]

BUILD_RECORD_FILE = "_build.json"
RECORD_SCHEMA = 1

# Patterns are compiled on first use (re's cache), not at import: a source-only install never needs them.
_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
_LIBRARY_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(so|pyd|dylib)$"
_GFX = r"^gfx[0-9a-f]+(:.*)?$"


class BuildRecord(NamedTuple):
    """The factory's description of the prebuilt library it shipped (``_build.json``).

    A NamedTuple (immutable, typed) rather than a dataclass: it is defined inside the measured
    first op call, and a dataclass costs ~1 ms of code generation there.
    """

    name: str
    variant: str
    torch: MajorMinor
    backend: Backend
    toolkit: MajorMinor | None
    cxx11_abi: bool
    python: str  # "abi3" or "3.11"
    arch: str
    namespace: str
    ops: tuple[str, ...]
    library: str  # a file name inside the package directory
    arch_list: tuple[str, ...] = ()  # CUDA archs ("9.0a", "12.0+PTX") or ROCm gfx names
    stable_abi: bool = False
    version: str | None = None

    @property
    def cuda_archs(self) -> tuple[CudaArch, ...]:
        from ._arch import CudaArch  # only CUDA records need it; keeps CPU loads lean

        return tuple(CudaArch.parse(a) for a in self.arch_list) if self.backend == "cuda" else ()


class RecordUnavailable(NamedTuple):
    """No usable record: a source-only install, a missing library, or a corrupt/unknown file."""

    reason: str


def _require(data: Mapping[str, object], key: str, kind: type, source: str) -> object:
    if key not in data:
        raise RecordError(f"{source}: missing required key {key!r}")
    value = data[key]
    # bool is an int subclass: do not let true/false pass for a number or the reverse.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise RecordError(f"{source}: key {key!r} must be {kind.__name__}, got {value!r}")
    return value


def str_list(value: object, key: str, source: str) -> tuple[str, ...]:
    """A JSON list of strings from a record or spec file, or RecordError naming the file and key."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"{source}: key {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


def parse_build_record(data: object, source: str = BUILD_RECORD_FILE) -> BuildRecord:
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")
    schema = _require(data, "schema", int, source)
    if schema != RECORD_SCHEMA:
        raise RecordError(
            f"{source}: record schema {schema} is not the one this runtime reads ({RECORD_SCHEMA})"
        )
    backend = str(_require(data, "backend", str, source))
    if backend not in BACKENDS:
        raise RecordError(f"{source}: backend {backend!r} is not one of {', '.join(BACKENDS)}")
    try:
        torch_version = MajorMinor.parse(str(_require(data, "torch", str, source)))
        toolkit_raw = data.get("toolkit")
        if backend == "cpu":
            toolkit = None
        elif isinstance(toolkit_raw, str):
            toolkit = MajorMinor.parse(toolkit_raw)
        else:
            raise RecordError(f"{source}: backend {backend!r} needs a toolkit version, got {toolkit_raw!r}")
    except InvalidVersion as exc:
        raise RecordError(f"{source}: {exc}") from exc
    python = str(_require(data, "python", str, source))
    if python != "abi3":
        try:
            MajorMinor.parse(python)
        except InvalidVersion as exc:
            raise RecordError(f"{source}: python must be 'abi3' or 'X.Y', got {python!r}") from exc
    namespace = str(_require(data, "namespace", str, source))
    if not re.match(_IDENTIFIER, namespace):
        raise RecordError(f"{source}: namespace {namespace!r} is not an identifier")
    ops = str_list(_require(data, "ops", list, source), "ops", source)
    bad_ops = [op for op in ops if not re.match(_IDENTIFIER, op)]
    if bad_ops:
        raise RecordError(f"{source}: op names {bad_ops!r} are not identifiers")
    library = str(_require(data, "library", str, source))
    if not re.match(_LIBRARY_NAME, library):
        # A path here could make us dlopen any file on the system: only a bare file name is allowed.
        raise RecordError(f"{source}: library {library!r} must be a bare file name like '_C.abi3.so'")
    arch_list = str_list(data.get("arch_list", []), "arch_list", source)
    if backend == "cuda":
        from ._arch import CudaArch

        try:
            for arch in arch_list:
                CudaArch.parse(arch)
        except InvalidArch as exc:
            raise RecordError(f"{source}: {exc}") from exc
    elif backend == "rocm":
        bad = [a for a in arch_list if not re.match(_GFX, a)]
        if bad:
            raise RecordError(f"{source}: ROCm arch_list entries {bad!r} are not gfx names")
    stable_abi = data.get("stable_abi", False)
    if not isinstance(stable_abi, bool):
        raise RecordError(f"{source}: key 'stable_abi' must be bool, got {stable_abi!r}")
    version = data.get("version")
    return BuildRecord(
        name=str(_require(data, "name", str, source)),
        variant=str(_require(data, "variant", str, source)),
        torch=torch_version,
        backend=backend,
        toolkit=toolkit,
        cxx11_abi=bool(_require(data, "cxx11_abi", bool, source)),
        python=python,
        arch=normalize_machine(str(_require(data, "arch", str, source))),
        namespace=namespace,
        ops=ops,
        library=library,
        arch_list=arch_list,
        stable_abi=stable_abi,
        version=version if isinstance(version, str) else None,
    )


def read_build_record(package_dir: Path) -> BuildRecord | RecordUnavailable:
    """Read ``<package_dir>/_build.json``; every problem becomes a ``RecordUnavailable`` reason."""
    path = package_dir / BUILD_RECORD_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RecordUnavailable(f"no build record ({BUILD_RECORD_FILE}): a source-only install")
    except OSError as exc:
        return RecordUnavailable(f"cannot read build record {path}: {exc}")
    try:
        record = parse_build_record(json.loads(text), source=str(path))
    except json.JSONDecodeError as exc:
        return RecordUnavailable(f"build record {path} is corrupt: {exc}")
    except RecordError as exc:
        return RecordUnavailable(f"build record unusable: {exc}")
    if not (package_dir / record.library).is_file():
        return RecordUnavailable(f"build record names {record.library}, which is missing from {package_dir}")
    return record


def _abi_name(cxx11: bool) -> str:
    return "cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=1)" if cxx11 else "pre-cxx11 ABI (_GLIBCXX_USE_CXX11_ABI=0)"


def _torch_flavour(env: Environment) -> str:
    if env.hip is not None:
        return f"a ROCm {env.hip} build"
    if env.cuda is not None:
        return f"a CUDA {env.cuda} build"
    return "a CPU-only build"


def _backend_problems(env: Environment, record: BuildRecord, notes: list[str]) -> list[str]:
    if record.backend == "cpu":
        if env.backend != "cpu":
            flavour = _torch_flavour(env)
            notes.append(f"CPU-only build in {flavour} of torch: {env.backend} tensors use the reference ops")
        return []
    tk = record.toolkit
    if record.backend == "cuda":
        if env.cuda is None or tk is None:
            return [f"built for CUDA {tk}, this torch is {_torch_flavour(env)}"]
        if env.cuda.major != tk.major:
            return [f"built with CUDA {tk}, this torch uses CUDA {env.cuda} (major versions differ)"]
        if env.cuda.minor < tk.minor:
            return [f"built with CUDA {tk}, newer than this torch's CUDA {env.cuda}"]
        if env.cuda != tk:
            notes.append(f"CUDA {tk} build runs on CUDA {env.cuda} (same major, newer minor)")
        return []
    # ROCm promises no binary compatibility across minor releases: require the same major.minor.
    if env.hip is None or tk is None:
        return [f"built for ROCm {tk}, this torch is {_torch_flavour(env)}"]
    if env.hip != tk:
        return [f"built for ROCm {tk}, this torch uses ROCm {env.hip}"]
    return []


def _gpu_problems(env: Environment, record: BuildRecord, notes: list[str]) -> list[str]:
    if record.backend == "cuda" and env.backend == "cuda":
        archs = record.cuda_archs
        if not archs:
            notes.append("the record lists no CUDA archs, GPU support not checked")
            return []
        problems = []
        for cap in env.gpu_capabilities:
            if not any(a.serves(cap) for a in archs):
                problems.append(
                    f"arch_list {';'.join(record.arch_list)} has no kernel for the GPU's "
                    f"compute capability {cap} (sm_{cap.major}{cap.minor})"
                )
        return problems
    if record.backend == "rocm" and env.backend == "rocm" and record.arch_list:
        names = {a.split(":", 1)[0] for a in record.arch_list}
        return [
            f"arch_list {';'.join(record.arch_list)} has no code for the GPU's {gfx}"
            for gfx in env.gpu_archs
            if gfx not in names
        ]
    return []


def decide_prebuilt(env: Environment, record: BuildRecord | RecordUnavailable) -> Decision:
    """Pure: can the prebuilt library described by ``record`` be loaded into ``env``?"""
    if isinstance(record, RecordUnavailable):
        return Decision("prebuilt", False, record.reason)
    problems: list[str] = []
    notes: list[str] = []
    if record.arch != env.machine:
        problems.append(f"built for {record.arch}, this machine is {env.machine}")
    if record.stable_abi:
        # torch's stable ABI is a C shim: later torch versions keep serving it, and no
        # libstdc++ types cross it, so the C++ ABI flag does not matter.
        if env.torch < record.torch:
            problems.append(f"stable-ABI build needs torch >= {record.torch}, this is torch {env.torch}")
        elif env.torch != record.torch:
            notes.append(f"stable-ABI build for torch >= {record.torch} serves torch {env.torch}")
    else:
        if env.torch != record.torch:
            problems.append(f"built for torch {record.torch}, this is torch {env.torch}")
        if env.cxx11_abi != record.cxx11_abi:
            built, here = _abi_name(record.cxx11_abi), _abi_name(env.cxx11_abi)
            problems.append(f"built with the {built}, this torch uses the {here}")
    if record.python != "abi3" and MajorMinor.parse(record.python) != env.python:
        problems.append(f"built for Python {record.python} (not abi3), this is Python {env.python}")
    problems += _backend_problems(env, record, notes)
    if not problems:
        problems += _gpu_problems(env, record, notes)
    if problems:
        return Decision("prebuilt", False, "; ".join(problems))
    detail = f" ({'; '.join(notes)})" if notes else ""
    return Decision("prebuilt", True, f"{record.variant} matches this environment{detail}")
